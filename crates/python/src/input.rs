//! Where a call's items come from, read with the CLI's key encoding.
//!
//! A [`Source`] is either a CSV file (read exactly as the CLI reads it:
//! the same [`KeySpec`] from `key`, `normalize`, header and delimiter) or
//! rows of fields handed over by Python (lists, data frames, Arrow tables).
//! Rows are written as an in-memory CSV with `io::encode_label` (a
//! canonical record per row) and read back through the same `io` reader,
//! so a key from a data frame is byte for byte the key the CLI computes
//! for the same cell in a CSV file: one code path, no second encoder.

use std::path::PathBuf;

use psikit_protocols::he_psi::facade;
use psikit_protocols::io::{encode_label, read_rows, read_rows_from, Column, KeySpec, Normalize};
use psikit_protocols::io::{matched_rows, ByteRecord, ReadStats, Table};
use psikit_protocols::io::{KeyReader, LabeledItem};
use psikit_protocols::{Error, NoProgress};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFloat, PyList, PyMemoryView, PyString};

use crate::errors::{self, IntoPy};

/// What a source holds.
enum Data {
    /// A CSV file, read with the source's spec.
    Csv(PathBuf),
    /// Rows from Python, as CSV bytes with a header `c0,c1,...` (so that a
    /// leading byte-order mark in a first value is never stripped) and one
    /// record per row, in order: data row `r` (1-based) is Python row `r - 1`.
    Rows(Vec<u8>),
}

/// Items for one call: where they are and how to turn them into keys.
#[pyclass(frozen, module = "psikit._native")]
pub struct Source {
    data: Data,
    spec: KeySpec,
}

/// The normalisation the CLI's `--normalize` would give.
fn normalize(option: &str) -> PyResult<Normalize> {
    Normalize::parse(option).map_err(Error::from).py_err()
}

/// Appends `value` to `out` as the bytes a CSV file would hold for it
/// (the rules of `Source.columns`; `strict` names the cells in the error
/// when only `str` and `bytes` are allowed).
fn cell(value: &Bound<'_, PyAny>, strict: Option<&str>, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(b) = value.cast::<PyBytes>() {
        out.extend_from_slice(b.as_bytes());
        return Ok(());
    }
    if let Ok(s) = value.cast::<PyString>() {
        out.extend_from_slice(s.to_cow()?.as_bytes());
        return Ok(());
    }
    if let Some(what) = strict {
        let kind = value.get_type().name()?;
        return Err(errors::input(format!(
            "{what} must be str or bytes, got {kind}"
        )));
    }
    if value.is_none() || is_missing(value) {
        return Ok(());
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        out.extend_from_slice(&b.to_vec());
        return Ok(());
    }
    if value.cast::<PyMemoryView>().is_ok() {
        let bytes = value.call_method0("tobytes")?;
        out.extend_from_slice(bytes.cast::<PyBytes>()?.as_bytes());
        return Ok(());
    }
    out.extend_from_slice(value.str()?.to_cow()?.as_bytes());
    Ok(())
}

/// Whether a cell is a missing value: NaN (`float`, numpy), pandas' `NA`
/// and `NaT`, anything unequal to itself.
fn is_missing(value: &Bound<'_, PyAny>) -> bool {
    if let Ok(f) = value.cast::<PyFloat>() {
        return f.value().is_nan();
    }
    // `NA != NA` is `NA`, whose truth value raises: its type says it.
    if value.ne(value).unwrap_or(false) {
        return true;
    }
    value
        .get_type()
        .name()
        .is_ok_and(|n| n == "NAType" || n == "NaTType")
}

