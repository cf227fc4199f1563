//! The transport layer's one error type.

use thiserror::Error;

use crate::frame::ErrorMessage;
use crate::text::shown;
use crate::wire::DecodeError;

/// Everything that can go wrong moving messages.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("network error: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot listen on {0}: {1}")]
    Bind(String, std::io::Error),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("timed out {0}")]
    Timeout(&'static str),
    #[error("connection closed by peer")]
    Closed,
    #[error("peer sent a {len}-byte message; the limit is {max} bytes")]
    FrameTooLarge { len: u64, max: u32 },
    #[error("peer announced a {len}-byte transfer; the limit is {max} bytes")]
    TransferTooLarge { len: u64, max: u64 },
    #[error("peer speaks wire version {got}; this build speaks version {want}")]
    Version { got: u8, want: u8 },
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    #[error("unexpected message (protocol {protocol}, kind {kind})")]
    Unexpected { protocol: u8, kind: u8 },
    #[error("malformed message: {0}")]
    Decode(#[from] DecodeError),
    /// The peer's error frame; its text is shown escaped ([`crate::text`]).
    #[error("peer said ({:?}): {}", .0.code, shown(&.0.text))]
    Peer(ErrorMessage),
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("WebSocket: {0}")]
    WebSocket(String),
}

/// What a frame cut short by a closed connection reports.
pub(crate) const CUT_SHORT: &str = "connection closed in the middle of a message";

impl TransportError {
    /// Whether the link failed (the connection closed, reset, timed out or
    /// could not be made) rather than a peer that broke the protocol: what
    /// a long job retries after reconnecting.
    pub fn is_link_failure(&self) -> bool {
        match self {
            Self::Io(_) | Self::Connect(..) | Self::Timeout(_) | Self::Closed => true,
            Self::Malformed(what) => *what == CUT_SHORT,
            _ => false,
        }
    }
}
