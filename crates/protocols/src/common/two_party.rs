//! The one two-party driver of the balanced PSIs (RR16, VOLE-PSI): a family
//! implements [`TwoParty`] (its two roles over a `Channel`) and gets every
//! entry a front end needs: [`send`] / [`receive`] over a [`Peer`] (listen
//! or connect, TLS), their blocking forms, and each role as a sans-IO
//! [`Stepper`]. Also what the families share before their own rounds: the
//! hello, in which both parties state their mode and set size and refuse a
//! peer that runs another mode or brings too large a set.
//!
//! A run tells a [`Progress`] its stages (waiting for the peer, then the
//! family's phases); the steppers report to nobody.

use std::future::Future;

use psikit_io::MAX_KEY_FORMAT;
use psikit_transport::{
    shown, Channel, DecodeError, ErrorCode, ErrorMessage, Limits, Message, ProtocolId, Reader,
    Stepper, Writer,
};

use crate::common::connect::{block_on, Peer};
use crate::{Error, NoProgress, Progress, Violation};

/// A balanced two-party PSI: its configuration, outcomes and the two roles
/// written once over a [`Channel`] (awaiting only the channel, so that
/// [`Stepper`] can run them), each telling `progress` its phases as
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

/// The sender's run with its distinct `keys`: it learns nothing, unless the
/// configuration reveals the intersection to it. A listening sender calls
/// `listening` with its address before it waits; `progress` is told the
/// run's stages.
pub async fn send<P: TwoParty>(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &P::Config,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<P::SenderOutcome, Error> {
    let mut ch = open(peer, listening, progress).await?;
    P::run_sender(&mut ch, keys, config, progress).await
}

/// The receiver's run with its distinct `keys`: learns which of them the
/// sender holds.
pub async fn receive<P: TwoParty>(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &P::Config,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<P::ReceiverOutcome, Error> {
    let mut ch = open(peer, listening, progress).await?;
    P::run_receiver(&mut ch, keys, config, progress).await
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

/// [`send`], blocking.
pub fn send_blocking<P: TwoParty>(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &P::Config,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<P::SenderOutcome, Error> {
    block_on(send::<P>(peer, keys, config, listening, progress))?
}

/// [`receive`], blocking.
pub fn receive_blocking<P: TwoParty>(
    peer: &Peer,
    keys: &[Vec<u8>],
    config: &P::Config,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<P::ReceiverOutcome, Error> {
    block_on(receive::<P>(peer, keys, config, listening, progress))?
}

/// The sender's run as a sans-IO state machine: push the receiver's bytes
/// in, take the sender's out, [`Stepper::advance`] until `Ready`. Frames up
/// to `limits.max_frame_bytes` are accepted.
pub fn sender_stepper<P: TwoParty>(
    keys: Vec<Vec<u8>>,
    config: P::Config,
    limits: Limits,
) -> Stepper<Result<P::SenderOutcome, Error>> {
    Stepper::new(limits, |mut ch| async move {
        P::run_sender(&mut ch, &keys, &config, &NoProgress).await
    })
}

/// The receiver's run as a sans-IO state machine (see [`sender_stepper`]).
pub fn receiver_stepper<P: TwoParty>(
    keys: Vec<Vec<u8>>,
    config: P::Config,
    limits: Limits,
) -> Stepper<Result<P::ReceiverOutcome, Error>> {
    Stepper::new(limits, |mut ch| async move {
        P::run_receiver(&mut ch, &keys, &config, &NoProgress).await
    })
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

/// What both parties must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Malicious security (else semi-honest).
    pub malicious: bool,
    /// Whether the receiver reveals the intersection to the sender.
    pub reveal: bool,
}

/// First message of each party, under its family's protocol id (kind 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello<const PROTOCOL: ProtocolId> {
    pub mode: Mode,
    pub set_size: u64,
    /// How the party encodes its keys (`psikit_io::KeySpec::key_format`:
    /// column count and normalisation, never data), or empty if unknown.
    pub key_format: String,
}

impl<const PROTOCOL: ProtocolId> Message for Hello<PROTOCOL> {
    const PROTOCOL: ProtocolId = PROTOCOL;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(u8::from(self.mode.malicious))
            .u8(u8::from(self.mode.reveal))
            .u64(self.set_size)
            .string(&self.key_format);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            mode: Mode {
                malicious: flag(r, "mode")?,
                reveal: flag(r, "reveal flag")?,
            },
            set_size: r.u64("set size")?,
            key_format: r.string(MAX_KEY_FORMAT, "key format")?,
        })
    }
}

fn flag(r: &mut Reader, field: &'static str) -> Result<bool, DecodeError> {
    match r.u8(field)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(DecodeError::invalid(field, format!("{other}"))),
    }
}

/// What a party states in its hello.
#[derive(Clone, Debug)]
pub struct Terms<'a> {
    pub mode: Mode,
    /// Its key encoding (see [`Hello::key_format`]); empty if unknown.
    pub key_format: &'a str,
    pub set_size: u64,
    /// Largest peer set accepted.
    pub max_peer_size: u64,
}

