//! `psikit rr16 send|receive`: two-party malicious-secure PSI
//! (Rindal-Rosulek), the same run as `psikit psi --protocol rr16` with
//! RR16's own flags (malicious by default, `--semi-honest`).

use anyhow::Result;
use clap::{Args, Subcommand};
use psikit_protocols::rr16::{
    facade::Rr16, Phases, ReceiverOutcome, Rr16Config, Rr16Params, SenderOutcome,
};

use crate::psi_cmd::{party, PartyArgs, Report};
use crate::report;

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
    match cmd {
        Rr16Command::Send(a) => party_run(&a.party, a.semi_honest, true),
        Rr16Command::Receive(a) => party_run(&a.party, a.semi_honest, false),
    }
}

/// One RR16 party on the CSV rows.
pub fn party_run(a: &PartyArgs, semi_honest: bool, sending: bool) -> Result<()> {
    let cfg = Rr16Config {
        malicious: !semi_honest,
        reveal_to_sender: a.reveal,
        max_set_size: a.max_peer_items,
        key_format: a.csv.spec()?.key_format(),
        ..Rr16Config::default()
    };
    party::<Rr16>(a, &cfg, sending)
}

impl Report for Rr16 {
    fn sender_lines(out: &SenderOutcome) -> Vec<String> {
        run_lines(&out.params, &out.phases, out.bytes_sent, out.bytes_received)
    }

    fn receiver_lines(out: &ReceiverOutcome) -> Vec<String> {
        run_lines(&out.params, &out.phases, out.bytes_sent, out.bytes_received)
    }

    fn revealed(out: &SenderOutcome) -> Option<&[usize]> {
        out.revealed.as_deref()
    }

    fn matches(out: &ReceiverOutcome) -> &[bool] {
        &out.matches
    }
}

/// What a party prints about its run.
pub fn run_lines(p: &Rr16Params, phases: &Phases, sent: u64, received: u64) -> Vec<String> {
    vec![
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
    ]
}
