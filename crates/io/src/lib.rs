//! CSV input of set items and CSV output of matches for psikit.
//!
//! Every PSI protocol in psikit works on *items*: byte strings that two
//! parties compare for equality without revealing the rest of their sets.
//! This crate turns CSV rows into items and writes the matched rows back out.
//!
//! * [`KeySpec`] says which column(s) form the key ([`Column`]: header name
//!   or `#index`), how to normalise them ([`Normalize`]), whether the file has
//!   a header, and its delimiter.
//! * [`KeyReader`] streams items in batches from arbitrarily large files
//!   (the server side); memory is proportional to the batch.
//! * [`KeyReader::next_labeled_batch`] also returns each row's label: the
//!   [`KeySpec::label_columns`] as one CSV record ([`encode_label`]), which
//!   [`decode_label`] splits back into columns on the client.
//! * [`read_rows`] loads a small file into a [`Table`] that keeps each
//!   row's original fields (the client side), and [`MatchWriter`] writes the
//!   matched rows, optionally with extra columns such as a label.
//! * [`write_overlapping_pair`] and friends generate deterministic synthetic
//!   files with a known intersection for demos and benchmarks.
//!
//! # Item encoding
//!
//! With one key column the item is that column's normalised bytes. With
//! several, each normalised field is prefixed by its byte length as a
//! little-endian `u32` and the results are concatenated in column order, so
//! `("a,b", "c")` and `("a", "b,c")` are different items. A row is skipped
//! (and counted in [`ReadStats`]) when any key field is empty after
//! normalisation. Both parties must use the same number of key columns, in
//! the same order, with the same normalisation; compare
//! [`KeySpec::key_format`] to check.
//!
//! # Privacy
//!
//! Nothing in this crate prints or logs field values, and error messages
//! name files, rows and columns but never the data in them.

mod error;
mod label;
mod limits;
mod normalize;
mod reader;
mod records;
mod spec;
mod synth;
mod table;
mod writer;

pub use csv::ByteRecord;

pub use error::{Error, Result};
pub use label::{decode_label, default_label_name, encode_label};
pub use limits::{MAX_KEY_BYTES, MAX_KEY_FORMAT, MAX_LABEL_COLUMNS, MAX_LABEL_NAME};
pub use normalize::Normalize;
pub use reader::{Item, KeyReader, LabeledItem, ReadStats, RowBatch, RowKeyer};
pub use records::is_parquet;
pub use spec::{Column, KeySpec};
pub use synth::{
    overlap_plan, synthetic_row, write_overlapping_pair, write_synthetic_csv, OverlapPlan,
    SyntheticRow,
};
pub use table::{matched_rows, read_rows, read_rows_from, Table, TableRow};
pub use writer::{write_selected_parts, write_selected_rows, MatchWriter, SelectedRows};
