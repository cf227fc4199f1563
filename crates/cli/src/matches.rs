//! Client-side CSV handling shared by the protocols: distinct keys in, the
//! matched rows out.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use psikit_io::{MatchWriter, Table};

/// Unique keys of a table and, for each, the rows that carry it.
pub fn unique_keys(table: &Table) -> (Vec<Vec<u8>>, Vec<Vec<usize>>) {
    let mut index: HashMap<&[u8], usize> = HashMap::new();
    let (mut keys, mut rows) = (Vec::new(), Vec::<Vec<usize>>::new());
    for (i, row) in table.rows.iter().enumerate() {
        let slot = *index.entry(row.key.as_slice()).or_insert_with(|| {
            keys.push(row.key.clone());
            rows.push(Vec::new());
            keys.len() - 1
        });
        rows[slot].push(i);
    }
    (keys, rows)
}

/// Writes the rows of `table` whose key matched; returns how many.
pub fn write_matches(
    path: &Path,
    table: &Table,
    rows_of_key: &[Vec<usize>],
    matches: &[bool],
) -> Result<u64> {
    let mut out = MatchWriter::create(path, table.headers.as_ref(), &[])?;
    let mut selected: Vec<usize> = rows_of_key
        .iter()
        .zip(matches)
        .filter(|(_, m)| **m)
        .flat_map(|(rows, _)| rows.iter().copied())
        .collect();
    selected.sort_unstable();
    for &i in &selected {
        out.write_row::<&[u8]>(&table.rows[i].record, &[])?;
    }
    out.finish()?;
    Ok(selected.len() as u64)
}
