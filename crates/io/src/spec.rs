//! Which columns form the key, and how a row becomes item bytes.
//!
//! # Item encoding
//!
//! * **One key column**: the item is the column's normalised bytes, as is.
//! * **Several key columns** (a composite key): the item is the concatenation,
//!   in the order the columns are listed, of `len ‖ bytes` for each normalised
//!   field, where `len` is the field's byte length as a little-endian `u32`.
//!   The length prefixes make the encoding injective, so `("a,b", "c")` and
//!   `("a", "b,c")` give different items.
//!
//! A row is skipped (and counted in [`ReadStats::rows_skipped`](crate::ReadStats::rows_skipped)) when any key
//! field is empty after normalisation: a partial composite key would make
//! unrelated rows with the same missing data match each other.
//!
//! Both parties must use the same number of key columns in the same order and
//! the same [`Normalize`] options, or no item will ever match; the column
//! *names* may differ between the two files. [`KeySpec::key_format`] gives a
//! string that two parties can compare before running a protocol.

use std::fmt;

use csv::ByteRecord;

use crate::error::{Error, Result};
use crate::label::encode_label;
use crate::limits::MAX_KEY_BYTES;
use crate::normalize::Normalize;

/// A key column, selected by header name or by 0-based position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// Matched against the header row (surrounding whitespace ignored).
    Name(String),
    /// 0-based field position; works with or without a header row.
    Index(usize),
}

impl Column {
    /// Parses a command-line column: `#N` (a `#` followed only by digits) is
    /// a 0-based index, anything else is a header name. Surrounding
    /// whitespace is ignored. A header literally named like `#2` can only be
    /// selected by its index.
    pub fn parse(s: &str) -> Result<Column> {
        let s = s.trim();
        if s.is_empty() {
            return Err(bad_column(s, "the column name is empty"));
        }
        match s.strip_prefix('#') {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                let index = digits
                    .parse()
                    .map_err(|_| bad_column(s, "the column index is too large"))?;
                Ok(Column::Index(index))
            }
            _ => Ok(Column::Name(s.to_owned())),
        }
    }

    /// Parses a comma-separated list such as `"first_name,last_name,#4"`
    /// with [`Column::parse`]. (A header name containing a comma must be
    /// selected by index.)
    pub fn parse_list(s: &str) -> Result<Vec<Column>> {
        let cols = s
            .split(',')
            .map(Column::parse)
            .collect::<Result<Vec<_>>>()?;
        Ok(cols)
    }
}

impl fmt::Display for Column {
    /// `"name"` (quoted) or `#index`, as used in error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Column::Name(name) => write!(f, "{name:?}"),
            Column::Index(i) => write!(f, "#{i}"),
        }
    }
}

fn bad_column(spec: &str, reason: &'static str) -> Error {
    Error::BadColumn {
        spec: spec.to_owned(),
        reason,
    }
}

/// How to turn each CSV row into a set item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// Key columns, in encoding order (see the module docs).
    pub columns: Vec<Column>,
    /// Normalisation applied to every key field.
    pub normalize: Normalize,
    /// Whether the first row is a header (needed for [`Column::Name`]).
    pub has_headers: bool,
    /// Field delimiter, e.g. `b','` or `b'\t'`.
    pub delimiter: u8,
    /// Label columns, read as they are (never normalised) and encoded as one
    /// CSV record by [`encode_label`](crate::encode_label). Only
    /// [`KeyReader::next_labeled_batch`](crate::KeyReader::next_labeled_batch)
    /// returns them; empty for unlabeled protocols.
    pub label_columns: Vec<Column>,
    /// Value columns, unsigned integers (below 2^64) that circuit PSI sums
    /// over the intersection. Only
    /// [`KeyReader::next_valued_batch`](crate::KeyReader::next_valued_batch)
    /// reads them.
    pub value_columns: Vec<Column>,
}

impl KeySpec {
    /// A spec with the given columns and the defaults: `trim` normalisation,
    /// a header row, and `,` as delimiter.
    pub fn new(columns: Vec<Column>) -> KeySpec {
        KeySpec {
            columns,
            normalize: Normalize::default(),
            has_headers: true,
            delimiter: b',',
            label_columns: Vec::new(),
            value_columns: Vec::new(),
        }
    }

    /// A string describing everything that affects the item bytes (number of
    /// columns and normalisation, not column names). Two parties whose
    /// strings differ cannot find any common item, so protocols may compare
    /// it up front to fail early with a clear message.
    pub fn key_format(&self) -> String {
        format!(
            "psikit-key-v1;columns={};normalize={}",
            self.columns.len(),
            self.normalize
        )
    }

