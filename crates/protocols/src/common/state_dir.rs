//! Server state directories: a set-up never mixes a new state with an old
//! one's key, and a failed set-up leaves the old state alone.

use std::path::Path;

use crate::Error;

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
        .next()
        .is_some();
    if populated && !force {
        return Err(Error::Config(format!(
            "{} is not empty; use `{update}` to change the state in it, or --force to replace \
             everything in it",
            dir.display()
        )));
    }
    Ok(populated)
}

/// Removes a state directory that [`check_fresh`] allowed to be replaced.
pub fn clear(dir: &Path) -> Result<(), Error> {
    std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))
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
        assert!(!fresh.exists());
    }
}