#[pymethods]
impl Source {
    /// A CSV file read as the CLI reads it: key columns by header name or
    /// `#N`, label columns likewise (server databases only).
    #[staticmethod]
    #[pyo3(signature = (path, key, normalize, has_header=true, delimiter=",", label=Vec::new()))]
    pub fn csv(
        path: PathBuf,
        key: Vec<String>,
        normalize: &str,
        has_header: bool,
        delimiter: &str,
        label: Vec<String>,
    ) -> PyResult<Source> {
        let parse = |cols: &[String]| {
            cols.iter()
                .map(|c| Column::parse(c))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Error::from)
                .py_err()
        };
        let mut spec = KeySpec::new(parse(&key)?);
        if spec.columns.is_empty() {
            return Err(Error::from(psikit_protocols::io::Error::NoColumns)).py_err();
        }
        spec.normalize = self::normalize(normalize)?;
        spec.has_headers = has_header;
        spec.delimiter = match delimiter {
            "tab" | "\\t" | "\t" => b'\t',
            d if d.len() == 1 => d.as_bytes()[0],
            d => {
                return Err(errors::input(format!(
                    "delimiter must be one byte, got {d:?}"
                )))
            }
        };
        spec.label_columns = parse(&label)?;
        Ok(Source {
            data: Data::Csv(path),
            spec,
        })
    }

    /// Columns of cells (Python lists of equal length), the first
    /// `key_columns` forming the key and the next `label_columns` the label.
    /// Cells become the bytes a CSV file would hold (`str` as UTF-8,
    /// `bytes` as they are, `None` and NaN-likes empty, anything else
    /// through `str()`), or, with `strict` naming what the cells are, must
    /// be `str` or `bytes`. Converted here rather than cell by cell in
    /// Python: about ten times faster for lists and tables of 2^20 rows.
    #[staticmethod]
    #[pyo3(signature = (columns, key_columns, normalize, label_columns=0, strict=None,
        label_names=Vec::new()))]
    fn columns(
        columns: Vec<Bound<'_, PyList>>,
        key_columns: usize,
        normalize: &str,
        label_columns: usize,
        strict: Option<&str>,
        label_names: Vec<String>,
    ) -> PyResult<Source> {
        if key_columns == 0 {
            return Err(Error::from(psikit_protocols::io::Error::NoColumns)).py_err();
        }
        let width = key_columns + label_columns;
        if columns.len() != width {
            return Err(errors::input(format!(
                "{} columns given where {width} were expected",
                columns.len()
            )));
        }
        let rows = columns.first().map_or(0, |c| c.len());
        if columns.iter().any(|c| c.len() != rows) {
            return Err(errors::input(
                "every column must have as many cells as the first",
            ));
        }
        let mut spec = KeySpec::new((0..key_columns).map(Column::Index).collect());
        spec.normalize = self::normalize(normalize)?;
        let mut header: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
        spec.label_columns = (key_columns..width).map(Column::Index).collect();
        // The table's label column names, in the header and the spec, so
        // that a database built from it publishes them
        // (`KeySpec::label_names`); by position where they could not be
        // told apart.
        let names: Vec<&str> = label_names.iter().map(|n| n.trim()).collect();
        let distinct = (names.iter().enumerate()).all(|(i, n)| {
            !names[..i].contains(n) && !header[..key_columns].iter().any(|h| h.as_str() == *n)
        });
        if names.len() == label_columns && distinct {
            header.truncate(key_columns);
            header.extend(names.iter().map(|n| n.to_string()));
            spec.label_columns = names.iter().map(|n| Column::Name(n.to_string())).collect();
        }
        let mut csv = Vec::new();
        encode_label(&header, &mut csv);
        csv.push(b'\n');
        // One row's fields, back to back, and where each ends.
        let (mut fields, mut ends) = (Vec::new(), Vec::with_capacity(width));
        for row in 0..rows {
            fields.clear();
            ends.clear();
            for column in &columns {
                cell(&column.get_item(row)?, strict, &mut fields)?;
                ends.push(fields.len());
            }
            let starts = std::iter::once(0).chain(ends.iter().copied());
            let row: Vec<&[u8]> = starts.zip(&ends).map(|(a, &b)| &fields[a..b]).collect();
            encode_label(&row, &mut csv);
            csv.push(b'\n');
        }
        Ok(Source {
            data: Data::Rows(csv),
            spec,
        })
    }

    /// `psikit-key-v1;columns=N;normalize=...`: what both parties must
    /// share for their keys to match (compared by the two-party hello).
    #[getter]
    fn key_format(&self) -> String {
        self.spec.key_format()
    }

    fn __repr__(&self) -> String {
        match &self.data {
            Data::Csv(p) => format!("Source.csv({:?}, {})", p.display(), self.spec.key_format()),
            Data::Rows(_) => format!("Source.columns({})", self.spec.key_format()),
        }
    }
}

