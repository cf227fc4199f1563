//! `psikit rr16 send|receive`: two-party malicious-secure PSI
//! (Rindal-Rosulek), the same run as `psikit psi --protocol rr16` with
//! RR16's own flags (malicious by default, `--semi-honest`).

use anyhow::Result;
use clap::{Args, Subcommand};
use psikit_protocols::common::two_party::Protocol;

use crate::psi_cmd::{party, Mode, PartyArgs};

#[derive(Subcommand)]
pub enum Rr16Command {
    /// The sender: contributes its set; learns nothing unless --reveal.
    Send(Rr16Args),
    /// The receiver: learns which of its rows are in the sender's set.
    Receive(Rr16Args),
}

#[derive(Args)]
pub struct Rr16Args {
    #[command(flatten)]
    pub party: PartyArgs,
    /// Semi-honest variant (IKNP, no cut-and-choose): faster, secure only if
    /// both parties follow the protocol.
    #[arg(long)]
    pub semi_honest: bool,
}

pub fn run(cmd: Rr16Command) -> Result<()> {
    let (a, sending) = match cmd {
        Rr16Command::Send(a) => (a, true),
        Rr16Command::Receive(a) => (a, false),
    };
    let mode = Mode {
        malicious: !a.semi_honest,
        low_comm: false,
    };
    party(&a.party, Protocol::Rr16, mode, sending)
}
