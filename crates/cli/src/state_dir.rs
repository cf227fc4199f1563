//! Server state directories, shared by the filter and HE set-up commands.

use std::path::Path;

use anyhow::{bail, Context, Result};
use psikit_io::ReadStats;

/// Refuses a directory that holds anything unless forced: a state there
/// would share its OPRF key file with the new one. Returns whether the
/// directory must be cleared ([`clear`]) before the new state is saved; the
/// caller clears it only once the new state is built, so that a failed
/// build leaves the old state alone. `update` names the command that
/// changes a state in place.
pub fn check_fresh(dir: &Path, force: bool, update: &str) -> Result<bool> {
    if !dir.exists() {
        return Ok(false);
    }
    let populated = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .next()
        .is_some();
    if populated && !force {
        bail!(
            "{} is not empty; use `{update}` to change the state in it, or --force to replace \
             everything in it",
            dir.display()
        );
    }
    Ok(populated)
}

/// Removes a state directory that [`check_fresh`] allowed to be replaced.
pub fn clear(dir: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))
}

/// How many rows a set-up command read from its CSV and skipped.
pub fn print_read(path: &Path, stats: &ReadStats) {
    println!("read {} rows from {}", stats.rows_read, path.display());
    if stats.rows_skipped > 0 {
        println!("skipped {} rows with an empty key", stats.rows_skipped);
    }
}
