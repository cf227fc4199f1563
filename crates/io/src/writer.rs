//! CSV output of matched rows.
//!
//! The output has the client's own columns followed by any extra columns a
//! protocol supplies (e.g. a `label` from the server), so it can be opened
//! next to the input and read back with the same [`KeySpec`](crate::KeySpec).

use std::fs::File;
use std::io;
use std::path::Path;

use csv::ByteRecord;

use crate::error::{Error, Result};

/// Writes matched rows as comma-separated, RFC 4180 quoted CSV.
///
/// ```no_run
/// # fn main() -> psikit_io::Result<()> {
/// use psikit_io::{read_rows, Column, KeySpec, MatchWriter};
/// let spec = KeySpec::new(vec![Column::parse("email")?]);
/// let table = read_rows("client.csv", &spec)?;
/// let mut out = MatchWriter::create("matches.csv", table.headers.as_ref(), &["label"])?;
/// for row in &table.rows[..1] {
///     out.write_row(&row.record, &["gold"])?;
/// }
/// out.finish()?;
/// # Ok(()) }
/// ```
pub struct MatchWriter<W: io::Write> {
    csv: csv::Writer<W>,
    /// Width of the input header, to pad short rows so extras line up.
    width: usize,
    extras: usize,
    output: String,
    record: ByteRecord,
}

impl MatchWriter<File> {
    /// Creates (or truncates) `path` and writes the header, see
    /// [`from_writer`](Self::from_writer).
    pub fn create(
        path: impl AsRef<Path>,
        header: Option<&ByteRecord>,
        extra_columns: &[&str],
    ) -> Result<Self> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|source| Error::Create {
            path: path.to_owned(),
            source,
        })?;
        Self::with_name(file, header, extra_columns, path.display().to_string())
    }
}

impl<W: io::Write> MatchWriter<W> {
    /// Wraps any writer. With an input `header`, the output header is that
    /// header followed by `extra_columns`. Without one (a headerless input),
    /// no header is written, so the output has the same shape as the input.
    pub fn from_writer(
        writer: W,
        header: Option<&ByteRecord>,
        extra_columns: &[&str],
    ) -> Result<Self> {
        Self::with_name(writer, header, extra_columns, "<output>".to_owned())
    }

    /// Shared constructor; writes the header immediately.
    fn with_name(
        writer: W,
        header: Option<&ByteRecord>,
        extra_columns: &[&str],
        output: String,
    ) -> Result<Self> {
        let csv = csv::WriterBuilder::new().flexible(true).from_writer(writer);
        let mut this = MatchWriter {
            csv,
            width: header.map_or(0, ByteRecord::len),
            extras: extra_columns.len(),
            output,
            record: ByteRecord::new(),
        };
        if let Some(header) = header {
            let extras: Vec<&[u8]> = extra_columns.iter().map(|c| c.as_bytes()).collect();
            this.write_row(header, &extras)?;
        }
        Ok(this)
    }

    /// Writes one matched row: the original `record` followed by `extras`,
    /// one value per extra column declared at creation. A row shorter than
    /// the header is padded with empty fields so the extras stay aligned.
    pub fn write_row<E: AsRef<[u8]>>(&mut self, record: &ByteRecord, extras: &[E]) -> Result<()> {
        if extras.len() != self.extras {
            return Err(Error::ExtraCount {
                expected: self.extras,
                got: extras.len(),
            });
        }
        self.record.clear();
        self.record.extend(record);
        for _ in record.len()..self.width {
            self.record.push_field(b"");
        }
        for extra in extras {
            self.record.push_field(extra.as_ref());
        }
        self.csv
            .write_byte_record(&self.record)
            .map_err(|source| Error::Csv {
                file: self.output.clone(),
                source,
            })
    }

    /// Flushes everything and returns the inner writer. Call this rather than
    /// dropping the writer, which would silently ignore a failed flush.
    pub fn finish(self) -> Result<W> {
        let file = self.output;
        self.csv.into_inner().map_err(|e| Error::Io {
            file,
            source: e.into_error(),
        })
    }
}

/// Streams the file at `input` (CSV read with `spec`'s delimiter and
/// header setting, or Parquet) and writes to `out` as CSV, as
/// [`MatchWriter`] does, the data rows whose 1-based number `keep`
/// accepts; returns how many. Memory is one record (one row group of a
/// Parquet file): how a job too large to hold writes its matched rows.
pub fn write_selected_rows<W: io::Write>(
    input: &std::path::Path,
    spec: &crate::KeySpec,
    out: W,
    mut keep: impl FnMut(u64) -> bool,
) -> Result<(W, u64)> {
    write_selected_parts(&[input], spec, out, |_, row| keep(row))
}

/// [`write_selected_rows`] over the parts of one input, one after another
/// into one CSV (the first part's header, if it has one, heads it);
/// `keep(part, row)` takes a part's index and a 1-based row number.
pub fn write_selected_parts<W: io::Write>(
    parts: &[&std::path::Path],
    spec: &crate::KeySpec,
    out: W,
    mut keep: impl FnMut(usize, u64) -> bool,
) -> Result<(W, u64)> {
    let mut first = parts
        .first()
        .map(|p| SelectedRows::open(p, spec))
        .transpose()?;
    let headers = first.as_ref().and_then(SelectedRows::headers).cloned();
    let mut writer = MatchWriter::from_writer(out, headers.as_ref(), &[])?;
    let (mut record, mut written) = (ByteRecord::new(), 0u64);
    for (i, part) in parts.iter().enumerate() {
        let mut rows = match first.take() {
            Some(rows) => rows,
            None => SelectedRows::open(part, spec)?,
        };
        while rows.next(&mut |row| keep(i, row), &mut record)? {
            writer.write_row::<&[u8]>(&record, &[])?;
            written += 1;
        }
    }
    Ok((writer.finish()?, written))
}

/// The data rows of a file (CSV read with a spec's delimiter and header
/// setting, or Parquet) whose 1-based number a filter accepts, streamed
/// one at a time: the matched rows of a job, for a file or for a front
/// end that hands them back.
pub struct SelectedRows {
    records: crate::records::Records<std::fs::File>,
    name: String,
    headers: Option<ByteRecord>,
    row: u64,
}

impl SelectedRows {
    pub fn open(input: &std::path::Path, spec: &crate::KeySpec) -> Result<Self> {
        let name = input.display().to_string();
        let mut records = crate::records::Records::open(input, spec)?;
        let headers = records.headers(spec, &name)?;
        Ok(Self {
            records,
            name,
            headers,
            row: 0,
        })
    }

    /// The header record, if the file has one.
    pub fn headers(&self) -> Option<&ByteRecord> {
        self.headers.as_ref()
    }

    /// Reads the next row `keep` accepts into `record`; `false` at the end.
    pub fn next(
        &mut self,
        keep: &mut impl FnMut(u64) -> bool,
        record: &mut ByteRecord,
    ) -> Result<bool> {
        while self.records.next(record, &self.name)? {
            self.row += 1;
            if keep(self.row) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
