//! End-to-end tests of reading keys from CSV and writing matches.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use psikit_io::{
    decode_label, encode_label, read_rows, read_rows_from, synthetic_row, write_overlapping_pair,
    ByteRecord, Column, Error, Item, KeyReader, KeySpec, LabeledItem, MatchWriter, Normalize,
    RowBatch,
};

/// Writes `contents` to a fresh file in `dir`.
fn file(dir: &tempfile::TempDir, name: &str, contents: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("write test file");
    path
}

fn spec(columns: &str) -> KeySpec {
    KeySpec::new(Column::parse_list(columns).expect("valid columns"))
}

/// Reads every item of `path` with batches of `batch` items.
fn all_items(path: &Path, spec: &KeySpec, batch: usize) -> (Vec<Item>, psikit_io::ReadStats) {
    let mut reader = KeyReader::open(path, spec).expect("open");
    let mut items = Vec::new();
    let mut buf = Vec::new();
    while reader.next_batch(batch, &mut buf).expect("batch") > 0 {
        assert!(buf.len() <= batch.max(1));
        items.append(&mut buf);
    }
    (items, reader.stats())
}

fn keys(items: &[Item]) -> Vec<&[u8]> {
    items.iter().map(|i| i.key.as_slice()).collect()
}

/// Splits a composite key back into its length-prefixed fields.
fn decode_composite(mut key: &[u8]) -> Vec<Vec<u8>> {
    let mut fields = Vec::new();
    while !key.is_empty() {
        let (len, rest) = key.split_at(4);
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        fields.push(rest[..len].to_vec());
        key = &rest[len..];
    }
    fields
}

const PEOPLE: &str = "id,email,name\n1, Alice@Example.com ,Alice\n2,bob@example.com,Bob\n";

#[test]
fn column_by_name_and_by_index_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(&dir, "p.csv", PEOPLE.as_bytes());
    let (by_name, _) = all_items(&path, &spec("email"), 10);
    let (by_index, _) = all_items(&path, &spec("#1"), 10);
    assert_eq!(
        keys(&by_name),
        vec![&b"Alice@Example.com"[..], b"bob@example.com"]
    );
    assert_eq!(by_name, by_index);
    assert_eq!(by_name[1].row, 2, "rows are 1-based data rows");
}

#[test]
fn composite_key_layout_is_length_prefixed() {
    let data = "a,b,c\n\"x,y\",z,1\n";
    let table = read_rows_from(data.as_bytes(), &spec("a,b")).expect("read");
    let key = &table.rows[0].key;
    let mut expected = 3u32.to_le_bytes().to_vec();
    expected.extend_from_slice(b"x,y");
    expected.extend_from_slice(&1u32.to_le_bytes());
    expected.extend_from_slice(b"z");
    assert_eq!(key, &expected);
}

#[test]
fn composite_keys_split_differently_differ() {
    let data = "a,b\n\"a,b\",c\na,\"b,c\"\n";
    let table = read_rows_from(data.as_bytes(), &spec("a,b")).expect("read");
    assert_eq!(table.rows.len(), 2);
    assert_ne!(table.rows[0].key, table.rows[1].key);
}

/// Builds a CSV of two-column rows as the csv crate would quote them.
fn csv_of(rows: &[(String, String)]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["a", "b"]).expect("header");
    for (a, b) in rows {
        w.write_record([a, b]).expect("row");
    }
    w.into_inner().expect("flush")
}

proptest! {
    #[test]
    fn composite_keys_are_injective(
        rows in proptest::collection::vec(("[a-c, \"\n]{1,4}", "[a-c, \"\n]{1,4}"), 1..20)
    ) {
        let mut s = spec("a,b");
        s.normalize = Normalize::NONE;
        let table = read_rows_from(&csv_of(&rows)[..], &s).expect("read");
        prop_assert_eq!(table.rows.len(), rows.len());
        for (i, x) in table.rows.iter().enumerate() {
            let fields = vec![rows[i].0.as_bytes().to_vec(), rows[i].1.as_bytes().to_vec()];
            prop_assert_eq!(decode_composite(&x.key), fields);
            for (j, y) in table.rows.iter().enumerate() {
                prop_assert_eq!(x.key == y.key, rows[i] == rows[j]);
            }
        }
    }
}

