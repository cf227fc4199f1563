//! Server state directories: a set-up never mixes a new state with an old
//! one's key, a failed set-up leaves the old state alone, and one command
//! at a time changes a directory ([`lock`]), so that no update is lost.

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::Error;

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

/// Refuses a directory that holds anything unless forced: a state there
/// would share its OPRF key file with the new one. Returns whether the
/// directory must be [`clear`]ed before the new state is saved; callers
/// clear it only once the new state is built. `update` names the command
/// that changes a state in place.
pub fn check_fresh(dir: &Path, force: bool, update: &str) -> Result<bool, Error> {
    if !dir.exists() {
        return Ok(false);
    }
    let populated = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(Result::ok)
        .any(|entry| is_state_entry(&entry));
    if populated && !force {
        return Err(Error::Config(format!(
            "{} is not empty; use `{update}` to change the state in it, or --force to replace \
             everything in it",
            dir.display()
        )));
    }
    Ok(populated)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_populated_directory_needs_force() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fresh = dir.path().join("new");
        assert!(!check_fresh(&fresh, false, "update").expect("absent is fresh"));
        std::fs::create_dir(&fresh).expect("mkdir");
        assert!(!check_fresh(&fresh, false, "update").expect("empty is fresh"));
        std::fs::write(fresh.join("oprf.key"), b"k").expect("write");
        let err = check_fresh(&fresh, false, "psikit x update").expect_err("populated");
        assert!(err.to_string().contains("psikit x update"));
        assert!(check_fresh(&fresh, true, "update").expect("forced"));
        clear(&fresh).expect("clear");
        assert!(!check_fresh(&fresh, false, "update").expect("cleared"));
    }

    #[test]
    fn one_command_at_a_time_changes_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let held = lock(&state).expect("first lock");
        assert!(
            !check_fresh(&state, false, "update").expect("fresh"),
            "the lock file is no part of the state"
        );
        let err = lock(&state).err().expect("second lock refused");
        assert!(err.to_string().contains("another psikit command"), "{err}");
        drop(held);
        lock(&state).expect("free again");
    }
}
