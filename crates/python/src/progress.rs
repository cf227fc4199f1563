//! Progress of long jobs reported to a Python callable
//! `callback(stage: str, done: int, total: int | None)`.

use psikit_protocols::{NoProgress, Progress};
use pyo3::prelude::*;
use std::sync::Mutex;

/// Calls the callback with the GIL taken for each report; an exception in
/// the callback is printed (as Python prints unraisable errors) and the
/// job goes on.
pub struct Callback {
    callback: Py<PyAny>,
    /// The current stage and its total.
    stage: Mutex<(String, Option<u64>)>,
}

impl Callback {
    pub fn new(callback: Py<PyAny>) -> Self {
        Self {
            callback,
            stage: Mutex::new((String::new(), None)),
        }
    }

    fn report(&self, done: u64) {
        let (stage, total) = match self.stage.lock() {
            Ok(s) => s.clone(),
            Err(_) => return,
        };
        Python::attach(|py| {
            if let Err(e) = self.callback.call1(py, (stage, done, total)) {
                e.write_unraisable(py, None);
            }
        });
    }
}

impl Progress for Callback {
    fn stage(&self, what: &str, total: Option<u64>) {
        if let Ok(mut s) = self.stage.lock() {
            *s = (what.to_owned(), total);
        }
        self.report(0);
    }

    fn advance(&self, done: u64) {
        self.report(done);
    }
}

/// The callback as a [`Progress`], or nobody watching.
pub fn of(callback: &Option<Callback>) -> &dyn Progress {
    match callback {
        Some(c) => c,
        None => &NoProgress,
    }
}