#[test]
fn normalisation_options_apply_to_files() {
    let data = "phone,name\n\"+1 (555) 010-9999\",\"  Jean   Luc \"\n";
    let mut s = spec("phone");
    s.normalize = Normalize::parse("digits").expect("valid");
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.rows[0].key, b"15550109999");
    let mut s = spec("name");
    s.normalize = Normalize::parse("trim,collapse,lower").expect("valid");
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.rows[0].key, b"jean luc");
    s.normalize = Normalize::default();
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.rows[0].key, b"Jean   Luc");
}

#[test]
fn unicode_lower_trim_and_nfc() {
    let data = "email\nÉMILE@Example.com \n\u{e9}mile@example.com\ne\u{301}mile@example.com\n";
    let mut s = spec("email");
    s.normalize = Normalize::parse("trim,lower").expect("valid");
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.rows[0].key, "émile@example.com".as_bytes());
    assert_eq!(t.rows[0].key, t.rows[1].key);
    assert_ne!(t.rows[1].key, t.rows[2].key, "NFD differs without nfc");
    s.normalize = Normalize::parse("trim,lower,nfc").expect("valid");
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.rows[1].key, t.rows[2].key);
    assert_eq!(t.rows[0].key, t.rows[2].key);
}

#[test]
fn missing_column_lists_available_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(&dir, "p.csv", PEOPLE.as_bytes());
    let err = KeyReader::open(&path, &spec("mail"))
        .err()
        .expect("missing column");
    assert!(matches!(err, Error::MissingColumn { .. }));
    let msg = err.to_string();
    assert!(msg.contains("\"mail\""), "{msg}");
    assert!(msg.contains("p.csv"), "{msg}");
    assert!(
        msg.contains("\"id\" (#0), \"email\" (#1), \"name\" (#2)"),
        "{msg}"
    );
}

#[test]
fn open_missing_file_names_it() {
    let err = KeyReader::open("/nonexistent/x.csv", &spec("email"))
        .err()
        .expect("error");
    assert!(err.to_string().contains("/nonexistent/x.csv"), "{err}");
}

#[test]
fn empty_keys_are_skipped_and_counted() {
    let data = "email,n\na@x,1\n   ,2\n,3\nb@x,4\n";
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(&dir, "e.csv", data.as_bytes());
    let (items, stats) = all_items(&path, &spec("email"), 1);
    assert_eq!(keys(&items), vec![&b"a@x"[..], b"b@x"]);
    assert_eq!(items.iter().map(|i| i.row).collect::<Vec<_>>(), vec![1, 4]);
    assert_eq!(
        (stats.rows_read, stats.rows_skipped, stats.items()),
        (4, 2, 2)
    );
    let t = read_rows(&path, &spec("email")).expect("read");
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.stats, stats);
}

#[test]
fn composite_with_any_empty_field_is_skipped() {
    let data = "a,b\nx,y\nx,\n,y\n";
    let t = read_rows_from(data.as_bytes(), &spec("a,b")).expect("read");
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.stats.rows_skipped, 2);
}

#[test]
fn batches_cover_every_row_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut data = String::from("id,email\n");
    for i in 0..10_007 {
        data.push_str(&format!("{i},user{i}@example.com\n"));
    }
    let path = file(&dir, "big.csv", data.as_bytes());
    for batch in [1, 777, 10_007, 50_000] {
        let (items, stats) = all_items(&path, &spec("email"), batch);
        assert_eq!(items.len(), 10_007);
        assert_eq!(stats.rows_read, 10_007);
        let rows: Vec<u64> = items.iter().map(|i| i.row).collect();
        assert_eq!(rows, (1..=10_007).collect::<Vec<_>>());
        let distinct: HashSet<&[u8]> = keys(&items).into_iter().collect();
        assert_eq!(distinct.len(), 10_007);
    }
}