    /// The label columns' names, which a server publishes so that clients
    /// write them as headers: each column's name as given, or for a column
    /// given by position (`#2`) its default name
    /// ([`default_label_name`](crate::default_label_name)). Names longer
    /// than [`MAX_LABEL_NAME`](crate::MAX_LABEL_NAME) bytes are cut.
    pub fn label_names(&self) -> Vec<String> {
        let count = self.label_columns.len();
        (self.label_columns.iter().enumerate())
            .map(|(k, column)| match column {
                Column::Name(name) => {
                    let mut name = name.trim().to_owned();
                    let mut end = (crate::MAX_LABEL_NAME as usize).min(name.len());
                    while !name.is_char_boundary(end) {
                        end -= 1;
                    }
                    name.truncate(end);
                    name
                }
                Column::Index(_) => crate::default_label_name(k, count),
            })
            .collect()
    }
}

/// A [`KeySpec`] resolved against one file's header: positions to read and
/// how to encode them. Built once per file so per-row work is index lookups.
#[derive(Clone, Debug)]
pub(crate) struct KeyPlan {
    /// Key columns: (0-based field index, column label for errors).
    fields: Vec<(usize, String)>,
    /// Label columns, the same way.
    labels: Vec<(usize, String)>,
    /// Value columns, the same way.
    values: Vec<(usize, String)>,
    normalize: Normalize,
    /// The input's name, for error messages.
    input: String,
}

impl KeyPlan {
    /// Resolves the spec's columns against `headers` (`None` when the file
    /// has no header row).
    pub(crate) fn resolve(
        spec: &KeySpec,
        headers: Option<&ByteRecord>,
        input: &str,
    ) -> Result<KeyPlan> {
        if spec.columns.is_empty() {
            return Err(Error::NoColumns);
        }
        let resolve = |columns: &[Column], role| {
            columns
                .iter()
                .map(|c| Ok((column_index(c, role, headers, input)?, c.to_string())))
                .collect::<Result<Vec<_>>>()
        };
        Ok(KeyPlan {
            fields: resolve(&spec.columns, "key")?,
            labels: resolve(&spec.label_columns, "label")?,
            values: resolve(&spec.value_columns, "value")?,
            normalize: spec.normalize,
            input: input.to_owned(),
        })
    }

    /// Computes the item for one data row (`row` is 1-based); `Ok(None)`
    /// means a key field is empty after normalisation and the row is skipped.
    pub(crate) fn key(&self, record: &ByteRecord, row: u64) -> Result<Option<Vec<u8>>> {
        let key = if let [(index, _)] = self.fields[..] {
            let mut key = Vec::new();
            self.normalize_field(record, row, 0, index, &mut key)?;
            (!key.is_empty()).then_some(key)
        } else {
            self.composite_key(record, row)?
        };
        match key {
            Some(key) if key.len() > MAX_KEY_BYTES => Err(Error::KeyTooLong {
                input: self.input.clone(),
                row,
                len: key.len(),
            }),
            key => Ok(key),
        }
    }

    /// The length-prefixed encoding of a multi-column key.
    fn composite_key(&self, record: &ByteRecord, row: u64) -> Result<Option<Vec<u8>>> {
        let (mut key, mut scratch) = (Vec::new(), Vec::new());
        for i in 0..self.fields.len() {
            scratch.clear();
            self.normalize_field(record, row, i, self.fields[i].0, &mut scratch)?;
            if scratch.is_empty() {
                return Ok(None);
            }
            let len = u32::try_from(scratch.len()).map_err(|_| Error::FieldTooLong {
                input: self.input.clone(),
                row,
                column: self.fields[i].1.clone(),
            })?;
            key.extend_from_slice(&len.to_le_bytes());
            key.extend_from_slice(&scratch);
        }
        Ok(Some(key))
    }

    /// Normalises key field number `i` (at record position `index`) into `out`.
    fn normalize_field(
        &self,
        record: &ByteRecord,
        row: u64,
        i: usize,
        index: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let line = record.position().map_or(0, |p| p.line());
        let field = self.field(record, row, "key", index, &self.fields[i].1)?;
        self.normalize
            .apply_into(field, out)
            .map_err(|option| Error::InvalidUtf8 {
                input: self.input.clone(),
                row,
                line,
                column: self.fields[i].1.clone(),
                option,
            })
    }

    /// Whether the spec names label columns.
    pub(crate) fn has_labels(&self) -> bool {
        !self.labels.is_empty()
    }

    /// Replaces `out` with the row's label: its label fields, untouched, as
    /// one CSV record (empty when the spec has no label columns).
    pub(crate) fn label(&self, record: &ByteRecord, row: u64, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let fields = self
            .labels
            .iter()
            .map(|(index, name)| self.field(record, row, "label", *index, name))
            .collect::<Result<Vec<_>>>()?;
        encode_label(&fields, out);
        Ok(())
    }

