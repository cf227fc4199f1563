//! What the two-party families share before their own rounds: the hello,
//! in which both parties state their mode, set size and key encoding, and
//! refuse a peer that runs another balanced PSI, another mode, another key
//! encoding, or brings too large a set.
//!
//! Every refusal says what differs in the flags' terms (`--malicious`,
//! `--reveal`, `--normalize` and the key columns, `--max-peer-items`, the
//! protocol), and is told to the peer first, as an error frame phrased for
//! the peer: a party whose set the other side refuses learns why instead
//! of seeing the connection close. Mode, key and protocol mismatches each
//! party also finds by itself (both hellos carry them); the size limit
//! only the refusing side knows, so its frame is the other's only news.

use psikit_io::MAX_KEY_FORMAT;
use psikit_transport::{
    shown, Channel, DecodeError, ErrorCode, ErrorMessage, Frame, Message, ProtocolId, Reader,
    TransportError, Writer,
};

use super::protocol::Protocol;
use crate::error::{Error, Violation};

/// What both parties must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Malicious security (else semi-honest).
    pub malicious: bool,
    /// VOLE-PSI's low-communication mode (semi-honest only).
    pub low_comm: bool,
    /// Whether the receiver reveals the intersection to the sender.
    pub reveal: bool,
}

impl Mode {
    /// One byte for the security (0 semi-honest, 1 malicious, 2
    /// semi-honest with low communication), one for the reveal flag.
    pub(crate) fn write(&self, w: &mut Writer) {
        let security = u8::from(self.malicious) | u8::from(self.low_comm) << 1;
        w.u8(security).u8(u8::from(self.reveal));
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let (malicious, low_comm) = match r.u8("mode")? {
            0 => (false, false),
            1 => (true, false),
            2 => (false, true),
            other => return Err(DecodeError::invalid("mode", other)),
        };
        Ok(Self {
            malicious,
            low_comm,
            reveal: flag(r, "reveal flag")?,
        })
    }
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
        self.mode.write(w);
        w.u64(self.set_size).string(&self.key_format);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            mode: Mode::read(r)?,
            set_size: r.u64("set size")?,
            key_format: r.string(MAX_KEY_FORMAT, "key format")?,
        })
    }
}

/// A 0/1 byte; anything else is refused (one encoding per value).
pub(crate) fn flag(r: &mut Reader, field: &'static str) -> Result<bool, DecodeError> {
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

/// Exchanges hellos; returns the peer's set size, or refuses (telling the
/// peer why, see the [module docs](self)) a peer that runs the other
/// balanced PSI or another mode, encodes its keys differently (when both
/// say how), or brings a set above our limit. Two parties that encode keys
/// differently could never find a common item: refusing says why instead
/// of returning an empty intersection.
pub async fn hello<const PROTOCOL: ProtocolId>(
    ch: &mut Channel,
    terms: &Terms<'_>,
) -> Result<u64, Error> {
    ch.send_msg(&Hello::<PROTOCOL> {
        mode: terms.mode,
        set_size: terms.set_size,
        key_format: terms.key_format.to_string(),
    })
    .await?;
    let frame = ch.recv().await?;
    if let Some(refusal) = other_protocol(PROTOCOL, &frame) {
        return Err(refusal.tell(ch, PROTOCOL).await);
    }
    if (frame.protocol, frame.kind) != (PROTOCOL, Hello::<PROTOCOL>::KIND) {
        return Err(TransportError::Unexpected {
            protocol: frame.protocol,
            kind: frame.kind,
        }
        .into());
    }
    let peer = Hello::<PROTOCOL>::decode(&frame.payload, ())?;
    let refusal = mode_refusal(peer.mode, terms.mode)
        .or_else(|| key_refusal(&peer.key_format, terms.key_format))
        .or_else(|| size_refusal(peer.set_size, terms.max_peer_size));
    match refusal {
        Some(refusal) => Err(refusal.tell(ch, PROTOCOL).await),
        None => Ok(peer.set_size),
    }
}

/// What every two-party hello checks of the peer's, for a family with a
/// hello of its own (circuit PSI): the same key encoding (when both say
/// how) and a set within our limit.
#[cfg(feature = "cpsi")]
pub(crate) fn check_peer(
    ours: &str,
    theirs: &str,
    peer_size: u64,
    max_size: u64,
) -> Result<(), Error> {
    match key_refusal(theirs, ours).or_else(|| size_refusal(peer_size, max_size)) {
        Some(refusal) => Err(Violation::Settings(refusal.here).into()),
        None => Ok(()),
    }
}

/// A peer's refusal as this side reports it: balanced parties send an
/// error frame of code `BadRequest` only to refuse a hello, its text
/// already in this side's terms (shown escaped: it is the peer's).
pub(crate) fn refused_by_peer(e: Error) -> Error {
    match e {
        Error::Transport(TransportError::Peer(m)) if m.code == ErrorCode::BadRequest => {
            Violation::Settings(shown(&m.text).to_string()).into()
        }
        other => other,
    }
}

/// Why a hello is refused, in this side's terms (`here`) and the peer's
/// (`there`).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) here: String,
    pub(crate) there: String,
}

impl Refusal {
    /// Tells the peer (best effort), then returns this side's error.
    pub(crate) async fn tell(self, ch: &mut Channel, protocol: ProtocolId) -> Error {
        let message = ErrorMessage::new(ErrorCode::BadRequest, self.there);
        ch.send_error(protocol, &message).await;
        Violation::Settings(self.here).into()
    }
}

