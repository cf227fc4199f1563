//! RR16's facade: one party's whole run over a channel to its peer, the
//! peer reached as [`Peer`] says (one listens, the other connects), with
//! blocking and async entries; or, for callers that carry the messages
//! themselves, the party as a sans-IO state machine ([`sender_stepper`],
//! [`receiver_stepper`]: bytes in, bytes out, no runtime).

use psikit_transport::{Channel, Limits, Stepper};

use super::{run_receiver, run_sender, ReceiverOutcome, Rr16Config, SenderOutcome};
use crate::common::connect::{block_on, Peer};
use crate::Error;

/// The sender's run with its distinct `keys`: it learns nothing, unless the
/// configuration reveals the intersection to it. A listening sender calls
/// `listening` with its address before it waits.
pub async fn send(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &Rr16Config,
    listening: impl FnOnce(&str),
) -> Result<SenderOutcome, Error> {
    let mut ch: Channel = peer.open(listening).await?;
    run_sender(&mut ch, keys, config).await
}

/// The receiver's run with its distinct `keys`: learns which of them the
/// sender holds.
pub async fn receive(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &Rr16Config,
    listening: impl FnOnce(&str),
) -> Result<ReceiverOutcome, Error> {
    let mut ch: Channel = peer.open(listening).await?;
    run_receiver(&mut ch, keys, config).await
}

/// [`send`], blocking.
pub fn send_blocking(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &Rr16Config,
    listening: impl FnOnce(&str),
) -> Result<SenderOutcome, Error> {
    block_on(send(peer, keys, config, listening))?
}

/// [`receive`], blocking.
pub fn receive_blocking(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &Rr16Config,
    listening: impl FnOnce(&str),
) -> Result<ReceiverOutcome, Error> {
    block_on(receive(peer, keys, config, listening))?
}

/// The sender's run as a sans-IO state machine: push the receiver's bytes
/// in, take the sender's bytes out, [`Stepper::advance`] until `Ready`.
/// Frames up to `limits.max_frame_bytes` are accepted.
pub fn sender_stepper(
    keys: Vec<Vec<u8>>,
    config: Rr16Config,
    limits: Limits,
) -> Stepper<Result<SenderOutcome, Error>> {
    Stepper::new(limits, |mut ch| async move {
        run_sender(&mut ch, &keys, &config).await
    })
}

/// The receiver's run as a sans-IO state machine (see [`sender_stepper`]).
pub fn receiver_stepper(
    keys: Vec<Vec<u8>>,
    config: Rr16Config,
    limits: Limits,
) -> Stepper<Result<ReceiverOutcome, Error>> {
    Stepper::new(limits, |mut ch| async move {
        run_receiver(&mut ch, &keys, &config).await
    })
}
