//! `psikit psi send|receive`: balanced two-party PSI over TCP (optionally
//! TLS), one party listening and the other connecting. VOLE-PSI
//! (Raghuraman-Rindal) by default, RR16 with `--protocol rr16`; `psikit
//! rr16` is the same run with RR16's own flags.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use psikit_protocols::balanced::{self, Outcome, Phases, Protocol, Role, Settings};
use psikit_protocols::common::connect::{Peer, ServerAddr};
use psikit_protocols::io::read_rows;
use psikit_protocols::NoProgress;

use crate::args::{ClientTlsArgs, CsvArgs, NetArgs, ServerTlsArgs};
use crate::matches::write_matches;
use crate::report;

#[derive(Subcommand)]
pub enum PsiCommand {
    /// The sender: contributes its set; learns nothing unless --reveal.
    Send(PsiArgs),
    /// The receiver: learns which of its rows are in the sender's set.
    Receive(PsiArgs),
}

#[derive(Args)]
pub struct PsiArgs {
    #[command(flatten)]
    pub party: PartyArgs,
    /// The protocol; both parties must choose the same.
    #[arg(long, default_value = "vole", value_parser = protocol_parser())]
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

/// `--protocol`: the words the protocols crate accepts, each with its help.
pub fn protocol_parser() -> impl TypedValueParser<Value = Protocol> {
    PossibleValuesParser::new(Protocol::ALL.map(|p| PossibleValue::new(p.word()).help(p.about())))
        .try_map(|word| word.parse::<Protocol>())
}

pub fn run(cmd: PsiCommand) -> Result<()> {
    // One run per process, freeing big vectors phase after phase.
    psikit_protocols::memory::reuse_freed_memory();
    let (a, sending) = match cmd {
        PsiCommand::Send(a) => (a, true),
        PsiCommand::Receive(a) => (a, false),
    };
    party(&a.party, a.protocol, a.malicious, sending)
}

pub fn announce(addr: &str) {
    eprintln!("psikit: waiting for the peer on {addr}");
}

/// One party's run of `protocol` on the CSV rows, with the output the CLI
/// gives (`psikit psi` and `psikit rr16` alike).
pub fn party(a: &PartyArgs, protocol: Protocol, malicious: bool, sending: bool) -> Result<()> {
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
    let settings = Settings {
        malicious,
        reveal: a.reveal,
        max_peer_items: a.max_peer_items,
        key_format: a.csv.spec()?.key_format(),
        ..Settings::new(protocol)
    };
    let table = read_rows(&a.input, &a.csv.spec()?)?;
    let (keys, rows_of_key) = table.unique_keys();
    let peer = a.peer.peer()?;
    let role = match sending {
        true => Role::Sender,
        false => Role::Receiver,
    };
    let out = balanced::run_blocking(&peer, role, &keys, &settings, announce, &NoProgress)?;
    let name = match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    };
    for line in phase_lines(&out) {
        println!("{name}: {line}");
    }
    let (Some(matches), Some(path)) = (&out.matches, output) else {
        return Ok(());
    };
    let n = write_matches(path, &table, &rows_of_key, matches)?;
    let found = matches.iter().filter(|m| **m).count();
    match role {
        Role::Sender => println!(
            "the receiver reported {found} matches; {n} rows written to {}",
            path.display()
        ),
        Role::Receiver => println!(
            "{found} of {} distinct items matched; {n} rows written to {}",
            keys.len(),
            path.display()
        ),
    }
    Ok(())
}

/// Lines describing a party's run (parameters, times, traffic), in its
/// family's terms.
pub fn phase_lines(out: &Outcome) -> Vec<String> {
    let (sent, received) = (out.bytes_sent, out.bytes_received);
    match &out.phases {
        #[cfg(feature = "vole")]
        Phases::Vole(p) => vec![format!(
            "VOLE-PSI ({}): VOLE {}, online {}; sent {}, received {}",
            match p.malicious {
                true => "malicious",
                false => "semi-honest",
            },
            report::secs(p.vole),
            report::secs(p.online),
            report::bytes(sent),
            report::bytes(received)
        )],
        #[cfg(feature = "rr16")]
        Phases::Rr16 { params: p, phases } => vec![
            format!(
                "{} OTs in {} chunk(s), Bloom filter {} bits, k = {}, p_chk = {}",
                p.n_ot, p.chunks, p.n_bf, p.k, p.p_chk
            ),
            format!(
                "offline {}, online {}; sent {}, received {}",
                report::secs(phases.offline),
                report::secs(phases.online),
                report::bytes(sent),
                report::bytes(received)
            ),
        ],
    }
}
