//! Client-side CSV handling shared by the protocols: distinct keys in, the
//! matched rows out.

use std::path::Path;

use anyhow::Result;

use crate::report::Say;
use psikit_protocols::io::{matched_rows, MatchWriter, ReadStats, Table};

/// One client key's outcome for [`write_matches_with`]: `None` if it did
/// not match, else the extra values to write after each of its rows.
pub type Extras = Option<Vec<Vec<u8>>>;

/// Writes the rows of `table` whose key matched; returns how many.
pub fn write_matches(
    path: &Path,
    table: &Table,
    rows_of_key: &[Vec<usize>],
    matches: &[bool],
) -> Result<u64> {
    let extras: Vec<Extras> = matches.iter().map(|&m| m.then(Vec::new)).collect();
    write_matches_with(path, table, rows_of_key, &extras, &[])
}

/// Writes, in file order, the rows of `table` whose key `k` has
/// `extras[k] = Some(values)`, each followed by its values under the
/// `extra_columns` header; returns how many rows.
pub fn write_matches_with(
    path: &Path,
    table: &Table,
    rows_of_key: &[Vec<usize>],
    extras: &[Extras],
    extra_columns: &[String],
) -> Result<u64> {
    let names: Vec<&str> = extra_columns.iter().map(String::as_str).collect();
    let mut out = MatchWriter::create(path, table.headers.as_ref(), &names)?;
    let selected = matched_rows(rows_of_key, extras);
    for &(r, extra) in &selected {
        out.write_row(&table.rows[r].record, extra)?;
    }
    out.finish()?;
    Ok(selected.len() as u64)
}

/// How many rows a command read from its CSV and skipped.
pub fn print_read(say: Say, path: &Path, stats: &ReadStats) {
    say.line(format!(
        "read {} rows from {}",
        stats.rows_read,
        path.display()
    ));
    if stats.rows_skipped > 0 {
        say.line(format!(
            "skipped {} rows with an empty key",
            stats.rows_skipped
        ));
    }
}