#[test]
fn next_batch_after_end_keeps_returning_zero() {
    let mut reader = KeyReader::from_reader(PEOPLE.as_bytes(), &spec("email")).expect("open");
    let mut buf = Vec::new();
    assert_eq!(
        reader.next_batch(0, &mut buf).expect("batch"),
        1,
        "0 acts as 1"
    );
    assert_eq!(reader.next_batch(10, &mut buf).expect("batch"), 1);
    assert_eq!(reader.next_batch(10, &mut buf).expect("batch"), 0);
    assert!(buf.is_empty());
    assert_eq!(reader.next_batch(10, &mut buf).expect("batch"), 0);
}

#[test]
fn headerless_files_use_indices() {
    let data = "a@x,1\nb@x,2\n";
    let mut s = spec("#0");
    s.has_headers = false;
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.headers, None);
    assert_eq!(t.keys().collect::<Vec<_>>(), vec![&b"a@x"[..], b"b@x"]);
    let mut s = spec("email");
    s.has_headers = false;
    let err = read_rows_from(data.as_bytes(), &s).expect_err("name needs header");
    assert!(matches!(err, Error::NameWithoutHeader { .. }), "{err}");
}

#[test]
fn empty_file_with_header_expected() {
    let err = read_rows_from(&b""[..], &spec("email")).expect_err("empty");
    assert!(matches!(err, Error::EmptyInput { .. }), "{err}");
    let t = read_rows_from(&b""[..], &spec("#0")).expect("index on empty file is fine");
    assert!(t.rows.is_empty());
}

#[test]
fn bom_tab_delimiter_and_ragged_rows() {
    let data = "\u{feff}email\tnote\na@x\nb@x\tlong\textra\n";
    let mut s = spec("email");
    s.delimiter = b'\t';
    let t = read_rows_from(data.as_bytes(), &s).expect("read");
    assert_eq!(t.keys().collect::<Vec<_>>(), vec![&b"a@x"[..], b"b@x"]);
}

#[test]
fn short_row_missing_key_column_is_an_error() {
    let data = "id,email\n1,a@x\n2\n";
    let err = read_rows_from(data.as_bytes(), &spec("email")).expect_err("short row");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::ShortRow {
                row: 2,
                line: 3,
                fields: 1,
                needed: 2,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("\"email\""), "{msg}");
}

#[test]
fn invalid_utf8_with_lower_names_row() {
    let data = b"email\nok@x\ncaf\xe9@x\n";
    let mut s = spec("email");
    let t = read_rows_from(&data[..], &s).expect("trim works on raw bytes");
    assert_eq!(t.rows[1].key, b"caf\xe9@x");
    s.normalize = Normalize::parse("trim,lower").expect("valid");
    let err = read_rows_from(&data[..], &s).expect_err("needs utf-8");
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::InvalidUtf8 {
                row: 2,
                option: "lower",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("row 2") && msg.contains("UTF-8"), "{msg}");
    assert!(!msg.contains("caf"), "errors never echo data: {msg}");
}

#[test]
fn table_keys_match_streaming_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(&dir, "p.csv", PEOPLE.as_bytes());
    let mut s = spec("email,name");
    s.normalize = Normalize::parse("trim,lower,nfc").expect("valid");
    let (items, _) = all_items(&path, &s, 1);
    let table = read_rows(&path, &s).expect("read");
    assert_eq!(keys(&items), table.keys().collect::<Vec<_>>());
    assert_eq!(
        table.rows[0].record.get(1),
        Some(&b" Alice@Example.com "[..])
    );
}

#[test]
fn match_output_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = "id,email,note\n1,a@x,\"has, comma\"\n2,b@x\n3,c@x,\"multi\nline\"\n";
    let s = spec("email");
    let table = read_rows_from(input.as_bytes(), &s).expect("read");
    let out = dir.path().join("matches.csv");
    let mut w = MatchWriter::create(&out, table.headers.as_ref(), &["label"]).expect("create");
    for row in &table.rows {
        w.write_row(&row.record, &[format!("L{}", row.row)])
            .expect("write");
    }
    w.finish().expect("finish");

    let back = read_rows(&out, &s).expect("read back");
    let header = back.headers.expect("header");
    assert_eq!(
        header,
        ByteRecord::from(vec!["id", "email", "note", "label"])
    );
    assert_eq!(back.rows.len(), 3);
    for (orig, got) in table.rows.iter().zip(&back.rows) {
        assert_eq!(orig.key, got.key);
        assert_eq!(&got.record[0], &orig.record[0]);
    }
    assert_eq!(&back.rows[0].record[2], b"has, comma");
    assert_eq!(&back.rows[1].record[2], b"", "short row padded");
    assert_eq!(&back.rows[1].record[3], b"L2", "extras stay aligned");
    assert_eq!(&back.rows[2].record[2], b"multi\nline");
}

