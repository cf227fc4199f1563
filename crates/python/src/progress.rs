//! Progress of long jobs, and stopping them from Python.
//!
//! Every long call reports to a [`Reporter`]: its stages and steps go to
//! the caller's `callback(stage: str, done: int, total: int | None)` when
//! there is one. The same reporter lets Python stop a job that has no
//! awaits for `interrupt::run` to cut (set-ups, database builds and
//! updates): the facades ask [`Progress::cancelled`] at each report, and
//! the reporter answers yes once Python's signal handler has raised (Ctrl-C,
//! checked at most every `interrupt::CHECK_EVERY`), the thread's asyncio
//! `Cancel` token is set, or the callback itself raised `KeyboardInterrupt`
//! (a signal handled while it ran). The job then ends with
//! `Error::Cancelled` before writing anything, and [`Reporter::finish`]
//! raises the exception that stopped it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use psikit_protocols::{Error, Progress};
use pyo3::exceptions::asyncio::CancelledError;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::interrupt;

/// A long call's progress: the caller's callback (if any) and what asked
/// the job to stop (if anything).
pub struct Reporter {
    callback: Option<Py<PyAny>>,
    /// The current stage and its total.
    stage: Mutex<(String, Option<u64>)>,
    /// The asyncio `Cancel` token of the calling thread, if it runs in one.
    token: Option<Arc<AtomicBool>>,
    /// When Python's signals were last looked at.
    checked: Mutex<Option<Instant>>,
    /// The exception that stopped the job, once one did.
    stop: Mutex<Option<PyErr>>,
}

/// The guarded value even if a panicking thread held the lock: every
/// value here stays consistent between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reporter {
    /// Reports to `callback` (or to nobody); created on the calling thread,
    /// whose asyncio token it watches.
    pub fn new(callback: Option<Py<PyAny>>) -> Self {
        Self {
            callback,
            stage: Mutex::new((String::new(), None)),
            token: interrupt::current_token(),
            checked: Mutex::new(None),
            stop: Mutex::new(None),
        }
    }

    /// Calls the callback with the GIL taken. An ordinary exception in it
    /// is printed (as Python prints unraisable errors) and the job goes
    /// on; `KeyboardInterrupt` or `SystemExit` stops the job.
    fn report(&self, done: u64) {
        let Some(callback) = &self.callback else {
            return;
        };
        let (stage, total) = lock(&self.stage).clone();
        Python::attach(|py| {
            if let Err(e) = callback.call1(py, (stage, done, total)) {
                match e.is_instance_of::<PyException>(py) {
                    true => e.write_unraisable(py, None),
                    false => self.stop_with(e),
                }
            }
        });
    }

    /// Keeps the first reason to stop.
    fn stop_with(&self, e: PyErr) {
        lock(&self.stop).get_or_insert(e);
    }

    /// The job's outcome for Python: a job stopped from Python raises what
    /// stopped it (`KeyboardInterrupt`, `asyncio.CancelledError`), also
    /// when the callback took the signal after the last check (its handler
    /// has run: the exception would be lost otherwise).
    pub fn finish<T>(&self, outcome: Result<T, Error>) -> PyResult<T> {
        match (outcome, interrupt::Stops::take_stop(self)) {
            (_, Some(stop)) => Err(stop),
            (Ok(value), None) => Ok(value),
            (Err(e), None) => Err(to_py(e)),
        }
    }
}

impl interrupt::Stops for Reporter {
    /// The exception that stopped the job, if Python asked it to stop.
    fn take_stop(&self) -> Option<PyErr> {
        lock(&self.stop).take()
    }
}

impl Progress for Reporter {
    fn stage(&self, what: &str, total: Option<u64>) {
        *lock(&self.stage) = (what.to_owned(), total);
        self.report(0);
    }

    fn advance(&self, done: u64) {
        self.report(done);
    }

    fn cancelled(&self) -> bool {
        if lock(&self.stop).is_some() {
            return true;
        }
        if self
            .token
            .as_ref()
            .is_some_and(|t| t.load(Ordering::Relaxed))
        {
            self.stop_with(CancelledError::new_err("cancelled"));
            return true;
        }
        {
            let mut checked = lock(&self.checked);
            if checked.is_some_and(|at| at.elapsed() < interrupt::CHECK_EVERY) {
                return false;
            }
            *checked = Some(Instant::now());
        }
        // Runs Python's handler of a pending signal (on the main thread;
        // elsewhere signals wait for the main thread).
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => false,
            Err(e) => {
                self.stop_with(e);
                true
            }
        }
    }
}
