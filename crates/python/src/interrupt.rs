//! Ctrl-C during a network call: the facade's async entry runs on a
//! runtime of its own with the GIL released, and every 100 ms the waiting
//! thread asks Python whether a signal arrived (`check_signals`, which
//! runs Python's handler, e.g. raising `KeyboardInterrupt`). On one, the
//! future is dropped, which closes its connections, and the exception is
//! raised in the caller. CPU-bound stretches between two awaits finish
//! first. Set-ups and database builds have no awaits: their
//! `progress::Reporter` looks for signals at each progress report instead.
//!
//! A [`Cancel`] token does the same for asyncio: `psikit`'s async entries
//! run the blocking call in a worker thread inside `with token:`, and
//! cancelling the task sets the token, which the waiting call sees at its
//! next check (a build at its next report) and ends with
//! `asyncio.CancelledError`.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use psikit_protocols::common::connect::runtime;
use psikit_protocols::Error;
use pyo3::exceptions::asyncio::CancelledError;
use pyo3::prelude::*;

use crate::errors::to_py;

thread_local! {
    /// The token of the `with Cancel():` block this thread is in.
    static CURRENT: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// A cancellation token for the calls made on this thread inside
/// `with token:`; `token.cancel()` (from any thread) ends them with
/// `asyncio.CancelledError`: network calls within [`CHECK_EVERY`],
/// closing their connections, set-ups and builds at their next progress
/// report.
#[pyclass(frozen, module = "psikit._native")]
pub struct Cancel {
    flag: Arc<AtomicBool>,
}

#[pymethods]
impl Cancel {
    #[new]
    fn new() -> Self {
        Self {
            flag: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Cancels the calls running under this token (and later ones).
    fn cancel(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        CURRENT.with(|c| *c.borrow_mut() = Some(slf.flag.clone()));
        slf
    }

    fn __exit__(
        &self,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> bool {
        CURRENT.with(|c| *c.borrow_mut() = None);
        false
    }
}

/// How often a waiting call (or a build's progress) looks for signals.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The token of the `with Cancel():` block the calling thread is in.
pub(crate) fn current_token() -> Option<Arc<AtomicBool>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Runs `future` to completion unless a Python signal handler raises
/// first or this thread's [`Cancel`] token is set; the future's own error
/// becomes the matching psikit exception.
pub fn run<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    drive(py, None, future, || None)
}

/// [`run`] on `runtime`, which outlives the call: tasks the future
/// spawned (a cluster job's relay) keep running between calls.
pub fn run_on<F, T>(py: Python<'_>, runtime: &tokio::runtime::Runtime, future: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    drive(py, Some(runtime), future, || None)
}

/// What can hold the exception that stopped a job: the progress reporter,
/// whose Python callback may take a signal. A trait so that this module
/// does not depend on `progress`, which depends on it.
pub trait Stops: Sync {
    /// The exception that stopped the job, if one did (taken once).
    fn take_stop(&self) -> Option<PyErr>;
}

/// [`run`] for a future that reports to `reporter`: its callback may take
/// the signal (Python runs the handler in whatever Python code runs on the
/// main thread), and the exception it raised there ends the call too.
pub fn run_reporting<F, T>(py: Python<'_>, reporter: &impl Stops, future: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    drive(py, None, future, || reporter.take_stop())
}

/// [`run`], also ending the call with the exception `stopped` returns
/// (checked once more at the end: the handler has run, so the exception
/// would be lost otherwise).
fn drive<F, T>(
    py: Python<'_>,
    runtime: Option<&tokio::runtime::Runtime>,
    future: F,
    stopped: impl Fn() -> Option<PyErr> + Sync,
) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    let cancel = current_token();
    let cancelled = move || cancel.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
    if cancelled() {
        return Err(CancelledError::new_err("cancelled"));
    }
    py.detach(|| {
        let own;
        let rt = match runtime {
            Some(rt) => rt,
            None => {
                own = self::runtime().map_err(to_py)?;
                &own
            }
        };
        rt.block_on(async {
            tokio::pin!(future);
            let mut tick = tokio::time::interval(CHECK_EVERY);
            loop {
                tokio::select! {
                    out = &mut future => return match stopped() {
                        Some(e) => Err(e),
                        None => out.map_err(to_py),
                    },
                    _ = tick.tick() => {
                        Python::attach(|py| py.check_signals())?;
                        if cancelled() {
                            return Err(CancelledError::new_err("cancelled"));
                        }
                        if let Some(e) = stopped() {
                            return Err(e);
                        }
                    }
                }
            }
        })
    })
}