/// A source's rows, ready for a client or a party: the table, its
/// distinct keys and, per key, the table rows carrying it (as the CLI).
pub struct Loaded {
    pub table: Table,
    pub keys: Vec<Vec<u8>>,
    pub rows_of_key: Vec<Vec<usize>>,
}

impl Source {
    pub fn spec(&self) -> &KeySpec {
        &self.spec
    }

    /// The one spec an update's additions and removals are read with (the
    /// facades take one): theirs, when they select and encode keys alike.
    pub fn update_spec(add: Option<&Source>, remove: Option<&Source>) -> PyResult<KeySpec> {
        match (add, remove) {
            (Some(a), Some(r)) => {
                let (x, y) = (&a.spec, &r.spec);
                if x.columns != y.columns
                    || x.normalize != y.normalize
                    || x.has_headers != y.has_headers
                    || x.delimiter != y.delimiter
                {
                    return Err(errors::input(
                        "add and remove must select and normalise their keys alike: give both as \
                         CSV paths with the same key columns, or both as in-memory data, with the \
                         same normalize",
                    ));
                }
                Ok(x.clone())
            }
            (Some(s), None) | (None, Some(s)) => Ok(s.spec.clone()),
            (None, None) => Err(errors::input("nothing to do: give add= and/or remove=")),
        }
    }

    pub fn is_csv(&self) -> bool {
        matches!(self.data, Data::Csv(_))
    }

    /// How messages name the source: the CSV path, or `<input>` (as `io`
    /// names rows handed over from Python).
    pub fn input_name(&self) -> String {
        match &self.data {
            Data::Csv(path) => path.display().to_string(),
            Data::Rows(_) => "<input>".to_owned(),
        }
    }

    /// The value columns `names` in this source's file: as named (or
    /// numbered) in a CSV file; in rows from Python, the carried columns.
    pub fn value_columns(&self, names: &[String]) -> Result<Vec<Column>, Error> {
        match &self.data {
            Data::Csv(_) => names.iter().map(|n| Ok(Column::parse(n)?)).collect(),
            Data::Rows(_) if self.spec.label_columns.len() == names.len() => {
                Ok(self.spec.label_columns.clone())
            }
            Data::Rows(_) => Err(Error::Config(format!(
                "{} value columns named for {} carried",
                names.len(),
                self.spec.label_columns.len()
            ))),
        }
    }

    /// The positions of the value columns `names` in `table`.
    pub fn value_positions(&self, table: &Table, names: &[String]) -> Result<Vec<usize>, Error> {
        let input = self.input_name();
        self.value_columns(names)?
            .iter()
            .map(|c| Ok(table.column_position(c, "value", &input)?))
            .collect()
    }

    /// Reads every row (the client side).
    pub fn load(&self) -> Result<Loaded, Error> {
        let table = match &self.data {
            Data::Csv(path) => read_rows(path, &self.spec)?,
            Data::Rows(csv) => read_rows_from(&csv[..], &self.spec)?,
        };
        let (keys, rows_of_key) = table.unique_keys();
        Ok(Loaded {
            table,
            keys,
            rows_of_key,
        })
    }