#[test]
fn match_writer_headerless_and_extra_count() {
    let rec = ByteRecord::from(vec!["a@x", "1"]);
    let mut w = MatchWriter::from_writer(Vec::new(), None, &[]).expect("create");
    w.write_row::<&str>(&rec, &[]).expect("write");
    let err = w.write_row(&rec, &["unexpected"]).expect_err("count");
    assert!(matches!(
        err,
        Error::ExtraCount {
            expected: 0,
            got: 1
        }
    ));
    assert_eq!(w.finish().expect("finish"), b"a@x,1\n");
}

#[test]
fn synthetic_pair_has_exact_overlap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, client) = (dir.path().join("s.csv"), dir.path().join("c.csv"));
    let plan = write_overlapping_pair(&server, &client, 1 << 16, 1024, 100, 42).expect("write");
    assert_eq!(plan.common_ids.len(), 100);
    assert_eq!(plan.client_ids.len(), 1024);

    let mut s = spec("email");
    s.normalize = Normalize::parse("trim,lower,nfc").expect("valid");
    let (server_items, stats) = all_items(&server, &s, 4096);
    assert_eq!(stats.rows_read, 1 << 16);
    let server_keys: HashSet<Vec<u8>> = server_items.into_iter().map(|i| i.key).collect();
    assert_eq!(server_keys.len(), 1 << 16, "emails are unique");

    let table = read_rows(&client, &s).expect("client");
    assert_eq!(table.rows.len(), 1024);
    let ids: HashMap<Vec<u8>, u64> = table
        .rows
        .iter()
        .map(|r| (r.key.clone(), parse_id(&r.record[0])))
        .collect();
    let mut found: Vec<u64> = ids
        .iter()
        .filter(|(k, _)| server_keys.contains(*k))
        .map(|(_, &id)| id)
        .collect();
    found.sort_unstable();
    assert_eq!(found, plan.common_ids);
    let first = synthetic_row(42, plan.common_ids[0]);
    assert!(server_keys.contains(first.email.to_lowercase().as_bytes()));
}

#[test]
fn synthetic_overlap_edge_cases() {
    assert!(psikit_io::overlap_plan(10, 5, 6, 1).is_err());
    assert!(psikit_io::overlap_plan(3, 5, 4, 1).is_err());
    let full = psikit_io::overlap_plan(5, 5, 5, 1).expect("plan");
    assert_eq!(full.common_ids, vec![0, 1, 2, 3, 4]);
    let none = psikit_io::overlap_plan(5, 3, 0, 1).expect("plan");
    assert!(none.common_ids.is_empty());
    assert!(none.client_ids.iter().all(|&id| id >= 5));
    let again = || psikit_io::overlap_plan(100, 10, 4, 9).expect("plan");
    assert_eq!(again(), again());
}

fn parse_id(field: &[u8]) -> u64 {
    std::str::from_utf8(field)
        .expect("ascii id")
        .parse()
        .expect("number")
}

/// Every labeled item of a CSV given as text, in one batch.
fn labeled(data: &str, s: &KeySpec) -> psikit_io::Result<Vec<LabeledItem>> {
    let mut reader = KeyReader::from_reader(data.as_bytes(), s)?;
    let mut out = Vec::new();
    reader.next_labeled_batch(100, &mut out)?;
    Ok(out)
}

fn with_labels(key: &str, labels: &str) -> KeySpec {
    let mut s = spec(key);
    s.label_columns = Column::parse_list(labels).expect("valid columns");
    s
}

