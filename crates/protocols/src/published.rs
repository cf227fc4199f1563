//! The state a long-running service answers from: readers take a cheap
//! snapshot, an update swaps in a new state, and requests already running
//! finish on the one they started with.

use std::sync::{Arc, RwLock};

/// A swappable, shared value. A poisoned lock is recovered: the value
/// itself is only ever replaced whole, so it cannot be half-written.
pub struct Published<T>(RwLock<Arc<T>>);

impl<T> Published<T> {
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The current value.
    pub fn snapshot(&self) -> Arc<T> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the value for every later snapshot.
    pub fn publish(&self, value: T) {
        let next = Arc::new(value);
        match self.0.write() {
            Ok(mut g) => *g = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}
