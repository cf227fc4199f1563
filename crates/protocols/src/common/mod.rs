//! What every protocol family's facade shares: how parties reach each
//! other ([`connect`]), progress reports for long jobs ([`Progress`]), the
//! vocabulary of results ([`Match`]) and server state directories
//! ([`state_dir`]).

pub mod connect;
pub mod files;
#[cfg(any(feature = "rr16", feature = "vole", feature = "filter"))]
pub(crate) mod messages;
#[cfg(any(feature = "filter", feature = "he"))]
pub mod oprf_stage;
pub mod state_dir;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod summaries;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod two_party;

#[cfg(any(feature = "filter", feature = "he"))]
use psikit_transport::shown;

#[cfg(any(feature = "filter", feature = "he"))]
use crate::Error;

/// One item of the querying party's input that the other party holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Position of the item in the querying party's input.
    pub index: usize,
    /// Its label, for protocols and databases that carry labels.
    pub label: Option<Vec<u8>>,
}

/// Receives progress of a long job so a front end can show it (the CLI
/// draws a bar, Python calls a callback), and lets it ask the job to stop.
///
/// Set-ups, database builds and updates run without awaits, so nothing
/// but the job itself can end them early: they ask [`Progress::cancelled`]
/// at each report and at their stage boundaries, and end with
/// [`crate::Error::Cancelled`] before writing anything. Network runs and
/// queries only report stages: their callers stop them by dropping their
/// future.
pub trait Progress: Sync {
    /// A new stage begins, with its total count of steps if known.
    fn stage(&self, what: &str, total: Option<u64>);
    /// Steps done so far in the current stage.
    fn advance(&self, done: u64);
    /// Whether the watcher wants the job to stop (Ctrl-C, a cancelled
    /// task). Asked often: keep it cheap.
    fn cancelled(&self) -> bool {
        false
    }
}

/// Progress that nobody watches.
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
}

/// Ends a cancellable job with [`Error::Cancelled`] if its watcher asked
/// it to stop: called at the job's stage boundaries.
#[cfg(any(feature = "filter", feature = "he"))]
pub(crate) fn check_cancelled(progress: &dyn Progress) -> Result<(), Error> {
    match progress.cancelled() {
        true => Err(Error::Cancelled),
        false => Ok(()),
    }
}

/// Reports `done` steps of a cancellable job, then ends it if its watcher
/// asked it to stop ([`check_cancelled`]): the job's report point.
#[cfg(any(feature = "filter", feature = "he"))]
pub(crate) fn advance(progress: &dyn Progress, done: u64) -> Result<(), Error> {
    progress.advance(done);
    check_cancelled(progress)
}

/// Refuses keys encoded otherwise than a server state's (when both are
/// known; `psikit_io::KeySpec::key_format`): they could never match.
/// `whose` names the other side in the message. One side's key format
/// came from the peer: both are shown escaped (`psikit_transport::text`).
#[cfg(any(feature = "filter", feature = "he"))]
pub(crate) fn same_key_format(state: &str, other: &str, whose: &str) -> Result<(), Error> {
    if state.is_empty() || other.is_empty() || state == other {
        return Ok(());
    }
    Err(Error::Config(format!(
        "the server's keys are encoded as \"{}\" but {whose} encodes them as \"{}\": use the same number of key columns and the same --normalize",
        shown(state),
        shown(other)
    )))
}

/// Defines a message that is one fixed-size byte array and nothing else
/// (seeds, commitments, shares) under a family's protocol id.
#[cfg(any(feature = "rr16", feature = "vole"))]
macro_rules! byte_array_message {
    ($(#[$doc:meta])* $name:ident: [u8; $len:literal], $protocol:expr, $kind:literal, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub [u8; $len]);

        impl psikit_transport::Message for $name {
            const PROTOCOL: psikit_transport::ProtocolId = $protocol;
            const KIND: u8 = $kind;
            type Bounds<'a> = ();

            fn write(&self, w: &mut psikit_transport::Writer) {
                w.bytes(&self.0);
            }

            fn read(
                r: &mut psikit_transport::Reader<'_>,
                (): (),
            ) -> Result<Self, psikit_transport::DecodeError> {
                r.array($field).map(Self)
            }
        }
    };
}
#[cfg(any(feature = "rr16", feature = "vole"))]
pub(crate) use byte_array_message;
