//! The OT layer's one error type.

use psikit_transport::TransportError;
use thiserror::Error;

/// Everything that can go wrong in the OT layer.
#[derive(Debug, Error)]
pub enum OtError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("malformed OT message: {0}")]
    Malformed(String),
    #[error("peer sent an invalid group element in {0}")]
    InvalidPoint(&'static str),
    #[error("the peer's request does not match ours: {0}")]
    Mismatch(String),
    #[error("KOS consistency check failed: the receiver's matrix is not consistent with one choice vector")]
    ConsistencyCheck,
    #[error(
        "silent OT consistency check failed: the sender's GGM trees are not consistent with one Δ"
    )]
    SilentCheck,
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("this OT instance failed earlier and can no longer be used")]
    Poisoned,
}
