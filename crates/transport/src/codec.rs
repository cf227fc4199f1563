//! The one codec trait every wire message implements, in the spirit of
//! rustls's `Codec`: a message knows the frame that carries it (protocol
//! and kind), writes its payload with a [`Writer`], and reads it back with
//! a bounded [`Reader`] against what the receiver allows ([`Message::Bounds`]:
//! a limit, an expected count, the parameters in force, or `()`).
//!
//! Decoding is strict: every count is bounded before anything is
//! allocated, and trailing bytes are an error.

use crate::frame::Frame;
use crate::ids::ProtocolId;
use crate::wire::{DecodeError, Reader, Writer};

/// A wire message of one protocol.
pub trait Message: Sized {
    /// The protocol whose frames carry this message.
    const PROTOCOL: ProtocolId;
    /// The message kind within the protocol.
    const KIND: u8;
    /// What the receiver checks the message against while decoding.
    type Bounds<'a>: Copy;

    /// Appends the payload.
    fn write(&self, w: &mut Writer);

    /// Reads the payload, refusing anything out of `bounds`.
    fn read(r: &mut Reader<'_>, bounds: Self::Bounds<'_>) -> Result<Self, DecodeError>;

    /// The frame carrying this message.
    fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        self.write(&mut w);
        Frame::new(Self::PROTOCOL, Self::KIND, w.into_bytes())
    }

    /// Decodes a whole payload: the message and nothing after it.
    fn decode(payload: &[u8], bounds: Self::Bounds<'_>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let message = Self::read(&mut r, bounds)?;
        r.finish()?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message with a bounded list, as protocols define them.
    #[derive(Debug, PartialEq)]
    struct Numbers(Vec<u32>);

    impl Message for Numbers {
        const PROTOCOL: ProtocolId = 200;
        const KIND: u8 = 1;
        type Bounds<'a> = u32;

        fn write(&self, w: &mut Writer) {
            w.count(self.0.len());
            self.0.iter().for_each(|&n| {
                w.u32(n);
            });
        }

        fn read(r: &mut Reader<'_>, max: u32) -> Result<Self, DecodeError> {
            let count = r.count(u64::from(max), 4, "numbers")?;
            (0..count)
                .map(|_| r.u32("number"))
                .collect::<Result<_, _>>()
                .map(Numbers)
        }
    }

    #[test]
    fn round_trips_and_refuses_what_is_out_of_bounds() {
        let m = Numbers(vec![1, 2, 3]);
        let frame = m.to_frame();
        assert_eq!((frame.protocol, frame.kind), (200, 1));
        assert_eq!(Numbers::decode(&frame.payload, 3), Ok(m));
        assert!(matches!(
            Numbers::decode(&frame.payload, 2),
            Err(DecodeError::TooLarge { .. })
        ));
        let mut long = frame.payload.clone();
        long.push(0);
        assert!(matches!(
            Numbers::decode(&long, 3),
            Err(DecodeError::TrailingBytes { count: 1 })
        ));
        assert!(matches!(
            Numbers::decode(&frame.payload[..9], 3),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