/// Exchanges hellos; returns the peer's set size, or an error if the peer
/// runs another mode, encodes its keys differently (when both say how), or
/// its set exceeds the limit. Two parties that encode keys differently
/// could never find a common item: refusing says why instead of returning
/// an empty intersection.
pub async fn hello<const PROTOCOL: ProtocolId>(
    ch: &mut Channel,
    terms: &Terms<'_>,
) -> Result<u64, Error> {
    let (mode, max_set_size) = (terms.mode, terms.max_peer_size);
    ch.send_msg(&Hello::<PROTOCOL> {
        mode,
        set_size: terms.set_size,
        key_format: terms.key_format.to_string(),
    })
    .await?;
    let peer = ch.recv_msg::<Hello<PROTOCOL>>(()).await?;
    if peer.mode != mode {
        return Err(Violation::Settings(format!(
            "the peer runs {} but we run {}",
            describe(peer.mode),
            describe(mode)
        ))
        .into());
    }
    check_peer(
        terms.key_format,
        &peer.key_format,
        peer.set_size,
        max_set_size,
    )?;
    Ok(peer.set_size)
}

/// What every two-party hello checks of the peer's: the same key encoding
/// (when both say how) and a set within our limit. Two parties that encode
/// keys differently could never find a common item: refusing says why
/// instead of returning an empty result.
pub(crate) fn check_peer(
    ours: &str,
    theirs: &str,
    peer_size: u64,
    max_size: u64,
) -> Result<(), Error> {
    if !ours.is_empty() && !theirs.is_empty() && theirs != ours {
        return Err(Violation::Settings(format!(
            "the peer encodes its keys as \"{}\" but we encode ours as \"{}\": use the same number of key columns and the same --normalize on both sides",
            shown(theirs),
            shown(ours)
        ))
        .into());
    }
    if peer_size > max_size {
        return Err(Violation::TooLarge {
            what: "the peer's set size",
            got: peer_size,
            max: max_size,
        }
        .into());
    }
    Ok(())
}

fn describe(mode: Mode) -> String {
    let security = if mode.malicious {
        "malicious"
    } else {
        "semi-honest"
    };
    let reveal = match mode.reveal {
        true => " with the result revealed to the sender",
        false => "",
    };
    format!("{security} security{reveal}")
}

/// What the two-party families' tests share: random sets with their
/// plaintext truth, and both parties run by steppers with no runtime.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashSet;
    use std::task::Poll;

    use psikit_transport::Limits;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::{receiver_stepper, sender_stepper, TwoParty};
    use crate::Error;

    /// Distinct random items of 1 to 40 bytes: `n_s` for the sender, `n_r`
    /// for the receiver, `overlap` of them shared (before deduplication);
    /// returns both sets, sorted, and the receiver's truth mask computed
    /// from the sets themselves (short random items collide by chance).
    pub fn sets(
        seed: u64,
        n_s: usize,
        n_r: usize,
        overlap: usize,
    ) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<bool>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let item = |rng: &mut StdRng| {
            let len = rng.gen_range(1..40);
            (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
        };
        let shared: Vec<Vec<u8>> = (0..overlap).map(|_| item(&mut rng)).collect();
        let mut sender = shared.clone();
        sender.extend((overlap..n_s).map(|_| item(&mut rng)));
        let mut receiver = shared;
        receiver.extend((overlap..n_r).map(|_| item(&mut rng)));
        for set in [&mut sender, &mut receiver] {
            set.sort();
            set.dedup();
        }
        let held: HashSet<&Vec<u8>> = sender.iter().collect();
        let truth = receiver.iter().map(|y| held.contains(y)).collect();
        (sender, receiver, truth)
    }

    /// Both parties of `P` as steppers, their bytes carried by hand in
    /// arbitrary splits: no runtime, no sockets.
    pub fn step_pair<P: TwoParty>(
        sender_items: Vec<Vec<u8>>,
        receiver_items: Vec<Vec<u8>>,
        config: P::Config,
        limits: Limits,
    ) -> (
        Result<P::SenderOutcome, Error>,
        Result<P::ReceiverOutcome, Error>,
    ) {
        let mut sender = sender_stepper::<P>(sender_items, config.clone(), limits);
        let mut receiver = receiver_stepper::<P>(receiver_items, config, limits);
        let (mut s_out, mut r_out) = (None, None);
        while s_out.is_none() || r_out.is_none() {
            if s_out.is_none() {
                if let Poll::Ready(r) = sender.advance() {
                    s_out = Some(r);
                }
            }
            receiver.push(&sender.take_outgoing());
            if r_out.is_none() {
                if let Poll::Ready(r) = receiver.advance() {
                    r_out = Some(r);
                }
            }
            sender.push(&receiver.take_outgoing());
        }
        (
            s_out.expect("sender finished"),
            r_out.expect("receiver finished"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_layout_is_fixed_and_garbage_refused() {
        let h = Hello::<4> {
            mode: Mode {
                malicious: true,
                reveal: false,
            },
            set_size: 258,
            key_format: "k".into(),
        };
        let frame = h.to_frame();
        assert_eq!((frame.protocol, frame.kind), (4, 1));
        assert_eq!(
            frame.payload,
            [1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, b'k']
        );
        assert_eq!(Hello::<4>::decode(&frame.payload, ()).expect("decode"), h);
        assert!(Hello::<4>::decode(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 1], ()).is_err());
        assert!(Hello::<4>::decode(&[1, 0, 0], ()).is_err());
    }

    #[test]
    fn modes_are_described_for_mismatch_errors() {
        let m = Mode {
            malicious: false,
            reveal: true,
        };
        assert_eq!(
            describe(m),
            "semi-honest security with the result revealed to the sender"
        );
    }
}