#[test]
fn label_columns_come_back_as_one_csv_record() {
    let data = "email,name,tier\n A@x ,\"Smith, Jo\",gold\nb@x, Bob ,\n,skipped,x\n";
    let mut s = with_labels("email", "name,#2");
    s.normalize = Normalize::parse("trim,lower").expect("valid");
    let items = labeled(data, &s).expect("read");
    assert_eq!(items.len(), 2, "rows with an empty key are skipped");
    assert_eq!(items[0].key, b"a@x");
    assert_eq!(items[0].label, b"\"Smith, Jo\",gold");
    assert_eq!(items[1].label, b" Bob ,", "labels are not normalised");
    assert_eq!(items[1].row, 2);
    let fields = decode_label(&items[0].label).expect("canonical");
    assert_eq!(fields, vec![b"Smith, Jo".to_vec(), b"gold".to_vec()]);
    // Keys are the same with or without labels.
    let (plain, _) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file(&dir, "l.csv", data.as_bytes());
        all_items(&path, &s, 10)
    };
    assert_eq!(
        keys(&plain),
        items.iter().map(|i| i.key.as_slice()).collect::<Vec<_>>()
    );
}

#[test]
fn no_label_columns_give_empty_labels() {
    let items = labeled(PEOPLE, &spec("email")).expect("read");
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i.label.is_empty()));
}

#[test]
fn label_column_errors_say_label() {
    let err = labeled(PEOPLE, &with_labels("email", "tier")).expect_err("missing");
    assert!(matches!(err, Error::MissingColumn { role: "label", .. }));
    assert!(err.to_string().contains("label column \"tier\""), "{err}");
    let err = labeled("email,name\na@x\n", &with_labels("email", "name")).expect_err("short");
    assert!(
        matches!(
            err,
            Error::ShortRow {
                role: "label",
                row: 1,
                ..
            }
        ),
        "{err}"
    );
    let msg = labeled(PEOPLE, &spec("mail"))
        .expect_err("missing")
        .to_string();
    assert!(msg.contains("key column \"mail\""), "{msg}");
}

proptest! {
    #[test]
    fn labels_round_trip_through_files(
        rows in proptest::collection::vec(("[a-c]{1,3}", "[a-c, \"\n\r]{0,4}", "[a-c, \"\n]{0,4}"), 1..20)
    ) {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["k", "l1", "l2"]).expect("header");
        for (k, a, b) in &rows {
            w.write_record([k, a, b]).expect("row");
        }
        let data = w.into_inner().expect("flush");
        let mut s = with_labels("k", "l1,l2");
        s.normalize = Normalize::NONE;
        let mut reader = KeyReader::from_reader(&data[..], &s).expect("open");
        let mut items = Vec::new();
        reader.next_labeled_batch(100, &mut items).expect("read");
        prop_assert_eq!(items.len(), rows.len());
        for (item, (_, a, b)) in items.iter().zip(&rows) {
            let fields = decode_label(&item.label).expect("canonical");
            prop_assert_eq!(fields, vec![a.as_bytes().to_vec(), b.as_bytes().to_vec()]);
        }
    }

    #[test]
    fn decode_accepts_only_what_encode_writes(bytes in proptest::collection::vec(
        prop_oneof![Just(b','), Just(b'"'), Just(b'\n'), Just(b'a'), Just(b' ')], 0..12)
    ) {
        if let Some(fields) = decode_label(&bytes) {
            let mut again = Vec::new();
            encode_label(&fields, &mut again);
            prop_assert_eq!(again, bytes);
        }
    }
}

#[test]
fn a_key_longer_than_any_protocol_accepts_names_its_file_and_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"email\na@x\n".to_vec();
    text.extend(vec![b'x'; psikit_io::MAX_KEY_BYTES + 1]);
    text.push(b'\n');
    let path = file(&dir, "long.csv", &text);
    let mut reader = KeyReader::open(&path, &spec("email")).unwrap();
    let mut batch = Vec::new();
    let err = reader.next_batch(10, &mut batch).unwrap_err().to_string();
    assert!(err.contains("long.csv row 2"), "{err}");
    assert!(err.contains("65536 bytes"), "{err}");
    let err = psikit_io::read_rows(&path, &spec("email"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("long.csv row 2"), "{err}");
    // Exactly at the limit is accepted.
    let mut text = b"email\n".to_vec();
    text.extend(vec![b'y'; psikit_io::MAX_KEY_BYTES]);
    let path = file(&dir, "limit.csv", &text);
    assert_eq!(
        psikit_io::read_rows(&path, &spec("email"))
            .unwrap()
            .rows
            .len(),
        1
    );
}

