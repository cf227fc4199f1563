//! The crate's single error type.
//!
//! Messages are written for the person running the tool: they name the file,
//! the 1-based data row, the CSV line and the column involved. They never
//! contain field *values*, because those are set items and must not leak into
//! logs or terminals.

use std::path::PathBuf;

/// Result alias used throughout `psikit-io`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading keys or writing matches.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be opened for reading.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The file we tried to open.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A file could not be created for writing.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The file we tried to create.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// The CSV parser or writer failed (I/O error or malformed CSV).
    #[error("{file}: {source}")]
    Csv {
        /// The file (or `<input>`/`<output>` for streams).
        file: String,
        /// The underlying CSV error; it carries the line number.
        source: csv::Error,
    },

    /// A plain I/O error while writing output.
    #[error("{file}: {source}")]
    Io {
        /// The file being written (or `<output>` for streams).
        file: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },

    /// A column string from the command line is not usable.
    #[error("invalid key column {spec:?}: {reason}")]
    BadColumn {
        /// What the user typed.
        spec: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A key specification lists no columns.
    #[error("no key columns given: name at least one column (e.g. `email` or `#0`)")]
    NoColumns,

    /// An unknown normalisation option was requested.
    #[error(
        "unknown normalisation option {option:?}; \
         expected a comma-separated list of: trim, lower, nfc, collapse, digits (or `none`)"
    )]
    UnknownNormalize {
        /// The offending option as typed.
        option: String,
    },

    /// A key (or label) column given by name is not in the header.
    #[error(
        "{input}: {role} column {column:?} not found in the header; available columns: {available}"
    )]
    MissingColumn {
        /// The file being read.
        input: String,
        /// What the column is for: `"key"` or `"label"`.
        role: &'static str,
        /// The requested column name.
        column: String,
        /// The header's column names, comma separated.
        available: String,
    },

    /// A key (or label) column given by name appears more than once in the
    /// header.
    #[error(
        "{input}: {role} column {column:?} appears more than once in the header \
         (#{first} and #{second}); select it by index instead, e.g. `#{first}`"
    )]
    AmbiguousColumn {
        /// The file being read.
        input: String,
        /// What the column is for: `"key"` or `"label"`.
        role: &'static str,
        /// The requested column name.
        column: String,
        /// First 0-based index carrying that name.
        first: usize,
        /// Second 0-based index carrying that name.
        second: usize,
    },

    /// A column was given by name but the spec says the file has no header.
    #[error(
        "{input}: {role} column {column:?} is given by name, but the file is read without \
         a header row; select it by 0-based index instead, e.g. `#0`"
    )]
    NameWithoutHeader {
        /// The file being read.
        input: String,
        /// What the column is for: `"key"` or `"label"`.
        role: &'static str,
        /// The requested column name.
        column: String,
    },

    /// A row's encoded key is longer than any protocol accepts.
    #[error(
        "{input} row {row}: the key is {len} bytes; keys of at most {max} bytes are accepted",
        max = crate::limits::MAX_KEY_BYTES
    )]
    KeyTooLong {
        /// The file being read.
        input: String,
        /// 1-based data row number.
        row: u64,
        /// The encoded key's length.
        len: usize,
    },

    /// A Parquet file could not be read (or this build cannot read one).
    #[error("{input}: {reason}")]
    Parquet {
        /// The file being read.
        input: String,
        /// What went wrong.
        reason: String,
    },

    /// A value column's field is not an unsigned integer below 2^64.
    #[error("{input}: row {row}: value {value:?} in column {column} is not an unsigned integer")]
    NotAValue {
        /// The file being read.
        input: String,
        /// 1-based data row number.
        row: u64,
        /// The value column, as `"name"` or `#index`.
        column: String,
        /// The field as read.
        value: String,
    },

    /// A header was expected but the input is empty.
    #[error("{input}: the file is empty, but a header row naming the key columns was expected")]
    EmptyInput {
        /// The file being read.
        input: String,
    },

    /// A data row is too short to contain a key (or label) column.
    #[error(
        "{input}: row {row} (line {line}) has {fields} field(s), \
         but {role} column {column} needs at least {needed}"
    )]
    ShortRow {
        /// The file being read.
        input: String,
        /// 1-based data row number (the header is not counted).
        row: u64,
        /// 1-based line number in the file.
        line: u64,
        /// Number of fields the row has.
        fields: usize,
        /// What the column is for: `"key"` or `"label"`.
        role: &'static str,
        /// The key column, as `"name"` or `#index`.
        column: String,
        /// Number of fields needed to reach that column.
        needed: usize,
    },

    /// A key field is not UTF-8 but a Unicode-aware normalisation was requested.
    #[error(
        "{input}: row {row} (line {line}), key column {column}: the value is not valid UTF-8, \
         which the `{option}` normalisation requires; re-encode the file as UTF-8"
    )]
    InvalidUtf8 {
        /// The file being read.
        input: String,
        /// 1-based data row number.
        row: u64,
        /// 1-based line number in the file.
        line: u64,
        /// The key column, as `"name"` or `#index`.
        column: String,
        /// The normalisation option that needed UTF-8 (`lower` or `nfc`).
        option: &'static str,
    },

    /// A key field is too long to be length-prefixed in a composite key.
    #[error("{input}: row {row}, key column {column}: the value is longer than 4 GiB")]
    FieldTooLong {
        /// The file being read.
        input: String,
        /// 1-based data row number.
        row: u64,
        /// The key column, as `"name"` or `#index`.
        column: String,
    },

    /// A match row was written with the wrong number of extra values.
    #[error(
        "a match row has {got} extra value(s), but the output declares {expected} extra column(s)"
    )]
    ExtraCount {
        /// Extra columns declared when the writer was created.
        expected: usize,
        /// Extra values passed with the row.
        got: usize,
    },

    /// Parameters for synthetic data are inconsistent.
    #[error("invalid synthetic data request: {0}")]
    Synthetic(String),
}
