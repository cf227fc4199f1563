//! The one driver of the balanced PSIs' families: a family implements
//! [`TwoParty`] (its two roles over a `Channel`, awaiting only the channel
//! so that a `Stepper` can run them) and this file runs either role over
//! a channel or a [`Peer`] (listen or connect, TLS); `balanced.rs` picks
//! the family. Whichever way it
//! runs, a peer's refusal reads in this side's terms
//! ([`refused_by_peer`]), and a socket is closed gracefully after an error
//! so the refusal or abort this side sent reaches the peer.
//!
//! A run tells a [`Progress`] its stages (waiting for the peer, then the
//! family's phases).

use std::future::Future;

use psikit_transport::{Channel, ErrorCode, ErrorMessage, ProtocolId};

use super::hello::refused_by_peer;
use crate::common::connect::Peer;
use crate::common::progress::Progress;
use crate::error::Error;

/// A balanced two-party PSI: its configuration, outcomes and the two roles
/// written once over a [`Channel`] (awaiting only the channel, so that
/// `Stepper` can run them), each telling `progress` its phases as
/// stages (a few per run: never per item).
pub trait TwoParty: 'static {
    /// How to run it; both parties must agree on the parts the hello checks.
    type Config: Clone + Send + Sync + 'static;
    /// What the sender learns and what it cost.
    type SenderOutcome: Send + 'static;
    /// What the receiver learns and what it cost.
    type ReceiverOutcome: Send + 'static;

    /// The sender's role on its distinct `keys`.
    fn run_sender<'a>(
        ch: &'a mut Channel,
        keys: &'a [Vec<u8>],
        config: &'a Self::Config,
        progress: &'a dyn Progress,
    ) -> impl Future<Output = Result<Self::SenderOutcome, Error>> + Send + 'a;

    /// The receiver's role on its distinct `keys`.
    fn run_receiver<'a>(
        ch: &'a mut Channel,
        keys: &'a [Vec<u8>],
        config: &'a Self::Config,
        progress: &'a dyn Progress,
    ) -> impl Future<Output = Result<Self::ReceiverOutcome, Error>> + Send + 'a;
}

/// The sender's run of `P` over an open channel.
pub(crate) async fn sender_on<P: TwoParty>(
    ch: &mut Channel,
    keys: &[Vec<u8>],
    config: &P::Config,
    progress: &dyn Progress,
) -> Result<P::SenderOutcome, Error> {
    P::run_sender(ch, keys, config, progress)
        .await
        .map_err(refused_by_peer)
}

/// The receiver's run of `P` over an open channel.
pub(crate) async fn receiver_on<P: TwoParty>(
    ch: &mut Channel,
    keys: &[Vec<u8>],
    config: &P::Config,
    progress: &dyn Progress,
) -> Result<P::ReceiverOutcome, Error> {
    P::run_receiver(ch, keys, config, progress)
        .await
        .map_err(refused_by_peer)
}

/// Opens the channel to `peer`, with the wait as the run's first stage
/// (a listening party may wait long).
pub(crate) async fn open(
    peer: &Peer,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Channel, Error> {
    progress.stage(
        match peer {
            Peer::Listen { .. } => "waiting for the peer",
            Peer::Connect(_) => "connecting",
        },
        None,
    );
    peer.open(listening).await
}

/// Ends a socket run: after an error the channel is closed gracefully
/// (FIN, then a bounded drain), because dropping it with the peer's frames
/// unread would reset the connection and could destroy the refusal or
/// abort frame this side just sent.
pub(crate) async fn finish<T>(ch: Channel, result: Result<T, Error>) -> Result<T, Error> {
    if result.is_err() {
        ch.close().await;
    }
    result
}

/// Tells the peer why we stop (an `Aborted` error frame under `protocol`,
/// best effort), then returns the error: how a party that caught its peer
/// cheating ends the run.
pub async fn abort(ch: &mut Channel, protocol: ProtocolId, why: impl Into<String>) -> Error {
    let why = why.into();
    ch.send_error(
        protocol,
        &ErrorMessage::new(ErrorCode::Aborted, why.clone()),
    )
    .await;
    Error::Aborted(why)
}
