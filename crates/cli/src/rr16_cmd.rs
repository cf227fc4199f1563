//! `psikit rr16 send|receive`: two-party malicious-secure PSI (Rindal-Rosulek)
//! over TCP, one party listening and the other connecting.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use psikit_protocols::common::connect::{Peer, ServerAddr};
use psikit_protocols::io::read_rows;
use psikit_protocols::rr16::{facade, Phases, Rr16Config, Rr16Params};

use crate::args::{ClientTlsArgs, CsvArgs, NetArgs, ServerTlsArgs};
use crate::matches::{unique_keys, write_matches};
use crate::report;

#[derive(Subcommand)]
pub enum Rr16Command {
    /// The sender: contributes its set; learns nothing unless --reveal.
    Send(PartyArgs),
    /// The receiver: learns which of its rows are in the sender's set.
    Receive(PartyArgs),
}

#[derive(Args)]
pub struct PartyArgs {
    /// This party's CSV file.
    #[arg(long, short)]
    pub input: PathBuf,
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Where to write matched rows (the receiver always; the sender only
    /// with --reveal).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Wait for the peer on this address.
    #[arg(long, conflicts_with = "connect")]
    pub listen: Option<String>,
    /// Connect to the peer at this address.
    #[arg(long)]
    pub connect: Option<String>,
    /// With --listen: give up if the peer has not connected after this many
    /// seconds (default: wait as long as it takes).
    #[arg(long, requires = "listen")]
    pub accept_timeout_secs: Option<u64>,
    /// Semi-honest variant (IKNP, no cut-and-choose): faster, secure only if
    /// both parties follow the protocol.
    #[arg(long)]
    pub semi_honest: bool,
    /// The receiver sends the intersection to the sender (the sender must
    /// then trust the receiver to report it truthfully).
    #[arg(long)]
    pub reveal: bool,
    /// Largest peer set accepted.
    #[arg(long, default_value_t = 1 << 24)]
    pub max_peer_items: u64,
    #[command(flatten)]
    pub server_tls: ServerTlsArgs,
    #[command(flatten)]
    pub client_tls: ClientTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

impl PartyArgs {
    fn config(&self) -> Rr16Config {
        Rr16Config {
            malicious: !self.semi_honest,
            reveal_to_sender: self.reveal,
            max_set_size: self.max_peer_items,
            ..Rr16Config::default()
        }
    }

    fn peer(&self) -> Result<Peer> {
        let limits = self.net.limits()?;
        Ok(match (&self.listen, &self.connect) {
            (Some(addr), None) => Peer::Listen {
                addr: addr.clone(),
                tls: self.server_tls.files(),
                limits,
                accept_timeout: self.accept_timeout_secs.map(Duration::from_secs),
            },
            (None, Some(addr)) => Peer::Connect(ServerAddr {
                addr: addr.clone(),
                tls: self.client_tls.files(),
                limits,
            }),
            _ => bail!("give exactly one of --listen ADDR or --connect ADDR"),
        })
    }
}

fn announce(addr: &str) {
    eprintln!("psikit: waiting for the peer on {addr}");
}

pub fn run(cmd: Rr16Command) -> Result<()> {
    match cmd {
        Rr16Command::Send(a) => send(&a),
        Rr16Command::Receive(a) => receive(&a),
    }
}

pub fn print_run(role: &str, p: &Rr16Params, phases: &Phases, sent: u64, received: u64) {
    println!(
        "{role}: {} OTs in {} chunk(s), Bloom filter {} bits, k = {}, p_chk = {}",
        p.n_ot, p.chunks, p.n_bf, p.k, p.p_chk
    );
    println!(
        "{role}: offline {}, online {}; sent {}, received {}",
        report::secs(phases.offline),
        report::secs(phases.online),
        report::bytes(sent),
        report::bytes(received)
    );
}

fn send(a: &PartyArgs) -> Result<()> {
    if a.reveal && a.output.is_none() {
        bail!("--reveal needs --output FILE for the revealed rows");
    }
    let table = read_rows(&a.input, &a.csv.spec()?)?;
    let (keys, rows_of_key) = unique_keys(&table);
    let out = facade::send_blocking(&a.peer()?, &keys, &a.config(), announce)?;
    print_run(
        "sender",
        &out.params,
        &out.phases,
        out.bytes_sent,
        out.bytes_received,
    );
    if let (Some(revealed), Some(path)) = (&out.revealed, &a.output) {
        let mut matches = vec![false; keys.len()];
        for &i in revealed {
            matches[i] = true;
        }
        let n = write_matches(path, &table, &rows_of_key, &matches)?;
        println!(
            "the receiver reported {} matches; {n} rows written to {}",
            revealed.len(),
            path.display()
        );
    }
    Ok(())
}

fn receive(a: &PartyArgs) -> Result<()> {
    let output = a
        .output
        .as_ref()
        .context("the receiver needs --output FILE")?;
    let table = read_rows(&a.input, &a.csv.spec()?)?;
    let (keys, rows_of_key) = unique_keys(&table);
    let out = facade::receive_blocking(&a.peer()?, &keys, &a.config(), announce)?;
    print_run(
        "receiver",
        &out.params,
        &out.phases,
        out.bytes_sent,
        out.bytes_received,
    );
    let n = write_matches(output, &table, &rows_of_key, &out.matches)?;
    let found = out.matches.iter().filter(|m| **m).count();
    println!(
        "{found} of {} distinct items matched; {n} rows written to {}",
        keys.len(),
        output.display()
    );
    Ok(())
}
