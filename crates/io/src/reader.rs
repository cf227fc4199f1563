//! Streaming key reader for large inputs.
//!
//! A server file can hold hundreds of millions of rows, so [`KeyReader`]
//! never holds more than one CSV record plus the batch the caller asks for.

use std::fs::File;
use std::io;
use std::path::Path;

use csv::ByteRecord;

use crate::error::{Error, Result};
use crate::records::Records;
use crate::spec::{KeyPlan, KeySpec};

/// Read buffer size: large enough to amortise syscalls on multi-GB files.
const READ_BUFFER: usize = 256 * 1024;

/// One set item: the encoded key and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Item {
    /// The normalised, encoded key bytes (see [the crate docs](crate#item-encoding)).
    pub key: Vec<u8>,
    /// 1-based data row number (the header row is not counted).
    pub row: u64,
}

/// An item with its label, from
/// [`KeyReader::next_labeled_batch`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LabeledItem {
    /// The normalised, encoded key bytes, as in [`Item::key`].
    pub key: Vec<u8>,
    /// The spec's label columns of the row, as they are in the file,
    /// encoded as one CSV record (see [`encode_label`](crate::encode_label));
    /// empty when the spec names no label columns.
    pub label: Vec<u8>,
    /// 1-based data row number (the header row is not counted).
    pub row: u64,
}

/// Counters describing what a reader has consumed so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Data rows read, including skipped ones.
    pub rows_read: u64,
    /// Rows skipped because a key field was empty after normalisation.
    pub rows_skipped: u64,
}

impl ReadStats {
    /// Rows that produced an item.
    pub fn items(&self) -> u64 {
        self.rows_read - self.rows_skipped
    }
}

/// Reads items from a CSV source in caller-sized batches.
///
/// ```no_run
/// # fn main() -> psikit_io::Result<()> {
/// use psikit_io::{Column, KeyReader, KeySpec};
/// let spec = KeySpec::new(vec![Column::parse("email")?]);
/// let mut reader = KeyReader::open("server.csv", &spec)?;
/// let mut batch = Vec::new();
/// while reader.next_batch(65_536, &mut batch)? > 0 {
///     // hash / encrypt `batch` here
/// }
/// let _stats = reader.stats();
/// # Ok(()) }
/// ```
pub struct KeyReader<R> {
    records: Records<R>,
    plan: KeyPlan,
    headers: Option<ByteRecord>,
    record: ByteRecord,
    stats: ReadStats,
    input: String,
    /// A read error met after some rows of a [`RowBatch`]: returned by the
    /// next call, so those rows are keyed first, as in a row-by-row read.
    pending: Option<Error>,
}

/// Data rows as read, for keying elsewhere ([`KeyReader::next_rows`],
/// [`RowKeyer`]): parsing a CSV is sequential, while normalising and
/// encoding its keys, about two thirds of [`KeyReader::next_batch`]'s
/// time, can spread over cores. The records are reused from batch to
/// batch.
#[derive(Debug, Default)]
pub struct RowBatch {
    records: Vec<ByteRecord>,
    len: usize,
    /// The 1-based row number of the first record.
    first_row: u64,
}

impl RowBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows in file order; the `i`-th is row [`first_row`](Self::first_row)` + i`.
    pub fn records(&self) -> &[ByteRecord] {
        &self.records[..self.len]
    }

    /// The 1-based row number of the first record.
    pub fn first_row(&self) -> u64 {
        self.first_row
    }
}

/// How a [`KeyReader`] turns a row into its item key and values, apart
/// from the reader, so that rows read by [`KeyReader::next_rows`] can be
/// keyed on other threads.
#[derive(Clone, Debug)]
pub struct RowKeyer(KeyPlan);

impl RowKeyer {
    /// The row's normalised, encoded key, as [`KeyReader::next_batch`]
    /// gives it; `None` when a key field is empty after normalisation (the
    /// row is skipped: the caller counts it).
    pub fn key(&self, row: u64, record: &ByteRecord) -> Result<Option<Vec<u8>>> {
        self.0.key(record, row)
    }

    /// The row's value columns, appended to `out` as
    /// [`KeyReader::next_valued_batch`] does.
    pub fn values(&self, row: u64, record: &ByteRecord, out: &mut Vec<u64>) -> Result<()> {
        self.0.values(record, row, out)
    }
}

impl KeyReader<File> {
    /// Opens `path` (CSV, or Parquet with the `parquet` feature: told by
    /// the file's first bytes) and resolves the key columns against its
    /// header.
    pub fn open(path: impl AsRef<Path>, spec: &KeySpec) -> Result<Self> {
        let path = path.as_ref();
        Self::from_records(Records::open(path, spec)?, spec, path.display().to_string())
    }
}

impl<R: io::Read> KeyReader<R> {
    /// Reads from any byte source (e.g. stdin); errors call it `<input>`.
    pub fn from_reader(reader: R, spec: &KeySpec) -> Result<Self> {
        Self::with_name(reader, spec, "<input>".to_owned())
    }

    /// Reads from any byte source; errors call it `input` (a file name).
    pub fn with_name(reader: R, spec: &KeySpec, input: String) -> Result<Self> {
        Self::from_records(Records::csv(reader, spec), spec, input)
    }

    fn from_records(mut records: Records<R>, spec: &KeySpec, input: String) -> Result<Self> {
        let headers = records.headers(spec, &input)?;
        let plan = KeyPlan::resolve(spec, headers.as_ref(), &input)?;
        Ok(KeyReader {
            records,
            plan,
            headers,
            record: ByteRecord::new(),
            stats: ReadStats::default(),
            input,
            pending: None,
        })
    }

