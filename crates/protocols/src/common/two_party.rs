//! What the balanced two-party PSIs (RR16, VOLE-PSI) share before their own
//! rounds: the hello, in which both parties state their mode and set size
//! and refuse a peer that runs another mode or brings too large a set.

use psikit_transport::{Channel, DecodeError, Message, ProtocolId, Reader, Writer};

use crate::{Error, Violation};

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
}

impl<const PROTOCOL: ProtocolId> Message for Hello<PROTOCOL> {
    const PROTOCOL: ProtocolId = PROTOCOL;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(u8::from(self.mode.malicious))
            .u8(u8::from(self.mode.reveal))
            .u64(self.set_size);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            mode: Mode {
                malicious: flag(r, "mode")?,
                reveal: flag(r, "reveal flag")?,
            },
            set_size: r.u64("set size")?,
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

/// Exchanges hellos; returns the peer's set size, or an error if the peer
/// runs another mode or its set exceeds `max_set_size`.
pub async fn hello<const PROTOCOL: ProtocolId>(
    ch: &mut Channel,
    mode: Mode,
    own_size: u64,
    max_set_size: u64,
) -> Result<u64, Error> {
    ch.send_msg(&Hello::<PROTOCOL> {
        mode,
        set_size: own_size,
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
    if peer.set_size > max_set_size {
        return Err(Violation::TooLarge {
            what: "the peer's set size",
            got: peer.set_size,
            max: max_set_size,
        }
        .into());
    }
    Ok(peer.set_size)
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
        };
        let frame = h.to_frame();
        assert_eq!((frame.protocol, frame.kind), (4, 1));
        assert_eq!(frame.payload, [1, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
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
