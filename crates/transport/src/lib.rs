//! How psikit's parties talk: versioned, length-limited frames over TCP,
//! TLS, or in-memory pipes.
//!
//! * [`wire`]: bounded big-endian encoding/decoding of message payloads.
//! * [`codec`]: the [`Message`] trait every protocol message implements.
//! * [`frame`]: the frame layout, wire version and the shared error message.
//! * [`channel`]: a framed channel with size limits, timeouts and byte counts.
//! * [`net`]: TCP listener/connector with optional (mutual) TLS via rustls.
//! * [`step`]: a party over a channel run as a sans-IO state machine
//!   (bytes in, bytes out, no runtime).
//! * [`ids`]: the table of protocol ids, one per protocol family.
//! * [`text`]: text from a peer or a file, escaped and bounded for display.
//!
//! Protocols define their own message kinds on top of [`frame::Frame`]; this
//! crate knows nothing about PSI.

pub mod channel;
pub mod codec;
pub mod frame;
pub mod ids;
pub mod net;
pub mod step;
pub mod text;
pub mod wire;

pub use channel::{Channel, Limits};
pub use codec::Message;
pub use frame::{ErrorCode, ErrorMessage, Frame};
pub use ids::ProtocolId;
pub use step::Stepper;
pub use text::shown;
pub use wire::{DecodeError, Reader, Writer};

use thiserror::Error;

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
    /// The peer's error frame; its text is shown escaped ([`text`]).
    #[error("peer said ({:?}): {}", .0.code, shown(&.0.text))]
    Peer(ErrorMessage),
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    #[error("TLS: {0}")]
    Tls(String),
}
