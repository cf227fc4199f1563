//! Labels: the server's extra columns, carried as one CSV record.
//!
//! A labeled PSI protocol returns one opaque byte string per matched item.
//! To let a server attach several columns (say `name,tier`) and the client
//! write them back as columns, the label is those fields encoded as a single
//! RFC 4180 record: comma-separated, no line terminator, and a field quoted
//! (with `"` doubled) only when it contains `,`, `"`, CR or LF, or when it is
//! the only field and empty (so that one empty field differs from "no
//! label"). The encoding is canonical: [`decode_label`] accepts exactly the
//! byte strings [`encode_label`] can produce, so a label from elsewhere is
//! recognised as such instead of being split at random commas.

/// The name of label column `k` (from 0) of `count` when nothing better is
/// known: `label` for a single column, else `label_1`, `label_2`, ...
pub fn default_label_name(k: usize, count: usize) -> String {
    match count {
        1 => "label".into(),
        _ => format!("label_{}", k + 1),
    }
}

/// Appends the CSV record of `fields` to `out` (see the module docs).
pub fn encode_label<F: AsRef<[u8]>>(fields: &[F], out: &mut Vec<u8>) {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let field = field.as_ref();
        if needs_quotes(field, fields.len()) {
            push_quoted(field, out);
        } else {
            out.extend_from_slice(field);
        }
    }
}

/// Whether a field must be quoted to survive a CSV round trip.
fn needs_quotes(field: &[u8], field_count: usize) -> bool {
    (field.is_empty() && field_count == 1)
        || field
            .iter()
            .any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
}

fn push_quoted(field: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in field {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// The fields of a label made by [`encode_label`], or `None` when `bytes`
/// is not such a record (for instance a binary label). An empty label has
/// no fields.
pub fn decode_label(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut record = csv::ByteRecord::new();
    if !reader.read_byte_record(&mut record).ok()? {
        return None;
    }
    let fields: Vec<Vec<u8>> = record.iter().map(<[u8]>::to_vec).collect();
    // The round trip rejects extra records, stray quotes and any other
    // spelling the csv parser tolerates but the encoder never writes.
    let mut again = Vec::with_capacity(bytes.len());
    encode_label(&fields, &mut again);
    (again == bytes).then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(fields: &[&str]) -> String {
        let mut out = Vec::new();
        encode_label(fields, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn quoting_only_where_needed() {
        assert_eq!(enc(&["Alice Smith", "gold"]), "Alice Smith,gold");
        assert_eq!(enc(&["a,b", "say \"hi\""]), "\"a,b\",\"say \"\"hi\"\"\"");
        assert_eq!(enc(&["two\nlines"]), "\"two\nlines\"");
        assert_eq!(enc(&[""]), "\"\"");
        assert_eq!(enc(&["", ""]), ",");
        assert_eq!(enc(&[]), "");
    }

    #[test]
    fn decode_inverts_encode() {
        for fields in [
            vec!["Alice Smith", "gold"],
            vec!["a,b", "say \"hi\"", ""],
            vec![""],
            vec!["", ""],
            vec!["Émile Müller"],
            vec![" padded ", "x\r\ny"],
        ] {
            let mut bytes = Vec::new();
            encode_label(&fields, &mut bytes);
            let back = decode_label(&bytes).expect("canonical");
            let want: Vec<Vec<u8>> = fields.iter().map(|f| f.as_bytes().to_vec()).collect();
            assert_eq!(back, want);
        }
        assert_eq!(decode_label(b""), Some(Vec::new()));
    }

    #[test]
    fn non_canonical_labels_are_refused() {
        for bytes in [
            &b"a\nb"[..],
            b"a,b\n",
            b"\"quoted\"",
            b"a\"b",
            b"\"open",
            b"\"a\"x",
        ] {
            assert_eq!(decode_label(bytes), None, "{bytes:?}");
        }
        assert_eq!(
            decode_label(b"\xff\x00\x01"),
            Some(vec![b"\xff\x00\x01".to_vec()])
        );
    }
}
