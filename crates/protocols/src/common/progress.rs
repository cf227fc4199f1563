//! Progress reports of long jobs, and their cancellation.

#[cfg(any(feature = "unbalanced", feature = "two-party"))]
use crate::error::Error;

/// Receives progress of a long job so a front end can show it (the CLI
/// draws a bar, Python calls a callback), and lets it ask the job to stop.
///
/// Set-ups, database builds and updates run without awaits, so nothing
/// but the job itself can end them early: they ask [`Progress::cancelled`]
/// at each report and at their stage boundaries, and end with
/// [`Error::Cancelled`](crate::error::Error::Cancelled) before writing anything. Network runs and
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
#[cfg(any(feature = "unbalanced", feature = "two-party"))]
pub(crate) fn check_cancelled(progress: &dyn Progress) -> Result<(), Error> {
    match progress.cancelled() {
        true => Err(Error::Cancelled),
        false => Ok(()),
    }
}

/// Reports `done` steps of a cancellable job, then ends it if its watcher
/// asked it to stop ([`check_cancelled`]): the job's report point.
#[cfg(any(feature = "unbalanced", feature = "two-party"))]
pub(crate) fn advance(progress: &dyn Progress, done: u64) -> Result<(), Error> {
    progress.advance(done);
    check_cancelled(progress)
}
