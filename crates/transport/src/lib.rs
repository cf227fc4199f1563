//! How psikit's parties talk: versioned, length-limited frames over TCP,
//! TLS, or in-memory pipes.
//!
//! * [`wire`]: bounded big-endian encoding/decoding of message payloads.
//! * [`codec`]: the [`Message`] trait every protocol message implements.
//! * [`frame`]: the frame layout, wire version and the shared error message.
//! * [`channel`]: a framed channel with size limits, timeouts and byte counts.
//! * [`net`]: TCP listener/connector with optional (mutual) TLS via rustls,
//!   and WebSocket listeners for web pages ([`ws`]).
//! * [`step`]: a party over a channel run as a sans-IO state machine
//!   (bytes in, bytes out, no runtime).
//! * [`ids`]: the table of protocol ids, one per protocol family.
//! * [`text`]: text from a peer or a file, escaped and bounded for display.
//!
//! Protocols define their own message kinds on top of [`frame::Frame`]; this
//! crate knows nothing about PSI.

pub mod channel;
pub mod codec;
mod error;
pub mod frame;
pub mod ids;
#[cfg(feature = "net")]
pub mod net;
pub mod step;
pub mod text;
pub mod wire;
#[cfg(feature = "net")]
pub mod ws;

pub use channel::{Channel, Limits, CHUNK_BYTES};
pub use codec::Message;
pub use error::TransportError;
pub use frame::{ErrorCode, ErrorMessage, Frame};
pub use ids::ProtocolId;
pub use step::Stepper;
pub use text::shown;
pub use wire::{DecodeError, Reader, Writer};
