//! In-memory reading of small inputs (the client side), keeping every row.
//!
//! The client needs its original rows after the protocol to write the
//! matches, so unlike [`KeyReader`](crate::KeyReader) this keeps them all.
//! Intended for files of up to a few million rows.

use std::io;
use std::path::Path;

use csv::ByteRecord;

use crate::error::Result;
use crate::reader::ReadStats;
use crate::records::Records;
use crate::spec::{Column, KeyPlan, KeySpec};

/// One data row with a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRow {
    /// 1-based data row number (the header row is not counted).
    pub row: u64,
    /// The encoded item, identical to what [`KeyReader`](crate::KeyReader)
    /// would produce for this row.
    pub key: Vec<u8>,
    /// The row's original fields, untouched by normalisation.
    pub record: ByteRecord,
}

/// A whole CSV file: header plus the rows that produced a key.
///
/// Rows skipped for an empty key are not kept (they cannot match), but are
/// counted in [`Table::stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// The header row, if the spec says the file has one.
    pub headers: Option<ByteRecord>,
    /// Rows in file order.
    pub rows: Vec<TableRow>,
    /// Rows read and skipped.
    pub stats: ReadStats,
}

/// The rows of a client's matches, in file order, each with its extra
/// values: the keys `k` with `extras[k] = Some(values)`, expanded to their
/// rows (`rows_of_key` from [`Table::unique_keys`]). What the CLI writes
/// to its match file and Python returns, so both give the same rows.
pub fn matched_rows<'a>(
    rows_of_key: &[Vec<usize>],
    extras: &'a [Option<Vec<Vec<u8>>>],
) -> Vec<(usize, &'a [Vec<u8>])> {
    let mut selected: Vec<(usize, &[Vec<u8>])> = rows_of_key
        .iter()
        .zip(extras)
        .filter_map(|(rows, extra)| Some((rows, extra.as_deref()?)))
        .flat_map(|(rows, extra)| rows.iter().map(move |&r| (r, extra)))
        .collect();
    selected.sort_unstable_by_key(|(r, _)| *r);
    selected
}

impl Table {
    /// The distinct keys in order of first appearance and, for each, the
    /// rows that carry it: what a client queries, and how its matches map
    /// back to rows.
    pub fn unique_keys(&self) -> (Vec<Vec<u8>>, Vec<Vec<usize>>) {
        // Sized up front: growing rehashes the keys at every doubling (with
        // SipHash, kept because keys come from outside), which on a
        // million keys cost more than the inserts.
        let n = self.rows.len();
        let mut index = std::collections::HashMap::<&[u8], usize>::with_capacity(n);
        let (mut keys, mut rows) = (Vec::with_capacity(n), Vec::<Vec<usize>>::with_capacity(n));
        for (i, row) in self.rows.iter().enumerate() {
            let slot = *index.entry(row.key.as_slice()).or_insert_with(|| {
                keys.push(row.key.clone());
                rows.push(Vec::new());
                keys.len() - 1
            });
            rows[slot].push(i);
        }
        (keys, rows)
    }

    /// The 0-based position of a `role` column (say "value") in this table,
    /// by header name or index; `input` names the file in errors.
    pub fn column_position(
        &self,
        column: &Column,
        role: &'static str,
        input: &str,
    ) -> Result<usize> {
        crate::spec::column_index(column, role, self.headers.as_ref(), input)
    }

    /// The keys in row order, e.g. to feed a protocol.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.rows.iter().map(|r| r.key.as_slice())
    }
}

/// Reads the whole file at `path` (CSV, or Parquet with the `parquet`
/// feature) into a [`Table`].
pub fn read_rows(path: impl AsRef<Path>, spec: &KeySpec) -> Result<Table> {
    let path = path.as_ref();
    read_table(
        Records::open(path, spec)?,
        spec,
        &path.display().to_string(),
    )
}

/// Like [`read_rows`] for any CSV byte source; errors call it `<input>`.
pub fn read_rows_from(reader: impl io::Read, spec: &KeySpec) -> Result<Table> {
    read_table(Records::csv(reader, spec), spec, "<input>")
}

/// Shared body of [`read_rows`] and [`read_rows_from`].
fn read_table<R: io::Read>(mut records: Records<R>, spec: &KeySpec, input: &str) -> Result<Table> {
    let headers = records.headers(spec, input)?;
    let plan = KeyPlan::resolve(spec, headers.as_ref(), input)?;
    let mut table = Table {
        headers,
        ..Table::default()
    };
    let mut record = ByteRecord::new();
    while records.next(&mut record, input)? {
        table.stats.rows_read += 1;
        let row = table.stats.rows_read;
        match plan.key(&record, row)? {
            Some(key) => table.rows.push(TableRow {
                row,
                key,
                record: record.clone(),
            }),
            None => table.stats.rows_skipped += 1,
        }
    }
    Ok(table)
}
