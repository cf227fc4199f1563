//! The protocols' error type.

use std::path::{Path, PathBuf};

#[cfg(feature = "net")]
use psikit_transport::ErrorMessage;
use psikit_transport::{DecodeError, ErrorCode, TransportError};
use thiserror::Error;

/// Everything that can go wrong running a protocol. Messages never contain
/// set items.
#[derive(Debug, Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// HE PSI parameters that are malformed or break one of APSI's rules.
    #[error("HE PSI parameters: {0}")]
    Params(String),
    #[error("input: {0}")]
    Input(#[from] psikit_io::Error),
    #[error("state file {0}")]
    StateFile(String),
    /// A long two-party job's directory, spool files or terms.
    #[error("job: {0}")]
    Job(String),
    #[error("{0}")]
    Transport(#[from] TransportError),
    #[error("malformed message: {0}")]
    Decode(#[from] DecodeError),
    #[error("OPRF: {0}")]
    Oprf(#[from] psikit_primitives::oprf::OprfError),
    #[error("filter: {0}")]
    Filter(#[from] psikit_structures::FilterError),
    #[cfg(feature = "he")]
    #[error("homomorphic encryption: {0}")]
    He(#[from] psikit_he::HeError),
    #[cfg(feature = "two-party")]
    #[error("oblivious transfer: {0}")]
    Ot(#[from] psikit_ot::OtError),
    #[error("OKVS: {0}")]
    Okvs(#[from] psikit_structures::okvs::OkvsError),
    #[error("protocol aborted: {0}")]
    Aborted(String),
    /// The peer broke the protocol.
    #[error("{0}")]
    Peer(#[from] Violation),
    /// One of this party's worker tasks did not finish (a bug, or the
    /// process shutting down).
    #[error("{task} failed: {reason}")]
    Task { task: &'static str, reason: String },
    /// A call in an order the API does not allow: a bug in the caller.
    #[error("{0}")]
    Misuse(&'static str),
    /// The job's [`Progress`](crate::common::Progress) asked it to stop (Ctrl-C in Python);
    /// it stopped before writing anything.
    #[error("cancelled before the end; nothing was written")]
    Cancelled,
    /// An invariant of psikit's own code failed: a bug in psikit.
    #[error("internal error: {0}")]
    Internal(&'static str),
    #[error(
        "the client's filter is at epoch {have} but the server is at epoch {current}: sync first"
    )]
    StaleFilter { have: u64, current: u64 },
    /// An HE query made with parameters and keys for a database the server
    /// no longer serves (rebuilt with other parameters or another key).
    #[error("the query was prepared for another database (its parameters or key changed): fetch the parameters again")]
    StaleDatabase,
    /// A shard of a sharded database did not answer a query: the router
    /// gives no partial answer, and the client may retry.
    #[error("shard {shard} of the database is unavailable ({reason}); retry later")]
    ShardUnavailable { shard: u32, reason: String },
    #[error("filter digest mismatch: the local copy differs from the server's")]
    DigestMismatch,
    #[error("this server does not serve {name} (protocol id {0})", name = psikit_transport::ids::name(*.0))]
    Unsupported(u8),
}

/// An error and its causes on one line, each said once (error types that
/// print their source in their own message would otherwise repeat it):
/// what the CLI prints after `psikit: error:` and what Python's exceptions
/// carry.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

impl Error {
    /// Whether the server refused the request for load ("server busy"):
    /// the request may be repeated later.
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Transport(TransportError::Peer(m)) if m.code == ErrorCode::Busy)
    }
}

/// How a peer broke a protocol: what a server tells its client, and what
/// a client reports about its server.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    #[error("unknown request kind {0}")]
    UnknownKind(u8),
    #[error("unexpected message in {0}")]
    Unexpected(&'static str),
    #[error("{0} out of order")]
    OutOfOrder(&'static str),
    #[error("{what}: {got}, where {expected} were expected")]
    Count {
        what: &'static str,
        got: u64,
        expected: u64,
    },
    #[error("{what} is {got}, above the limit of {max}")]
    TooLarge {
        what: &'static str,
        got: u64,
        max: u64,
    },
    /// The parties run different settings (mode, parameters, database).
    #[error("{0}")]
    Settings(String),
    /// A value that cannot be what the protocol says it is.
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// An opened result no honest run on these inputs can give.
    #[error("{0}: the opened shares are wrong (a fault, or a peer not following the protocol)")]
    Impossible(String),
    /// The client used up its query budget (`service::QueryBudget`).
    #[error("{0}")]
    Budget(String),
}

impl Error {
    /// A worker task that did not finish.
    #[cfg(feature = "net")]
    pub(crate) fn task(task: &'static str, reason: impl std::fmt::Display) -> Self {
        Self::Task {
            task,
            reason: reason.to_string(),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether the server told us our copy of its state is stale: the
    /// filter's epoch, or the HE database's parameters and key.
    pub fn is_stale(&self) -> bool {
        matches!(self, Error::StaleFilter { .. } | Error::StaleDatabase)
            || matches!(self, Error::Transport(TransportError::Peer(m)) if m.code == ErrorCode::Stale)
    }

    /// Whether a server keeps the connection open after this request
    /// error: a stale client is expected to sync and retry on the same
    /// connection.
    #[cfg(feature = "net")]
    pub(crate) fn keeps_connection(&self) -> bool {
        matches!(self, Error::StaleFilter { .. })
    }

    /// The message a server sends its client for this error, if any. Local
    /// I/O failures are reported as internal errors without detail.
    #[cfg(feature = "net")]
    pub(crate) fn to_peer_message(&self) -> Option<ErrorMessage> {
        let (code, text) = match self {
            Error::Decode(e) => (ErrorCode::BadRequest, e.to_string()),
            Error::Oprf(e) => (ErrorCode::BadRequest, e.to_string()),
            Error::Peer(v) => (ErrorCode::BadRequest, v.to_string()),
            #[cfg(feature = "he")]
            Error::He(e) => (ErrorCode::BadRequest, e.to_string()),
            Error::StaleFilter { .. } | Error::StaleDatabase => {
                (ErrorCode::Stale, self.to_string())
            }
            Error::ShardUnavailable { .. } => (ErrorCode::Busy, self.to_string()),
            Error::Aborted(t) => (ErrorCode::Aborted, t.clone()),
            Error::Unsupported(_) => (ErrorCode::Unsupported, self.to_string()),
            Error::Transport(e) => return transport_peer_message(e),
            _ => (ErrorCode::Internal, "internal server error".to_string()),
        };
        Some(ErrorMessage::new(code, text))
    }
}

/// What a server tells a client whose frames it could not take; `None`
/// where the connection itself failed and nobody would read it.
#[cfg(feature = "net")]
fn transport_peer_message(e: &TransportError) -> Option<ErrorMessage> {
    let code = match e {
        TransportError::Version { got, want } => {
            let text = format!("this server speaks wire version {want}; the request used {got}");
            return Some(ErrorMessage::new(ErrorCode::Unsupported, text));
        }
        TransportError::FrameTooLarge { .. }
        | TransportError::TransferTooLarge { .. }
        | TransportError::Malformed(_)
        | TransportError::Decode(_)
        | TransportError::Unexpected { .. }
        | TransportError::Timeout(_) => ErrorCode::BadRequest,
        _ => return None,
    };
    Some(ErrorMessage::new(code, e.to_string()))
}
