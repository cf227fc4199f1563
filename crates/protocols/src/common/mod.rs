//! What every protocol family's facade shares: how parties reach each
//! other ([`connect`]), progress reports for long jobs ([`Progress`]), the
//! vocabulary of results ([`Match`]) and server state directories
//! ([`state_dir`]).

pub mod connect;
pub mod files;
pub mod state_dir;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod summaries;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod two_party;

/// One item of the querying party's input that the other party holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Position of the item in the querying party's input.
    pub index: usize,
    /// Its label, for protocols and databases that carry labels.
    pub label: Option<Vec<u8>>,
}

/// Receives progress of a long job (set-up, database builds) so a front
/// end can show it: the CLI draws a bar, Python calls a callback.
pub trait Progress: Sync {
    /// A new stage begins, with its total count of steps if known.
    fn stage(&self, what: &str, total: Option<u64>);
    /// Steps done so far in the current stage.
    fn advance(&self, done: u64);
}

/// Progress that nobody watches.
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
}

/// Refuses keys encoded otherwise than a server state's (when both are
/// known; `psikit_io::KeySpec::key_format`): they could never match.
/// `whose` names the other side in the message.
#[cfg(any(feature = "filter", feature = "he"))]
pub(crate) fn same_key_format(state: &str, other: &str, whose: &str) -> Result<(), crate::Error> {
    if state.is_empty() || other.is_empty() || state == other {
        return Ok(());
    }
    Err(crate::Error::Config(format!(
        "the server's keys are encoded as \"{state}\" but {whose} encodes them as \"{other}\": use the same number of key columns and the same --normalize"
    )))
}
