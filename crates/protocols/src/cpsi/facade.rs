//! Circuit PSI's facade: a run over a [`Peer`] (listen or connect, TLS),
//! async and blocking, or as a sans-IO [`Stepper`]; the roles named by their
//! tables ([`learner`] gives who learns by default). (Circuit PSI takes values with its keys, so it has
//! its own entries rather than `common::two_party::TwoParty`'s.)

use psikit_transport::{Limits, Stepper};

use crate::common::connect::{block_on, Peer};
use crate::common::two_party;
use crate::{Error, NoProgress, Progress};

pub use super::Role;
use super::{run_receiver, run_sender, App, CpsiConfig, Input, Outcome};

/// The role of the party that learns `app`'s result by default: the
/// receiver, except for the union, which the sender learns (the receiver
/// provides its items outside the intersection).
pub fn learner(app: App) -> Role {
    match app {
        App::Union => Role::Sender,
        _ => Role::Receiver,
    }
}

/// Runs `role` with `input` against the peer. A listening party calls
/// `listening` with its address before it waits; `progress` is told the
/// run's stages (the wait for the peer, then the protocol's phases).
pub async fn run(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    let mut ch = two_party::open(peer, listening, progress).await?;
    match role {
        Role::Sender => run_sender(&mut ch, input, config, progress).await,
        Role::Receiver => run_receiver(&mut ch, input, config, progress).await,
    }
}

/// [`run`], blocking.
pub fn run_blocking(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    block_on(run(peer, role, input, config, listening, progress))?
}

/// `role`'s run as a sans-IO state machine: push the peer's bytes in, take
/// ours out, [`Stepper::advance`] until `Ready` (see
/// `common::two_party::sender_stepper`).
pub fn stepper(
    role: Role,
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u64>>,
    config: CpsiConfig,
    limits: Limits,
) -> Stepper<Result<Outcome, Error>> {
    Stepper::new(limits, move |mut ch| async move {
        let input = Input {
            keys: &keys,
            values: &values,
        };
        match role {
            Role::Sender => run_sender(&mut ch, input, &config, &NoProgress).await,
            Role::Receiver => run_receiver(&mut ch, input, &config, &NoProgress).await,
        }
    })
}
