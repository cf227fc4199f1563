//! `psikit psi send|receive`: balanced two-party PSI over TCP (optionally
//! TLS), one party listening and the other connecting. VOLE-PSI
//! (Raghuraman-Rindal) by default, RR16 with `--protocol rr16`; `psikit
//! rr16` is the same run with RR16's own flags.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use psikit_protocols::common::connect::{Peer, ServerAddr};
use psikit_protocols::common::two_party::{self, TwoParty};
use psikit_protocols::io::{read_rows, Table};
use psikit_protocols::NoProgress;

use crate::args::{ClientTlsArgs, CsvArgs, NetArgs, ServerTlsArgs};
use crate::matches::write_matches;

#[derive(Subcommand)]
pub enum PsiCommand {
    /// The sender: contributes its set; learns nothing unless --reveal.
    Send(PsiArgs),
    /// The receiver: learns which of its rows are in the sender's set.
    Receive(PsiArgs),
}

/// Which balanced PSI to run.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Protocol {
    /// Silent VOLE and an OKVS (fastest, least traffic).
    Vole,
    /// OT extension and garbled Bloom filters (Rindal-Rosulek).
    Rr16,
}

#[derive(Args)]
pub struct PsiArgs {
    #[command(flatten)]
    pub party: PartyArgs,
    /// The protocol; both parties must choose the same.
    #[arg(long, value_enum, default_value = "vole")]
    pub protocol: Protocol,
    /// Malicious security (both parties must agree). Default: semi-honest,
    /// secure if both parties follow the protocol.
    #[arg(long)]
    pub malicious: bool,
}

/// What every balanced PSI party needs: its data, where its peer is, the
/// output.
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
    /// The receiver sends the intersection to the sender (the sender must
    /// then trust the receiver to report it truthfully).
    #[arg(long)]
    pub reveal: bool,
    /// Largest peer set accepted.
    #[arg(long, default_value_t = 1 << 24)]
    pub max_peer_items: u64,
    #[command(flatten)]
    pub peer: PeerArgs,
}

/// Where a two-party run's peer is: one side listens, the other connects.
#[derive(Args)]
pub struct PeerArgs {
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
    #[command(flatten)]
    pub server_tls: ServerTlsArgs,
    #[command(flatten)]
    pub client_tls: ClientTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

impl PeerArgs {
    pub fn peer(&self) -> Result<Peer> {
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

/// A family's outcomes as the CLI reports them.
pub trait Report: TwoParty {
    /// Lines describing a party's run (parameters, times, traffic).
    fn sender_lines(out: &Self::SenderOutcome) -> Vec<String>;
    fn receiver_lines(out: &Self::ReceiverOutcome) -> Vec<String>;
    fn revealed(out: &Self::SenderOutcome) -> Option<&[usize]>;
    fn matches(out: &Self::ReceiverOutcome) -> &[bool];
}

pub fn run(cmd: PsiCommand) -> Result<()> {
    // One run per process, freeing big vectors phase after phase.
    psikit_protocols::memory::reuse_freed_memory();
    let (a, sending) = match cmd {
        PsiCommand::Send(a) => (a, true),
        PsiCommand::Receive(a) => (a, false),
    };
    match a.protocol {
        Protocol::Vole => vole(&a, sending),
        Protocol::Rr16 => rr16(&a, sending),
    }
}

#[cfg(feature = "vole")]
fn vole(a: &PsiArgs, sending: bool) -> Result<()> {
    use psikit_protocols::vole_psi::{facade::VolePsi, VoleConfig};
    let cfg = VoleConfig {
        malicious: a.malicious,
        reveal_to_sender: a.party.reveal,
        max_set_size: a.party.max_peer_items,
        key_format: a.party.csv.spec()?.key_format(),
        ..VoleConfig::default()
    };
    party::<VolePsi>(&a.party, &cfg, sending)
}

#[cfg(not(feature = "vole"))]
fn vole(_: &PsiArgs, _: bool) -> Result<()> {
    bail!("this psikit was built without VOLE-PSI (cargo feature 'vole')")
}

#[cfg(feature = "rr16")]
fn rr16(a: &PsiArgs, sending: bool) -> Result<()> {
    crate::rr16_cmd::party_run(&a.party, !a.malicious, sending)
}

#[cfg(not(feature = "rr16"))]
fn rr16(_: &PsiArgs, _: bool) -> Result<()> {
    bail!("this psikit was built without RR16 (cargo feature 'rr16')")
}

pub fn announce(addr: &str) {
    eprintln!("psikit: waiting for the peer on {addr}");
}

/// One party's run of `P` on the CSV rows, with the output the CLI gives.
pub fn party<P: Report>(a: &PartyArgs, cfg: &P::Config, sending: bool) -> Result<()> {
    if sending && a.reveal && a.output.is_none() {
        bail!("--reveal needs --output FILE for the revealed rows");
    }
    let output = match sending {
        true => a.output.as_ref(),
        false => Some(
            a.output
                .as_ref()
                .context("the receiver needs --output FILE")?,
        ),
    };
    let table = read_rows(&a.input, &a.csv.spec()?)?;
    let (keys, rows_of_key) = table.unique_keys();
    let peer = a.peer.peer()?;
    if sending {
        let out = two_party::send_blocking::<P>(&peer, &keys, cfg, announce, &NoProgress)?;
        print_lines("sender", P::sender_lines(&out));
        if let (Some(revealed), Some(path)) = (P::revealed(&out), output) {
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
    } else {
        let out = two_party::receive_blocking::<P>(&peer, &keys, cfg, announce, &NoProgress)?;
        print_lines("receiver", P::receiver_lines(&out));
        write_receiver_output(&table, &rows_of_key, P::matches(&out), output, keys.len())?;
    }
    Ok(())
}

fn write_receiver_output(
    table: &Table,
    rows_of_key: &[Vec<usize>],
    matches: &[bool],
    output: Option<&PathBuf>,
    distinct: usize,
) -> Result<()> {
    let Some(path) = output else { return Ok(()) };
    let n = write_matches(path, table, rows_of_key, matches)?;
    let found = matches.iter().filter(|m| **m).count();
    println!(
        "{found} of {distinct} distinct items matched; {n} rows written to {}",
        path.display()
    );
    Ok(())
}

fn print_lines(role: &str, lines: Vec<String>) {
    for line in lines {
        println!("{role}: {line}");
    }
}

#[cfg(feature = "vole")]
impl Report for psikit_protocols::vole_psi::facade::VolePsi {
    fn sender_lines(out: &Self::SenderOutcome) -> Vec<String> {
        vole_lines(&out.phases, out.bytes_sent, out.bytes_received)
    }

    fn receiver_lines(out: &Self::ReceiverOutcome) -> Vec<String> {
        vole_lines(&out.phases, out.bytes_sent, out.bytes_received)
    }

    fn revealed(out: &Self::SenderOutcome) -> Option<&[usize]> {
        out.revealed.as_deref()
    }

    fn matches(out: &Self::ReceiverOutcome) -> &[bool] {
        &out.matches
    }
}

#[cfg(feature = "vole")]
fn vole_lines(p: &psikit_protocols::vole_psi::Phases, sent: u64, received: u64) -> Vec<String> {
    vec![format!(
        "VOLE-PSI ({}): VOLE {}, online {}; sent {}, received {}",
        match p.malicious {
            true => "malicious",
            false => "semi-honest",
        },
        crate::report::secs(p.vole),
        crate::report::secs(p.online),
        crate::report::bytes(sent),
        crate::report::bytes(received)
    )]
}
