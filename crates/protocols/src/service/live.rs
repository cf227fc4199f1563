//! The state a long-running service answers from, and how it follows its
//! file on disk.
//!
//! Readers take a cheap snapshot; a reload swaps in a new state, and
//! requests already running finish on the snapshot they started with. The
//! router's one watcher asks every service to [`LiveState::reload_if_changed`]
//! now and then; set-up commands rewrite state files atomically (temporary
//! file and rename), so a changed stamp always means a whole new file. A
//! state kept as a base and change files ([`crate::common::changelog`])
//! is watched as the list of its files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use crate::error::Error;

/// What identifies one version of a state's files: each one's path,
/// modification time and length.
type Stamp = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

fn stamp(files: &[PathBuf]) -> Stamp {
    let one = |path: &Path| {
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    };
    files.iter().map(|p| (p.clone(), one(p))).collect()
}

/// Loads the state; it is given the current one, if any, to build on.
type Loader<T> = Box<dyn Fn(Option<&T>) -> Result<T, Error> + Send + Sync>;
type Lister = Box<dyn Fn() -> Vec<PathBuf> + Send + Sync>;

/// Where a [`LiveState`] reloads from.
struct Source<T> {
    files: Lister,
    seen: Mutex<Stamp>,
    load: Loader<T>,
}

/// A swappable, shared state, optionally reloaded when its file changes.
pub struct LiveState<T> {
    current: RwLock<Arc<T>>,
    source: Option<Source<T>>,
}

impl<T> LiveState<T> {
    /// A state that changes only through [`LiveState::publish`].
    pub fn new(value: T) -> Self {
        Self {
            current: RwLock::new(Arc::new(value)),
            source: None,
        }
    }

    /// Loads the state now, and again whenever `file` changes. The stamp is
    /// taken before loading, so a write that lands during the load is seen
    /// by the next check.
    pub fn watching(
        file: PathBuf,
        load: impl Fn() -> Result<T, Error> + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        Self::watching_files(move || vec![file.clone()], move |_| load())
    }

    /// [`LiveState::watching`] a state kept in several files: `files`
    /// lists them now (a base and its change files, say), and the state
    /// reloads when the list or any file in it changes. `load` is given
    /// the current state on a reload, so it may apply only what changed.
    pub fn watching_files(
        files: impl Fn() -> Vec<PathBuf> + Send + Sync + 'static,
        load: impl Fn(Option<&T>) -> Result<T, Error> + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        let seen = stamp(&files());
        let value = load(None)?;
        Ok(Self {
            current: RwLock::new(Arc::new(value)),
            source: Some(Source {
                files: Box::new(files),
                seen: Mutex::new(seen),
                load: Box::new(load),
            }),
        })
    }

    /// The current state. A poisoned lock is recovered: the state is only
    /// ever replaced whole, so it cannot be half-written.
    pub fn snapshot(&self) -> Arc<T> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the state for every later snapshot.
    pub fn publish(&self, value: T) {
        let next = Arc::new(value);
        match self.current.write() {
            Ok(mut g) => *g = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    /// Reloads and publishes the state if its file changed since the last
    /// load; returns the new state, or `None` when nothing changed. A
    /// failed load keeps the current state, and is retried only once the
    /// file changes again. Blocks: call it off the async threads.
    pub fn reload_if_changed(&self) -> Result<Option<Arc<T>>, Error> {
        let Some(source) = &self.source else {
            return Ok(None);
        };
        let now = stamp(&(source.files)());
        {
            let mut seen = match source.seen.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if *seen == now {
                return Ok(None);
            }
            *seen = now;
        }
        let next = (source.load)(Some(&self.snapshot()))?;
        self.publish(next);
        Ok(Some(self.snapshot()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn reloads_only_when_the_file_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("state");
        std::fs::write(&file, b"1").expect("write");
        let loads = Arc::new(AtomicU32::new(0));
        let (f, l) = (file.clone(), loads.clone());
        let live = LiveState::watching(file.clone(), move || {
            l.fetch_add(1, Ordering::SeqCst);
            let text = std::fs::read_to_string(&f).map_err(|e| Error::io(&f, e))?;
            text.trim()
                .parse::<u32>()
                .map_err(|e| Error::StateFile(e.to_string()))
        })
        .expect("load");
        assert_eq!(*live.snapshot(), 1);
        assert!(live.reload_if_changed().expect("check").is_none());
        assert_eq!(loads.load(Ordering::SeqCst), 1);

        let old = live.snapshot();
        std::fs::write(&file, b"22").expect("rewrite");
        let next = live.reload_if_changed().expect("reload").expect("changed");
        assert_eq!((*old, *next, *live.snapshot()), (1, 22, 22));

        std::fs::write(&file, b"bad").expect("rewrite");
        assert!(live.reload_if_changed().is_err());
        assert_eq!(*live.snapshot(), 22, "a failed load keeps the state");
        assert!(live.reload_if_changed().expect("check").is_none());
    }

    #[test]
    fn a_state_without_a_file_never_reloads() {
        let live = LiveState::new(5u8);
        assert!(live.reload_if_changed().expect("check").is_none());
        live.publish(6);
        assert_eq!(*live.snapshot(), 6);
    }
}
