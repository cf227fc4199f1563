//! Server state directories: a set-up never mixes a new state with an old
//! one's key, a failed set-up leaves the old state alone, and one command
//! at a time changes a directory ([`lock`]), so that no update is lost.

use std::fs::{File, TryLockError};
use std::path::Path;

#[cfg(feature = "unbalanced")]
use psikit_transport::shown;

use crate::error::Error;

/// The lock file inside a state directory; it is no part of the state.
const LOCK_FILE: &str = ".psikit.lock";

/// Held while a command changes a state directory; released on drop (and
/// by the operating system if the process dies).
pub struct StateLock {
    _file: File,
}

/// Takes the directory's lock (creating the directory if needed), or
/// refuses at once if another command holds it.
pub fn lock(dir: &Path) -> Result<StateLock, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join(LOCK_FILE);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(StateLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(Error::Config(format!(
            "another psikit command is changing {}; try again once it has finished",
            dir.display()
        ))),
        Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// Whether a directory entry belongs to the state (the lock file does not).
fn is_state_entry(entry: &std::fs::DirEntry) -> bool {
    entry.file_name() != LOCK_FILE
}

/// The files of a protocol's state directory: `main` is written last, so
/// its presence means a complete state; `before` are written before it
/// (the OPRF key). Without `main`, those (and the atomic writer's
/// temporary files) are what a set-up interrupted part-way left.
pub struct Layout {
    pub main: &'static str,
    pub before: &'static [&'static str],
}

/// Refuses a directory that holds a state, or files that are none of a
/// state's, unless forced: a state there would share its OPRF key file
/// with the new one. An interrupted set-up's leftovers (see [`Layout`])
/// are replaced without `force`. Returns whether the directory must be
/// [`clear`]ed before the new state is saved; callers clear it only once
/// the new state is built. `update` names the command that changes a
/// state in place.
pub fn check_fresh(dir: &Path, force: bool, update: &str, layout: &Layout) -> Result<bool, Error> {
    if !dir.exists() {
        return Ok(false);
    }
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(Result::ok)
        .filter(is_state_entry)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let leftover = |n: &String| {
        layout.before.contains(&n.as_str()) || (n.starts_with('.') && n.ends_with(".tmp"))
    };
    let kept = names.iter().any(|n| n == layout.main || !leftover(n));
    if kept && !force {
        return Err(Error::Config(format!(
            "{} is not empty; use `{update}` to change the state in it, or --force to replace \
             everything in it",
            dir.display()
        )));
    }
    Ok(!names.is_empty())
}

/// Whether `dir` holds nothing but its lock (or does not exist).
pub fn is_empty(dir: &Path) -> Result<bool, Error> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(Error::io(dir, e)),
        Ok(entries) => Ok(entries.flatten().all(|e| !is_state_entry(&e))),
    }
}

/// Empties a state directory that [`check_fresh`] allowed to be replaced
/// (its lock stays, held by the caller).
pub fn clear(dir: &Path) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if !is_state_entry(&entry) {
            continue;
        }
        let path = entry.path();
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| Error::io(&path, e))?;
    }
    Ok(())
}

/// Refuses keys encoded otherwise than a server state's (when both are
/// known; `psikit_io::KeySpec::key_format`): they could never match.
/// `whose` names the other side in the message. One side's key format
/// came from the peer: both are shown escaped (`psikit_transport::text`).
#[cfg(feature = "unbalanced")]
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

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: Layout = Layout {
        main: "state",
        before: &["oprf.key"],
    };

    #[test]
    fn a_populated_directory_needs_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fresh = dir.path().join("new");
        assert!(!check_fresh(&fresh, false, "update", &LAYOUT).expect("absent is fresh"));
        std::fs::create_dir(&fresh).expect("mkdir");
        assert!(!check_fresh(&fresh, false, "update", &LAYOUT).expect("empty is fresh"));
        std::fs::write(fresh.join("oprf.key"), b"k").expect("write");
        std::fs::write(fresh.join("state"), b"s").expect("write");
        let err = check_fresh(&fresh, false, "psikit x update", &LAYOUT).expect_err("populated");
        assert!(err.to_string().contains("psikit x update"));
        assert!(check_fresh(&fresh, true, "update", &LAYOUT).expect("forced"));
        clear(&fresh).expect("clear");
        assert!(!check_fresh(&fresh, false, "update", &LAYOUT).expect("cleared"));
    }

    #[test]
    fn an_interrupted_set_up_is_replaced_but_other_files_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        // A key and a temporary file, no state: a set-up killed part-way.
        std::fs::write(d.join("oprf.key"), b"k").expect("write");
        std::fs::write(d.join(".state.00ff.tmp"), b"t").expect("write");
        assert!(check_fresh(d, false, "update", &LAYOUT).expect("leftovers are replaced"));
        // Anything else is no leftover of ours: refused unless forced.
        std::fs::write(d.join("notes.txt"), b"mine").expect("write");
        assert!(check_fresh(d, false, "update", &LAYOUT).is_err());
    }

    #[test]
    fn one_command_at_a_time_changes_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let held = lock(&state).expect("first lock");
        assert!(
            !check_fresh(&state, false, "update", &LAYOUT).expect("fresh"),
            "the lock file is no part of the state"
        );
        let err = lock(&state).err().expect("second lock refused");
        assert!(err.to_string().contains("another psikit command"), "{err}");
        drop(held);
        lock(&state).expect("free again");
    }
}