    /// Every row's key and label, read as a server's build reads them
    /// (rows with an empty key skipped).
    pub fn labeled_items(&self) -> Result<Vec<LabeledItem>, Error> {
        let items = match &self.data {
            Data::Csv(path) => facade::read_labeled(path, &self.spec, &NoProgress)?,
            Data::Rows(csv) => {
                facade::collect_labeled(KeyReader::from_reader(&csv[..], &self.spec)?, &NoProgress)?
            }
        };
        Ok(items.0)
    }

    /// A file holding the source (the server side, whose facades stream
    /// from a path): the CSV itself, or the rows written to a temporary
    /// file kept alive by the returned guard.
    pub fn file(&self) -> Result<(PathBuf, Option<tempfile::TempDir>), Error> {
        match &self.data {
            Data::Csv(path) => Ok((path.clone(), None)),
            Data::Rows(csv) => {
                let dir = tempfile::tempdir().map_err(|e| Error::Io {
                    path: std::env::temp_dir(),
                    source: e,
                })?;
                let path = dir.path().join("rows.csv");
                std::fs::write(&path, csv).map_err(|e| Error::Io {
                    path: path.clone(),
                    source: e,
                })?;
                Ok((path, Some(dir)))
            }
        }
    }
}

/// The fields of a CSV source's matched rows, packed into one buffer, for
/// Python to turn into dicts one row at a time when they are read
/// (`psikit.Rows`): 2^19 matched rows would otherwise become 2^19 dicts
/// before the call returns.
#[pyclass(frozen, module = "psikit._native")]
#[derive(Clone, Default)]
pub struct MatchedFields {
    bytes: Vec<u8>,
    /// The end in `bytes` of each field.
    field_ends: Vec<usize>,
    /// The end in `field_ends` of each row.
    row_ends: Vec<usize>,
}

impl MatchedFields {
    fn push(&mut self, record: &ByteRecord) {
        for field in record {
            self.bytes.extend_from_slice(field);
            self.field_ends.push(self.bytes.len());
        }
        self.row_ends.push(self.field_ends.len());
    }
}

/// The header and fields of the data rows of the file at `path` whose
/// 1-based numbers are `rows` (sorted): a job's matched rows, streamed
/// from its input (memory: those rows).
pub fn selected_fields(
    path: &std::path::Path,
    spec: &KeySpec,
    rows: &[u64],
) -> Result<(Option<Vec<String>>, MatchedFields), Error> {
    let mut selected = psikit_protocols::io::SelectedRows::open(path, spec)?;
    let headers = selected.headers().map(|h| h.iter().map(text).collect());
    let mut fields = MatchedFields::default();
    let (mut record, mut at) = (ByteRecord::new(), 0);
    let mut keep = |row: u64| {
        let hit = rows.get(at) == Some(&row);
        at += usize::from(hit);
        hit
    };
    while selected.next(&mut keep, &mut record)? {
        fields.push(&record);
    }
    Ok((headers, fields))
}

#[pymethods]
impl MatchedFields {
    fn __len__(&self) -> usize {
        self.row_ends.len()
    }

    /// The fields of matched row `i` (0-based, in input order), as text.
    fn row(&self, i: usize) -> PyResult<Vec<String>> {
        let end = *self
            .row_ends
            .get(i)
            .ok_or_else(|| PyIndexError::new_err("row index out of range"))?;
        let start = i.checked_sub(1).map_or(0, |p| self.row_ends[p]);
        Ok((start..end)
            .map(|f| {
                let from = f.checked_sub(1).map_or(0, |p| self.field_ends[p]);
                text(&self.bytes[from..self.field_ends[f]])
            })
            .collect())
    }
}

