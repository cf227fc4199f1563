//! Framing: how one message travels on a byte stream.
//!
//! ```text
//! u32 length (big-endian, counts everything after itself)
//! u8  wire version (WIRE_VERSION)
//! u8  protocol id  (which psikit protocol the message belongs to)
//! u8  message kind (meaning defined by the protocol)
//! ... payload
//! ```
//!
//! The length is checked against the receiver's limit before any buffer is
//! allocated, so an oversized or lying length costs the receiver nothing.
//! Kind [`KIND_ERROR`] is reserved in every protocol for an [`ErrorMessage`].

use crate::wire::{DecodeError, Reader, Writer};

/// Version of the framing, of every message layout and of what the
/// messages compute. A peer speaking another version gets a clear error
/// instead of misparsed data or silently wrong results. Version 2: silent
/// VOLE's noise rule and tweaked GGM trees, and VOLE-PSI's separate hash
/// domains (either alone would make an old and a new peer disagree).
/// Version 3: circuit-PSI tags past 64 bits, σ per job bucket, a job's
/// lanes. Version 4: an HE database's parameters name its label columns.
/// Version 5: summary values as Elias-Fano sets, the balanced hello's
/// low-communication mode. Version 6: circuit PSI's equality as one tree
/// of four-input gates, the union's switches four to an OT. Version 7:
/// summary values in 16 segments.
pub const WIRE_VERSION: u8 = 7;

/// Bytes of framing before the payload (length + version + protocol + kind).
pub const HEADER_LEN: usize = 7;

/// Message kind reserved for errors, in every protocol.
pub const KIND_ERROR: u8 = 0xff;

/// Longest error text accepted from a peer.
pub const MAX_ERROR_TEXT: u64 = 1024;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub protocol: u8,
    pub kind: u8,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn new(protocol: u8, kind: u8, payload: Vec<u8>) -> Self {
        Self {
            protocol,
            kind,
            payload,
        }
    }

    /// The 7-byte header that precedes the payload on the wire.
    pub fn header(&self) -> [u8; HEADER_LEN] {
        header(self.protocol, self.kind, self.payload.len())
    }

    /// Bytes this frame occupies on the wire.
    pub fn wire_len(&self) -> u64 {
        (HEADER_LEN + self.payload.len()) as u64
    }

    pub fn is_error(&self) -> bool {
        self.kind == KIND_ERROR
    }
}

/// The 7-byte header of a frame with a payload of `payload_len` bytes.
pub(crate) fn header(protocol: u8, kind: u8, payload_len: usize) -> [u8; HEADER_LEN] {
    let len = u32::try_from(payload_len + 3).expect("frame payload exceeds 4 GiB");
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&len.to_be_bytes());
    h[4] = WIRE_VERSION;
    h[5] = protocol;
    h[6] = kind;
    h
}

/// Error codes carried by [`ErrorMessage`]. Codes are stable across versions
/// so clients can react (e.g. re-sync a stale filter) without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ErrorCode {
    /// The request was malformed or violated a limit.
    BadRequest = 1,
    /// The peer speaks a wire version or protocol this side does not.
    Unsupported = 2,
    /// The client's cached state (e.g. its filter epoch) is out of date.
    Stale = 3,
    /// The server failed for reasons of its own.
    Internal = 4,
    /// The server is at its connection limit or shutting down.
    Busy = 5,
    /// The peer aborted the protocol (e.g. a failed consistency check).
    Aborted = 6,
}

impl ErrorCode {
    /// The code's name in lower case, for metric labels and structured
    /// logs.
    pub fn label(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::Unsupported => "unsupported",
            Self::Stale => "stale",
            Self::Internal => "internal",
            Self::Busy => "busy",
            Self::Aborted => "aborted",
        }
    }

    fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::BadRequest,
            2 => Self::Unsupported,
            3 => Self::Stale,
            4 => Self::Internal,
            5 => Self::Busy,
            6 => Self::Aborted,
            _ => return None,
        })
    }
}

/// A protocol-level error sent to the peer instead of a normal reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMessage {
    pub code: ErrorCode,
    pub text: String,
}

impl ErrorMessage {
    pub fn new(code: ErrorCode, text: impl Into<String>) -> Self {
        let mut text: String = text.into();
        truncate_utf8(&mut text, MAX_ERROR_TEXT as usize);
        Self { code, text }
    }

    pub fn to_frame(&self, protocol: u8) -> Frame {
        let mut w = Writer::new();
        w.u16(self.code as u16).string(&self.text);
        Frame::new(protocol, KIND_ERROR, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let raw = r.u16("error code")?;
        let code = ErrorCode::from_u16(raw).ok_or_else(|| DecodeError::Invalid {
            field: "error code",
            reason: format!("unknown code {raw}"),
        })?;
        let text = r.string(MAX_ERROR_TEXT, "error text")?;
        r.finish()?;
        Ok(Self { code, text })
    }
}

fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout() {
        let f = Frame::new(2, 9, vec![1, 2, 3]);
        assert_eq!(f.header(), [0, 0, 0, 6, WIRE_VERSION, 2, 9]);
        assert_eq!(f.wire_len(), 10);
    }

    #[test]
    fn error_message_round_trip_and_truncation() {
        let long = "é".repeat(1000);
        let m = ErrorMessage::new(ErrorCode::Stale, long);
        assert!(m.text.len() <= MAX_ERROR_TEXT as usize);
        let f = m.to_frame(1);
        assert!(f.is_error());
        assert_eq!(ErrorMessage::decode(&f.payload).unwrap(), m);
        assert!(ErrorMessage::decode(&[0, 99, 0, 0, 0, 0]).is_err());
    }
}
