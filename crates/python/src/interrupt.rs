//! Ctrl-C during a network call: the facade's async entry runs on a
//! runtime of its own with the GIL released, and every 100 ms the waiting
//! thread asks Python whether a signal arrived (`check_signals`, which
//! runs Python's handler, e.g. raising `KeyboardInterrupt`). On one, the
//! future is dropped, which closes its connections, and the exception is
//! raised in the caller. CPU-bound stretches between two awaits finish
//! first; set-ups and database builds (no awaits) run to their end.

use std::future::Future;
use std::time::Duration;

use psikit_protocols::common::connect::runtime;
use psikit_protocols::Error;
use pyo3::prelude::*;

use crate::errors::to_py;

/// How often a waiting call looks for signals.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Runs `future` to completion unless a Python signal handler raises
/// first; the future's own error becomes the matching psikit exception.
pub fn run<F, T>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    py.detach(|| {
        let rt = runtime().map_err(to_py)?;
        rt.block_on(async {
            tokio::pin!(future);
            let mut tick = tokio::time::interval(CHECK_EVERY);
            loop {
                tokio::select! {
                    out = &mut future => return out.map_err(to_py),
                    _ = tick.tick() => Python::attach(|py| py.check_signals())?,
                }
            }
        })
    })
}