    /// The value columns of one data row, parsed as unsigned integers
    /// (surrounding spaces ignored), appended to `out`.
    pub(crate) fn values(&self, record: &ByteRecord, row: u64, out: &mut Vec<u64>) -> Result<()> {
        for (index, name) in &self.values {
            let field = self.field(record, row, "value", *index, name)?;
            let value = std::str::from_utf8(field)
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .ok_or_else(|| Error::NotAValue {
                    input: self.input.clone(),
                    row,
                    column: name.clone(),
                    value: String::from_utf8_lossy(field).into_owned(),
                })?;
            out.push(value);
        }
        Ok(())
    }

    /// Field `index` of `record`, or an error naming the `role` column
    /// `name` when the row is too short.
    fn field<'r>(
        &self,
        record: &'r ByteRecord,
        row: u64,
        role: &'static str,
        index: usize,
        name: &str,
    ) -> Result<&'r [u8]> {
        record.get(index).ok_or_else(|| Error::ShortRow {
            input: self.input.clone(),
            row,
            line: record.position().map_or(0, |p| p.line()),
            fields: record.len(),
            role,
            column: name.to_owned(),
            needed: index + 1,
        })
    }
}

/// Finds the 0-based position of `column` (a `role` column: "key" or
/// "label", for messages) in this file.
pub(crate) fn column_index(
    column: &Column,
    role: &'static str,
    headers: Option<&ByteRecord>,
    input: &str,
) -> Result<usize> {
    let name = match column {
        Column::Index(i) => return Ok(*i),
        Column::Name(name) => name,
    };
    let headers = headers.ok_or_else(|| Error::NameWithoutHeader {
        input: input.to_owned(),
        role,
        column: name.clone(),
    })?;
    if headers.is_empty() {
        return Err(Error::EmptyInput {
            input: input.to_owned(),
        });
    }
    let mut hits = headers
        .iter()
        .enumerate()
        .filter(|(_, h)| h.trim_ascii() == name.as_bytes())
        .map(|(i, _)| i);
    match (hits.next(), hits.next()) {
        (Some(first), None) => Ok(first),
        (Some(first), Some(second)) => Err(Error::AmbiguousColumn {
            input: input.to_owned(),
            role,
            column: name.clone(),
            first,
            second,
        }),
        (None, _) => Err(Error::MissingColumn {
            input: input.to_owned(),
            role,
            column: name.clone(),
            available: describe_headers(headers),
        }),
    }
}

/// Lists header names with their indices, e.g. `"id" (#0), "email" (#1)`.
fn describe_headers(headers: &ByteRecord) -> String {
    headers
        .iter()
        .enumerate()
        .map(|(i, h)| format!("{:?} (#{i})", String::from_utf8_lossy(h)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_parse() {
        assert_eq!(
            Column::parse("email").ok(),
            Some(Column::Name("email".into()))
        );
        assert_eq!(Column::parse(" #2 ").ok(), Some(Column::Index(2)));
        assert_eq!(Column::parse("#id").ok(), Some(Column::Name("#id".into())));
        assert_eq!(Column::parse("#").ok(), Some(Column::Name("#".into())));
        assert!(Column::parse("  ").is_err());
        assert!(Column::parse("#99999999999999999999999").is_err());
        assert_eq!(
            Column::parse_list("first,#3").ok(),
            Some(vec![Column::Name("first".into()), Column::Index(3)])
        );
        assert!(Column::parse_list("a,,b").is_err());
    }

    #[test]
    fn key_format_ignores_names() {
        let a = KeySpec::new(vec![Column::Name("email".into())]);
        let b = KeySpec::new(vec![Column::Index(3)]);
        assert_eq!(a.key_format(), b.key_format());
        let mut c = a.clone();
        c.normalize.lower = true;
        assert_ne!(a.key_format(), c.key_format());
        assert_eq!(
            c.key_format(),
            "psikit-key-v1;columns=1;normalize=trim,lower"
        );
    }

    #[test]
    fn header_names_trimmed_and_duplicates_rejected() {
        let headers = ByteRecord::from(vec![" id", "email ", "id"]);
        let spec = KeySpec::new(vec![Column::Name("email".into())]);
        assert!(KeyPlan::resolve(&spec, Some(&headers), "f.csv").is_ok());
        let spec = KeySpec::new(vec![Column::Name("id".into())]);
        let err = KeyPlan::resolve(&spec, Some(&headers), "f.csv").expect_err("ambiguous");
        assert!(matches!(
            err,
            Error::AmbiguousColumn {
                first: 0,
                second: 2,
                ..
            }
        ));
    }

    #[test]
    fn no_columns_is_an_error() {
        let spec = KeySpec::new(vec![]);
        assert!(matches!(
            KeyPlan::resolve(&spec, None, "f.csv"),
            Err(Error::NoColumns)
        ));
    }
}
