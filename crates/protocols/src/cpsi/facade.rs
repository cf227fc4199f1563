//! Circuit PSI's facade: a run over a [`Peer`] (listen or connect, TLS),
//! async and blocking, over a [`Channel`] the caller opened, or as a
//! sans-IO [`Stepper`]; the roles named by their tables (a front end gets
//! its role from [`super::Choices::resolve`]). (Circuit PSI takes values
//! with its keys, so it has its own entries rather than
//! `common::two_party::TwoParty`'s.)

use psikit_transport::{Channel, Limits, Stepper};

use super::config::{CpsiConfig, Input};
use super::outcome::Outcome;
use super::receiver::run_receiver;
use super::sender::run_sender;
pub use super::vocabulary::Role;
use crate::common::connect::{block_on, Peer};
use crate::common::{two_party, NoProgress, Progress};
use crate::error::Error;

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
    run_on(&mut ch, role, input, config, progress).await
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

/// Runs `role` on a channel the caller opened (the benchmark's worker
/// processes, tests), telling `progress` the protocol's phases.
pub async fn run_on(
    ch: &mut Channel,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    match role {
        Role::Sender => run_sender(ch, input, config, progress).await,
        Role::Receiver => run_receiver(ch, input, config, progress).await,
    }
}

/// `role`'s run as a sans-IO state machine: push the peer's bytes in, take
/// ours out, [`Stepper::advance`] until `Ready` (see
/// `crate::balanced::stepper`).
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
        run_on(&mut ch, role, input, &config, &NoProgress).await
    })
}
