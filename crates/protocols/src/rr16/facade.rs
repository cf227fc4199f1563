//! RR16's facade: one party's whole run over a channel to its peer, the
//! peer reached as [`Peer`] says (one listens, the other connects), with
//! blocking and async entries.

use psikit_transport::Channel;

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
