//! Where rows come from: a CSV stream or, with the `parquet` feature, a
//! Parquet file. Either gives each row as the fields of a [`ByteRecord`],
//! so keys, labels and values are read, normalised and written back the
//! same way whatever the format.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use csv::ByteRecord;

use crate::error::{Error, Result};
use crate::reader::{csv_reader, read_headers, read_record};
use crate::spec::KeySpec;

/// The first bytes of every Parquet file.
const PARQUET_MAGIC: &[u8; 4] = b"PAR1";

/// The rows of one input.
pub(crate) enum Records<R> {
    Csv(csv::Reader<R>),
    #[cfg(feature = "parquet")]
    Parquet(parquet_rows::ParquetRows),
}

impl<R: io::Read> Records<R> {
    /// The rows of a CSV stream.
    pub(crate) fn csv(reader: R, spec: &KeySpec) -> Self {
        Records::Csv(csv_reader(reader, spec))
    }

    /// The header: a CSV file's first row when the spec says it has one;
    /// a Parquet file's column names always.
    pub(crate) fn headers(&mut self, spec: &KeySpec, input: &str) -> Result<Option<ByteRecord>> {
        match self {
            Records::Csv(csv) => read_headers(csv, spec, input),
            #[cfg(feature = "parquet")]
            Records::Parquet(p) => Ok(Some(p.headers())),
        }
    }

    /// Reads the next row into `record`; `false` at the end.
    pub(crate) fn next(&mut self, record: &mut ByteRecord, input: &str) -> Result<bool> {
        match self {
            Records::Csv(csv) => read_record(csv, record, input),
            #[cfg(feature = "parquet")]
            Records::Parquet(p) => p.next(record, input),
        }
    }

    /// The CSV byte source, once read (`None` for a Parquet file).
    pub(crate) fn into_inner(self) -> Option<R> {
        match self {
            Records::Csv(csv) => Some(csv.into_inner()),
            #[cfg(feature = "parquet")]
            Records::Parquet(_) => None,
        }
    }
}

impl Records<File> {
    /// The file at `path`: Parquet if it starts with Parquet's magic bytes,
    /// CSV otherwise.
    pub(crate) fn open(path: &Path, spec: &KeySpec) -> Result<Self> {
        let open = || {
            File::open(path).map_err(|source| Error::Open {
                path: path.to_owned(),
                source,
            })
        };
        if !is_parquet(path)? {
            return Ok(Records::csv(open()?, spec));
        }
        #[cfg(feature = "parquet")]
        return Ok(Records::Parquet(parquet_rows::ParquetRows::open(
            open()?,
            path,
        )?));
        #[cfg(not(feature = "parquet"))]
        Err(Error::Parquet {
            input: path.display().to_string(),
            reason: "this psikit was built without Parquet support (the `parquet` feature)".into(),
        })
    }
}

/// Whether the file at `path` starts with Parquet's magic bytes.
pub fn is_parquet(path: &Path) -> Result<bool> {
    let mut file = File::open(path).map_err(|source| Error::Open {
        path: path.to_owned(),
        source,
    })?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(Error::Open {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
    Ok(&magic == PARQUET_MAGIC)
}

#[cfg(feature = "parquet")]
mod parquet_rows {
    //! A Parquet file row by row through the `parquet` crate's record
    //! reader (row group by row group, so memory is one row group, never
    //! the file), each flat column's value as CSV would hold it.
    //!
    //! That reader panics on some malformed files (found by the
    //! `parquet_keys` fuzz target: metadata that contradicts itself), so
    //! every call into it runs under `catch_unwind` and a panic becomes an
    //! error naming the file; the reader is not used after one.

    use std::fs::File;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::path::Path;

    use csv::ByteRecord;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::reader::RowIter;
    use parquet::record::Field;

    use crate::error::{Error, Result};

    pub(crate) struct ParquetRows {
        names: ByteRecord,
        /// `None` once the reader failed.
        rows: Option<RowIter<'static>>,
    }

    /// `f`, with a panic of the `parquet` crate turned into an error.
    fn guarded<T>(input: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(error(input, "malformed Parquet file (its reader failed)")))
    }

    fn error(input: &str, reason: impl ToString) -> Error {
        Error::Parquet {
            input: input.to_owned(),
            reason: reason.to_string(),
        }
    }

    impl ParquetRows {
        pub(crate) fn open(file: File, path: &Path) -> Result<Self> {
            let input = path.display().to_string();
            guarded(&input, || {
                let reader = SerializedFileReader::new(file).map_err(|e| error(&input, e))?;
                let schema = reader.metadata().file_metadata().schema();
                let mut names = ByteRecord::new();
                for field in schema.get_fields() {
                    names.push_field(field.name().as_bytes());
                }
                Ok(Self {
                    names,
                    rows: Some(reader.into_iter()),
                })
            })
        }

        pub(crate) fn headers(&self) -> ByteRecord {
            self.names.clone()
        }

        pub(crate) fn next(&mut self, record: &mut ByteRecord, input: &str) -> Result<bool> {
            let Some(rows) = self.rows.as_mut() else {
                return Err(error(input, "malformed Parquet file (its reader failed)"));
            };
            let next = guarded(input, || Ok(rows.next()));
            let row = match next {
                Ok(Some(row)) => row.map_err(|e| error(input, e))?,
                Ok(None) => return Ok(false),
                Err(e) => {
                    self.rows = None;
                    return Err(e);
                }
            };
            record.clear();
            for (name, field) in row.get_column_iter() {
                match field {
                    Field::Null => record.push_field(b""),
                    Field::Str(s) => record.push_field(s.as_bytes()),
                    Field::Bytes(b) => record.push_field(b.data()),
                    Field::Group(_) | Field::ListInternal(_) | Field::MapInternal(_) => {
                        return Err(error(
                            input,
                            format!("column {name:?} is nested; only flat columns are read"),
                        ))
                    }
                    // Numbers, dates and times as the crate prints them.
                    other => record.push_field(other.to_string().as_bytes()),
                }
            }
            Ok(true)
        }
    }
}