#[test]
fn value_columns_are_read_as_unsigned_integers_with_their_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(
        &dir,
        "v.csv",
        b"email,spent,n\na@x,10, 3\n,7,7\nb@x,18446744073709551615,0\n",
    );
    let mut s = spec("email");
    s.value_columns = Column::parse_list("n,spent").expect("columns");
    let mut reader = KeyReader::open(&path, &s).expect("open");
    let (mut items, mut values) = (Vec::new(), Vec::new());
    assert_eq!(
        reader
            .next_valued_batch(10, &mut items, &mut values)
            .expect("batch"),
        2
    );
    // The row with an empty key is skipped with its values.
    assert_eq!(items.iter().map(|i| i.row).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(values, [3, 10, 0, u64::MAX]);

    let path = file(&dir, "bad.csv", b"email,n\na@x,1\nb@x,-2\n");
    let mut s = spec("email");
    s.value_columns = vec![Column::Name("n".into())];
    let mut reader = KeyReader::open(&path, &s).expect("open");
    let err = reader
        .next_valued_batch(10, &mut items, &mut values)
        .expect_err("not a value");
    assert!(matches!(err, Error::NotAValue { row: 2, .. }), "{err}");
    assert!(err.to_string().contains("\"-2\" in column \"n\""), "{err}");
}

/// A keyed row: its key, row number and values.
type KeyedRow = (Vec<u8>, u64, Vec<u64>);

/// Every row of `reader` through `next_rows` and its keyer: the keyed rows
/// and the count of rows skipped, or the first error.
fn keyed_rows(
    reader: &mut KeyReader<std::fs::File>,
    max: usize,
) -> Result<(Vec<KeyedRow>, u64), Error> {
    let (keyer, mut batch) = (reader.keyer(), RowBatch::new());
    let (mut out, mut skipped) = (Vec::new(), 0);
    while reader.next_rows(max, &mut batch)? > 0 {
        for (i, record) in batch.records().iter().enumerate() {
            let row = batch.first_row() + i as u64;
            match keyer.key(row, record)? {
                Some(key) => {
                    let mut values = Vec::new();
                    keyer.values(row, record, &mut values)?;
                    out.push((key, row, values));
                }
                None => skipped += 1,
            }
        }
    }
    Ok((out, skipped))
}

#[test]
fn rows_keyed_apart_from_the_reader_equal_the_reader_s_items() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::from("id,email,n\n");
    for i in 0..1000u64 {
        match i % 7 {
            // A row whose key is empty after trimming: skipped.
            3 => text.push_str(&format!("{i},  ,{i}\n")),
            5 => text.push_str(&format!("{i},\"Quoted\nLine{i}@X\",{}\n", i * 3)),
            _ => text.push_str(&format!("{i}, User{i}@Example.com ,{}\n", i + 1)),
        }
    }
    let path = file(&dir, "k.csv", text.as_bytes());
    let mut s = spec("email,id");
    s.normalize = Normalize::parse("trim,lower").expect("normalize");
    s.value_columns = vec![Column::Name("n".into())];
    let mut reader = KeyReader::open(&path, &s).expect("open");
    let (mut items, mut values, mut want) = (Vec::new(), Vec::new(), Vec::new());
    while reader
        .next_valued_batch(64, &mut items, &mut values)
        .expect("batch")
        > 0
    {
        want.extend(
            items
                .iter()
                .zip(&values)
                .map(|(it, v)| (it.key.clone(), it.row, vec![*v])),
        );
    }
    let skipped = reader.stats().rows_skipped;
    assert_eq!(skipped, 143);
    for max in [1, 7, 64, 5000] {
        let mut reader = KeyReader::open(&path, &s).expect("open");
        let got = keyed_rows(&mut reader, max).expect("rows");
        assert_eq!(got, (want.clone(), skipped), "batches of {max}");
        assert_eq!(reader.stats().rows_read, 1000);
    }
    // A short row is the same error, at the same row, either way.
    let path = file(&dir, "short.csv", b"id,email,n\n1,a@x,1\n2,b@x\n3,c@x,3\n");
    let err = KeyReader::open(&path, &s)
        .expect("open")
        .next_valued_batch(10, &mut items, &mut values)
        .expect_err("short");
    let apart = keyed_rows(&mut KeyReader::open(&path, &s).expect("open"), 10).expect_err("short");
    assert_eq!(err.to_string(), apart.to_string());
    assert!(matches!(apart, Error::ShortRow { row: 2, .. }), "{apart}");
}