/// A hello under the other balanced PSI's id: the peer chose the other
/// `--protocol`.
pub(crate) fn other_protocol(ours: ProtocolId, frame: &Frame) -> Option<Refusal> {
    if frame.protocol == ours || frame.kind != Hello::<0>::KIND {
        return None;
    }
    if frame.protocol == psikit_transport::ids::JOB {
        return Some(job_refusal(false));
    }
    protocol_refusal(Protocol::of_id(frame.protocol)?, Protocol::of_id(ours)?)
}

/// The peer chose another balanced PSI (`--protocol`).
pub(crate) fn protocol_refusal(theirs: Protocol, ours: Protocol) -> Option<Refusal> {
    let text =
        |a: Protocol, b: Protocol| format!("the peer runs {}, this side {}", a.name(), b.name());
    (theirs != ours).then(|| Refusal {
        here: text(theirs, ours),
        there: text(ours, theirs),
    })
}

/// One side runs a bucketed job (`crate::jobs`), the other a one-shot
/// run; `job_here` tells which this side is.
pub(crate) fn job_refusal(job_here: bool) -> Refusal {
    let text = |peer_job: bool| {
        let (peer, here) = match peer_job {
            true => ("a bucketed job", "a one-shot run (--one-shot)"),
            false => ("a one-shot run (--one-shot)", "a bucketed job"),
        };
        format!(
            "the peer runs {peer}, this side {here}: run both as jobs (the CLI's default, \
             job_dir= in Python) or both with --one-shot"
        )
    };
    Refusal {
        here: text(!job_here),
        there: text(job_here),
    }
}

pub(crate) fn mode_refusal(theirs: Mode, ours: Mode) -> Option<Refusal> {
    let text = |a: Mode, b: Mode| {
        let mut parts = Vec::new();
        if a.malicious != b.malicious {
            parts.push(flag_differs("--malicious", a.malicious));
        }
        if a.low_comm != b.low_comm {
            parts.push(flag_differs("--low-comm", a.low_comm));
        }
        if a.reveal != b.reveal {
            parts.push(flag_differs("--reveal", a.reveal));
        }
        parts.join("; ")
    };
    (theirs != ours).then(|| Refusal {
        here: text(theirs, ours),
        there: text(ours, theirs),
    })
}

/// One flag set on one side only, `peer_has` telling which.
fn flag_differs(flag: &str, peer_has: bool) -> String {
    match peer_has {
        true => format!("the peer runs with {flag}, this side without"),
        false => format!("the peer runs without {flag}, this side with it"),
    }
}

pub(crate) fn key_refusal(theirs: &str, ours: &str) -> Option<Refusal> {
    let text = |a: &str, b: &str| {
        format!(
            "the peer encodes its keys as \"{}\", this side as \"{}\": use the same key columns and the same --normalize on both sides",
            shown(a),
            shown(b)
        )
    };
    (!ours.is_empty() && !theirs.is_empty() && theirs != ours).then(|| Refusal {
        here: text(theirs, ours),
        there: text(ours, theirs),
    })
}

fn size_refusal(peer_size: u64, max_size: u64) -> Option<Refusal> {
    (peer_size > max_size).then(|| Refusal {
        here: format!(
            "the peer's set has {peer_size} items; this side accepts at most {max_size} (--max-peer-items)"
        ),
        there: format!("the peer accepts at most {max_size} items; this set has {peer_size}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_layout_is_fixed_and_garbage_refused() {
        let h = Hello::<4> {
            mode: Mode {
                malicious: true,
                low_comm: false,
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
        // Mode byte 3 (malicious and low-communication) does not exist.
        let mut both = frame.payload.clone();
        both[0] = 3;
        assert!(Hello::<4>::decode(&both, ()).is_err());
        both[0] = 2;
        let low = Hello::<4>::decode(&both, ()).expect("low-communication");
        assert!(low.mode.low_comm && !low.mode.malicious);
        assert!(Hello::<4>::decode(&[1, 0, 0], ()).is_err());
    }

    #[test]
    fn refusals_name_the_flags_that_differ_on_both_sides() {
        let mode = |malicious, reveal| Mode {
            malicious,
            low_comm: false,
            reveal,
        };
        let r = mode_refusal(mode(true, false), mode(false, true)).expect("differs");
        assert_eq!(
            r.here,
            "the peer runs with --malicious, this side without; \
             the peer runs without --reveal, this side with it"
        );
        assert_eq!(
            r.there,
            "the peer runs without --malicious, this side with it; \
             the peer runs with --reveal, this side without"
        );
        assert!(mode_refusal(mode(true, true), mode(true, true)).is_none());
        let low = Mode {
            low_comm: true,
            ..mode(false, false)
        };
        let r = mode_refusal(low, mode(false, false)).expect("differs");
        assert_eq!(r.here, "the peer runs with --low-comm, this side without");
        let r = size_refusal(20, 10).expect("too large");
        assert_eq!(
            r.here,
            "the peer's set has 20 items; this side accepts at most 10 (--max-peer-items)"
        );
        assert_eq!(
            r.there,
            "the peer accepts at most 10 items; this set has 20"
        );
        assert!(size_refusal(10, 10).is_none());
        assert!(key_refusal("a", "").is_none());
        let r = key_refusal("a", "b").expect("differs");
        assert!(r
            .here
            .starts_with("the peer encodes its keys as \"a\", this side as \"b\""));
        let frame = Hello::<{ psikit_transport::ids::RR16 }> {
            mode: mode(false, false),
            set_size: 1,
            key_format: String::new(),
        }
        .to_frame();
        let r = other_protocol(psikit_transport::ids::VOLE_PSI, &frame).expect("other");
        assert_eq!(r.here, "the peer runs RR16, this side VOLE-PSI");
        assert_eq!(r.there, "the peer runs VOLE-PSI, this side RR16");
        assert!(other_protocol(psikit_transport::ids::RR16, &frame).is_none());
    }
}