/// A client's result, by column: the CSV header (CSV sources with one),
/// the matched rows' positions in input order, their extra values (labels)
/// and, for CSV sources, their fields; and counts.
#[derive(Clone)]
pub struct Output {
    pub headers: Option<Vec<String>>,
    /// The 0-based data row (Python: the input position) of each matched
    /// row, in input order.
    pub positions: Vec<i64>,
    /// Per extra (label) column, its value at each matched row.
    pub labels: Vec<Vec<String>>,
    pub fields: Option<MatchedFields>,
    pub distinct: usize,
    pub matched: usize,
    pub stats: ReadStats,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Loaded {
    /// The rows whose key `k` has `extras[k] = Some(values)`, in input
    /// order, each with its values (`io::matched_rows`, as the CLI's match
    /// file).
    pub fn output(&self, extras: &[Option<Vec<Vec<u8>>>], with_fields: bool) -> Output {
        let selected = matched_rows(&self.rows_of_key, extras);
        let width = selected.iter().map(|(_, e)| e.len()).max().unwrap_or(0);
        let mut labels = vec![Vec::with_capacity(selected.len()); width];
        let mut positions = Vec::with_capacity(selected.len());
        let mut fields = with_fields.then(MatchedFields::default);
        for (r, extra) in selected {
            let row = &self.table.rows[r];
            positions.push(i64::try_from(row.row.saturating_sub(1)).unwrap_or(i64::MAX));
            for (j, column) in labels.iter_mut().enumerate() {
                column.push(extra.get(j).map_or_else(String::new, |v| text(v)));
            }
            if let Some(fields) = &mut fields {
                fields.push(&row.record);
            }
        }
        Output {
            headers: self
                .table
                .headers
                .as_ref()
                .filter(|_| with_fields)
                .map(|h| h.iter().map(text).collect()),
            positions,
            labels,
            fields,
            distinct: self.keys.len(),
            matched: extras.iter().filter(|e| e.is_some()).count(),
            stats: self.table.stats,
        }
    }

    /// [`Loaded::output`] for a plain match/no-match per key.
    pub fn output_matches(&self, matches: &[bool], with_fields: bool) -> Output {
        let extras: Vec<_> = matches.iter().map(|&m| m.then(Vec::new)).collect();
        self.output(&extras, with_fields)
    }
}

impl Output {
    /// `{"headers", "positions", "labels", "fields", "distinct", "matched",
    /// "rows_read", "rows_skipped"}`: `positions` as the bytes of native
    /// `int64`s (one buffer, for `memoryview.cast("q")`, numpy or Arrow),
    /// `labels` as one list per label column, `fields` a
    /// [`MatchedFields`] (CSV sources) or `None`.
    pub fn into_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("headers", self.headers)?;
        let positions = PyBytes::new_with(py, self.positions.len() * 8, |buf| {
            for (out, p) in buf.chunks_exact_mut(8).zip(&self.positions) {
                out.copy_from_slice(&p.to_ne_bytes());
            }
            Ok(())
        })?;
        d.set_item("positions", positions)?;
        d.set_item("labels", self.labels)?;
        d.set_item("fields", self.fields.map(|f| Py::new(py, f)).transpose()?)?;
        d.set_item("distinct", self.distinct)?;
        d.set_item("matched", self.matched)?;
        d.set_item("rows_read", self.stats.rows_read)?;
        d.set_item("rows_skipped", self.stats.rows_skipped)?;
        Ok(d)
    }
}

/// The keys a source gives, in row order (`None` for a skipped row), as
/// the CLI would compute them: for checking that a Python table and a CSV
/// file agree, and for callers carrying keys to their own protocol runs.
#[pyfunction]
pub fn encode_keys<'py>(
    py: Python<'py>,
    source: &Source,
) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
    let table = py
        .detach(|| match &source.data {
            Data::Csv(path) => read_rows(path, &source.spec),
            Data::Rows(csv) => read_rows_from(&csv[..], &source.spec),
        })
        .map_err(Error::from)
        .py_err()?;
    let mut out = vec![None; table.stats.rows_read as usize];
    for row in table.rows {
        if let Some(slot) = usize::try_from(row.row - 1)
            .ok()
            .and_then(|i| out.get_mut(i))
        {
            *slot = Some(row.key);
        }
    }
    Ok(out
        .into_iter()
        .map(|k| k.map(|k| PyBytes::new(py, &k)))
        .collect())
}