/// A Parquet file with the rows of `email,n` (`None`: a null), snappy
/// compressed, in row groups of `group` rows.
#[cfg(feature = "parquet")]
fn parquet_file(path: &Path, rows: &[(Option<&str>, Option<i64>)], group: usize) {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;

    let schema = "message m { OPTIONAL BINARY email (UTF8); OPTIONAL INT64 n; }";
    let schema = Arc::new(parse_message_type(schema).expect("schema"));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let file = std::fs::File::create(path).expect("create");
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(props)).expect("writer");
    for chunk in rows.chunks(group) {
        let levels = |present: &dyn Fn(usize) -> bool| -> Vec<i16> {
            (0..chunk.len()).map(|i| i16::from(present(i))).collect()
        };
        let mut rg = writer.next_row_group().expect("row group");
        let emails: Vec<ByteArray> = chunk
            .iter()
            .filter_map(|r| r.0)
            .map(ByteArray::from)
            .collect();
        let mut col = rg.next_column().expect("column").expect("email");
        col.typed::<ByteArrayType>()
            .write_batch(&emails, Some(&levels(&|i| chunk[i].0.is_some())), None)
            .expect("write");
        col.close().expect("close");
        let ns: Vec<i64> = chunk.iter().filter_map(|r| r.1).collect();
        let mut col = rg.next_column().expect("column").expect("n");
        col.typed::<Int64Type>()
            .write_batch(&ns, Some(&levels(&|i| chunk[i].1.is_some())), None)
            .expect("write");
        col.close().expect("close");
        rg.close().expect("close");
    }
    writer.close().expect("close");
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_files_read_as_the_same_rows_in_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows: Vec<(Option<&str>, Option<i64>)> = vec![
        (Some(" Ann@X.org"), Some(3)),
        (None, Some(7)),
        (Some("bob@x.org"), None),
        (Some("ann@x.org "), Some(9_000_000_000)),
        (Some("cy@x.org"), Some(1)),
    ];
    let pq = dir.path().join("in.parquet");
    parquet_file(&pq, &rows, 2);
    let csv = file(
        &dir,
        "in.csv",
        b"email,n\n Ann@X.org,3\n,7\nbob@x.org,\nann@x.org ,9000000000\ncy@x.org,1\n",
    );
    assert!(psikit_io::is_parquet(&pq).expect("magic"));
    assert!(!psikit_io::is_parquet(&csv).expect("magic"));
    let mut s = spec("email");
    s.normalize = Normalize::parse("trim,lower").expect("normalize");
    // Keys, rows and skipped rows agree; so do the tables.
    assert_eq!(all_items(&pq, &s, 2), all_items(&csv, &s, 2));
    let (t_pq, t_csv) = (
        read_rows(&pq, &s).expect("parquet"),
        read_rows(&csv, &s).expect("csv"),
    );
    assert_eq!(t_pq, t_csv);
    // A value column of integers (a null field is not a value).
    s.value_columns = vec![Column::Name("n".into())];
    let mut reader = KeyReader::open(&pq, &s).expect("open");
    let (mut items, mut values) = (Vec::new(), Vec::new());
    let err = reader
        .next_valued_batch(10, &mut items, &mut values)
        .expect_err("row 3 has no value");
    assert!(matches!(err, Error::NotAValue { row: 3, .. }), "{err}");
    // Selected rows come out as CSV.
    let (out, n) =
        psikit_io::write_selected_rows(&pq, &s, Vec::new(), |row| row % 2 == 1).expect("write");
    assert_eq!(n, 3);
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "email,n\n Ann@X.org,3\nbob@x.org,\ncy@x.org,1\n"
    );
}
