//! Circuit PSI's facade: a run over a [`Peer`] (listen or connect, TLS),
//! async and blocking, with the roles named by who learns the result.

use crate::common::connect::{block_on, Peer};
use crate::Error;

use super::{run_receiver, run_sender, App, CpsiConfig, Input, Outcome};

/// A party's role in the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds the simple table.
    Sender,
    /// Holds the cuckoo table.
    Receiver,
}

/// The role of the party that learns `app`'s result: the receiver, except
/// for the union, which the sender learns (the receiver provides its items
/// outside the intersection).
pub fn learner(app: App) -> Role {
    match app {
        App::Union => Role::Sender,
        _ => Role::Receiver,
    }
}

/// The role of the other party.
pub fn contributor(app: App) -> Role {
    match learner(app) {
        Role::Sender => Role::Receiver,
        Role::Receiver => Role::Sender,
    }
}

/// Runs `role` with `input` against the peer. A listening party calls
/// `listening` with its address before it waits.
pub async fn run(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
) -> Result<Outcome, Error> {
    let mut ch = peer.open(listening).await?;
    match role {
        Role::Sender => run_sender(&mut ch, input, config).await,
        Role::Receiver => run_receiver(&mut ch, input, config).await,
    }
}

/// [`run`], blocking.
pub fn run_blocking(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
) -> Result<Outcome, Error> {
    block_on(run(peer, role, input, config, listening))?
}
