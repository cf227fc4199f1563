//! A contact list read into set items, byte for byte as the CLI reads a
//! file: the same CSV reader, key columns, normalisation and key encoding
//! (`psikit_io`), so a page and a `psikit filter query` of the same list
//! ask the server for the same items.

use psikit_protocols::io::{ByteRecord, Column, KeyReader, KeySpec, Normalize, RowBatch};
use wasm_bindgen::prelude::*;

/// Rows keyed per batch.
const BATCH_ROWS: usize = 4096;

/// The items of a contact list, with each one's row as it was read (to
/// show the matches).
#[wasm_bindgen]
pub struct Items {
    keys: Vec<Vec<u8>>,
    shown: Vec<String>,
    skipped: u64,
    key_format: String,
}

#[wasm_bindgen]
impl Items {
    /// Reads CSV `text` as `psikit filter query --key COLUMNS --normalize
    /// NORMALIZE` reads a file (`header`: the first row names the columns;
    /// otherwise select them as `#0`, `#1`, ...). Rows whose key is empty
    /// after normalisation are skipped and counted.
    #[wasm_bindgen(js_name = fromCsv)]
    pub fn from_csv(
        text: &[u8],
        columns: &str,
        normalize: &str,
        header: bool,
    ) -> Result<Items, JsError> {
        let mut spec = KeySpec::new(Column::parse_list(columns)?);
        spec.normalize = Normalize::parse(normalize)?;
        spec.has_headers = header;
        let mut reader = KeyReader::from_reader(text, &spec)?;
        let keyer = reader.keyer();
        let mut items = Items::empty(&spec);
        let mut batch = RowBatch::new();
        while reader.next_rows(BATCH_ROWS, &mut batch)? > 0 {
            for (row, record) in (batch.first_row()..).zip(batch.records()) {
                items.add(keyer.key(row, record)?, || shown(record));
            }
        }
        Ok(items)
    }

    /// Reads one contact per line (no CSV quoting or columns: a line is
    /// the key field as it is), normalised as `--normalize NORMALIZE`
    /// would; the same items as a one-column headerless CSV of simple
    /// values. Empty lines are skipped and counted.
    #[wasm_bindgen(js_name = fromLines)]
    pub fn from_lines(text: &str, normalize: &str) -> Result<Items, JsError> {
        let mut spec = KeySpec::new(vec![Column::Index(0)]);
        spec.normalize = Normalize::parse(normalize)?;
        spec.has_headers = false;
        let keyer = KeyReader::from_reader(&b""[..], &spec)?.keyer();
        let mut items = Items::empty(&spec);
        for (row, line) in (1..).zip(text.lines()) {
            let record = ByteRecord::from(vec![line]);
            items.add(keyer.key(row, &record)?, || line.to_owned());
        }
        Ok(items)
    }

    /// How many items (rows with a key).
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.keys.len()
    }

    /// Rows skipped for an empty key.
    #[wasm_bindgen(getter)]
    pub fn skipped(&self) -> f64 {
        self.skipped as f64
    }

    /// Item `i`'s row as read (its fields joined by `, `), for display.
    pub fn shown(&self, i: usize) -> Option<String> {
        self.shown.get(i).cloned()
    }

    /// Item `i`'s bytes as the OPRF takes them (normalised and encoded).
    pub fn key(&self, i: usize) -> Option<Vec<u8>> {
        self.keys.get(i).cloned()
    }

    /// What the server compares with its own key encoding before a query.
    #[wasm_bindgen(getter, js_name = keyFormat)]
    pub fn key_format(&self) -> String {
        self.key_format.clone()
    }
}

impl Items {
    fn empty(spec: &KeySpec) -> Self {
        Items {
            keys: Vec::new(),
            shown: Vec::new(),
            skipped: 0,
            key_format: spec.key_format(),
        }
    }

    fn add(&mut self, key: Option<Vec<u8>>, shown: impl FnOnce() -> String) {
        match key {
            Some(key) => {
                self.keys.push(key);
                self.shown.push(shown());
            }
            None => self.skipped += 1,
        }
    }

    pub(crate) fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }
}

/// A CSV row for display.
fn shown(record: &ByteRecord) -> String {
    let fields: Vec<_> = record.iter().map(String::from_utf8_lossy).collect();
    fields.join(", ")
}