    /// The keying of this reader's rows, for [`next_rows`](Self::next_rows).
    pub fn keyer(&self) -> RowKeyer {
        RowKeyer(self.plan.clone())
    }

    /// Replaces the rows of `batch` with up to `max` data rows as read (a
    /// `max` of 0 is treated as 1); returns how many, 0 at the end. The
    /// rows are not keyed: [`stats`](Self::stats) counts them as read and
    /// none as skipped (the caller keys them with [`keyer`](Self::keyer)
    /// and counts the skipped ones).
    pub fn next_rows(&mut self, max: usize, batch: &mut RowBatch) -> Result<usize> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        batch.first_row = self.stats.rows_read + 1;
        batch.len = 0;
        while batch.len < max.max(1) {
            if batch.records.len() == batch.len {
                batch.records.push(ByteRecord::new());
            }
            match self
                .records
                .next(&mut batch.records[batch.len], &self.input)
            {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) if batch.len > 0 => {
                    self.pending = Some(e);
                    break;
                }
                Err(e) => return Err(e),
            }
            batch.len += 1;
            self.stats.rows_read += 1;
        }
        Ok(batch.len)
    }

    /// Replaces the contents of `out` with up to `max` items (a `max` of 0
    /// is treated as 1) and returns how many were produced; 0 means the
    /// input is exhausted. Rows with an empty key are skipped and counted.
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<Item>) -> Result<usize> {
        out.clear();
        let max = max.max(1);
        while out.len() < max {
            match self.next_item()? {
                Some(item) => out.push(item),
                None => break,
            }
        }
        Ok(out.len())
    }

    /// Like [`next_batch`](Self::next_batch), with each item's label
    /// columns (see [`KeySpec::label_columns`]). A row too short to hold a
    /// label column is an error, as for key columns.
    pub fn next_labeled_batch(&mut self, max: usize, out: &mut Vec<LabeledItem>) -> Result<usize> {
        out.clear();
        let max = max.max(1);
        while out.len() < max {
            let Some(item) = self.next_item()? else {
                break;
            };
            let mut label = Vec::new();
            self.plan.label(&self.record, item.row, &mut label)?;
            out.push(LabeledItem {
                key: item.key,
                label,
                row: item.row,
            });
        }
        Ok(out.len())
    }

    /// Like [`next_batch`](Self::next_batch), with each item's value
    /// columns (see [`KeySpec::value_columns`]) appended to `values`, as
    /// many per item as the spec names, in order; `values` is cleared
    /// first.
    pub fn next_valued_batch(
        &mut self,
        max: usize,
        out: &mut Vec<Item>,
        values: &mut Vec<u64>,
    ) -> Result<usize> {
        out.clear();
        values.clear();
        let max = max.max(1);
        while out.len() < max {
            let Some(item) = self.next_item()? else {
                break;
            };
            self.plan.values(&self.record, item.row, values)?;
            out.push(item);
        }
        Ok(out.len())
    }

    /// Whether the spec this reader was opened with names label columns.
    pub fn has_labels(&self) -> bool {
        self.plan.has_labels()
    }

    /// Reads rows until one yields an item or the input ends; the item's
    /// record stays in `self.record`.
    fn next_item(&mut self) -> Result<Option<Item>> {
        while self.records.next(&mut self.record, &self.input)? {
            self.stats.rows_read += 1;
            let row = self.stats.rows_read;
            match self.plan.key(&self.record, row)? {
                Some(key) => return Ok(Some(Item { key, row })),
                None => self.stats.rows_skipped += 1,
            }
        }
        Ok(None)
    }

    /// The CSV byte source, once the input is read (a reader that hashed
    /// what went through it gives its digest); `None` for a Parquet file.
    pub fn into_inner(self) -> Option<R> {
        self.records.into_inner()
    }

    /// Counters so far (final once [`next_batch`](Self::next_batch) returned 0).
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// The header row, if the spec says the file has one.
    pub fn headers(&self) -> Option<&ByteRecord> {
        self.headers.as_ref()
    }
}

/// A CSV reader configured from the spec. Flexible, because rows with a
/// different field count are fine as long as the key columns are present
/// (checked per row by the key plan).
pub(crate) fn csv_reader<R: io::Read>(reader: R, spec: &KeySpec) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .has_headers(spec.has_headers)
        .delimiter(spec.delimiter)
        .flexible(true)
        .buffer_capacity(READ_BUFFER)
        .from_reader(reader)
}

/// Reads the header row when the spec declares one (a UTF-8 BOM is
/// stripped by the csv crate).
pub(crate) fn read_headers<R: io::Read>(
    csv: &mut csv::Reader<R>,
    spec: &KeySpec,
    input: &str,
) -> Result<Option<ByteRecord>> {
    if !spec.has_headers {
        return Ok(None);
    }
    let headers = csv.byte_headers().map_err(|e| csv_error(input, e))?;
    Ok(Some(headers.clone()))
}

/// Reads the next data record into `record`; `false` at end of input.
pub(crate) fn read_record<R: io::Read>(
    csv: &mut csv::Reader<R>,
    record: &mut ByteRecord,
    input: &str,
) -> Result<bool> {
    csv.read_byte_record(record)
        .map_err(|e| csv_error(input, e))
}

pub(crate) fn csv_error(input: &str, source: csv::Error) -> Error {
    Error::Csv {
        file: input.to_owned(),
        source,
    }
}
