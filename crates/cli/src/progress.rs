//! Progress of long jobs drawn as an indicatif spinner or bar.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use psikit_protocols::Progress;

/// A terminal progress line for the facades' [`Progress`] reports: a
/// spinner with a row count, or a bar when the stage's total is known.
pub struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub fn new() -> Self {
        Self {
            bar: Mutex::new(None),
        }
    }

    fn with(&self, f: impl FnOnce(&mut Option<ProgressBar>)) {
        match self.bar.lock() {
            Ok(mut g) => f(&mut g),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

impl Progress for Bar {
    fn stage(&self, what: &str, total: Option<u64>) {
        self.with(|slot| {
            if let Some(old) = slot.take() {
                old.finish_and_clear();
            }
            let (bar, template) = match total {
                Some(n) => (
                    ProgressBar::new(n),
                    "{spinner} {msg}: {human_pos}/{human_len}, {per_sec}, ETA {eta}",
                ),
                None => (
                    ProgressBar::new_spinner(),
                    "{spinner} {msg}: {human_pos} rows, {per_sec}",
                ),
            };
            let style = ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.set_message(what.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            *slot = Some(bar);
        });
    }

    fn advance(&self, done: u64) {
        self.with(|slot| {
            if let Some(bar) = slot {
                bar.set_position(done);
            }
        });
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.with(|slot| {
            if let Some(bar) = slot.take() {
                bar.finish_and_clear();
            }
        });
    }
}
