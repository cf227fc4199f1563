//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`,
//! off by default; not a public API).
//!
//! Each target is one `fn(&[u8])` that runs one family of decoders of peer
//! or file data on the input, ignores whether decoding succeeded, and
//! panics only when an invariant breaks: a message that decodes must
//! re-encode to the same bytes (one message, one encoding), and what a
//! loader accepts must be usable by the code that runs on it next. The
//! same functions replay the checked-in corpus as an ordinary test
//! (`tests/fuzz_corpus.rs`), so what the fuzzers once found stays fixed.
//!
//! Where one input carries several messages, its first byte picks which
//! decoder reads the rest. File formats guarded by a SHA-256 digest are
//! also decoded a second time with the digest recomputed over the mutated
//! contents: a fuzzer cannot forge a digest, and without that second pass
//! it would never get past the check to the fields behind it.

mod fuzzed;
pub(crate) mod harness;
pub(crate) mod seeds;

use std::path::Path;

use psikit_io::{Column, KeyReader, KeySpec, LabeledItem, Normalize};
use psikit_primitives::oprf::ServerKey;
use psikit_structures::CuckooFilter;
use psikit_transport::ErrorMessage;
use sha2::{Digest, Sha256};

use crate::common::oprf_stage::OutputBatch;
use crate::common::summary_codec;
use crate::cpsi::messages as cpsi;
use crate::filter_psi::messages::{self as filter, DeltaBody, FilterVersion, SyncRequest};
use crate::filter_psi::tag_cache::TagCache;
use crate::filter_psi::{ClientCache, FilterSnapshot, ServerState};
use crate::he_psi::messages as he;
use crate::he_psi::params::PsiParams;
use crate::he_psi::shard::{Manifest, ShardInfo};
use crate::jobs::terms as job;
use crate::rr16::messages as rr16;
use crate::vole_psi::messages as vole;
use harness::{
    channel, filter_key, he_params, round_trip, run, split, DELTA_SLOTS, MAX_FILTER, MAX_ITEMS,
    MAX_TRANSFER,
};
use psikit_ot::messages::{SilentChallenge, SilentCheck, SilentTrees};

pub use seeds::{seeds, Seed};

/// A target: its name (of its `fuzz/fuzz_targets/*.rs` file and of its
/// `fuzz/corpus/` directory) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("frame", frame),
    ("filter_messages", filter_messages),
    ("cuckoo_filter", cuckoo_filter),
    ("filter_files", filter_files),
    ("key_file", key_file),
    ("he_messages", he_messages),
    ("he_db", he_db),
    ("shard_files", shard_files),
    ("apsi_params", apsi_params),
    ("ot_messages", ot_messages),
    ("rr16_messages", rr16_messages),
    ("vole_messages", vole_messages),
    ("cpsi_messages", cpsi_messages),
    ("epc_messages", epc_messages),
    ("job_messages", job_messages),
    ("job_files", job_files),
    ("csv_keys", csv_keys),
    ("parquet_keys", parquet_keys),
];

/// Frames read from a byte stream (`Channel::recv_or_eof`, error frames
/// through `ErrorMessage::decode`), or with a first byte of 1 a chunked
/// transfer (`Channel::recv_chunked`). Every frame read must be exactly
/// the bytes it was read from.
pub fn frame(data: &[u8]) {
    let Some((which, stream)) = split(data) else {
        return;
    };
    let mut ch = channel(stream);
    if which & 1 == 1 {
        if let Ok(body) = run(ch.recv_chunked(1, 3, MAX_TRANSFER)) {
            assert!(body.len() as u64 <= MAX_TRANSFER);
        }
        return;
    }
    let mut at = 0usize;
    while let Ok(Some(frame)) = run(ch.recv_or_eof()) {
        let len = frame.wire_len() as usize;
        let wire = [&frame.header()[..], &frame.payload].concat();
        assert_eq!(wire, stream[at..at + len], "frame differs from its bytes");
        at += len;
        if frame.is_error() {
            if let Ok(message) = ErrorMessage::decode(&frame.payload) {
                assert_eq!(message.to_frame(frame.protocol), frame);
            }
        }
    }
}

/// The filter protocol's messages and its delta body.
pub fn filter_messages(data: &[u8]) {
    let Some((which, payload)) = split(data) else {
        return;
    };
    let which = usize::from(which) % (filter::FUZZED + 1);
    if filter::fuzz_decode(which, payload, 0) {
        return;
    }
    if let Ok(delta) = DeltaBody::decode(payload, DELTA_SLOTS) {
        assert_eq!(delta.encode(), payload, "delta re-encodes differently");
    }
}

/// A serialized cuckoo filter (`u32` length, then the filter) and a delta
/// body applied to it, as a client applies a sync answer. A filter that
/// loads must serialize back to its bytes, and stay loadable after the
/// delta, an insert and a delete.
pub fn cuckoo_filter(data: &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let len = u32::from_be_bytes(*len) as usize;
    let Some((filter, delta)) = rest.split_at_checked(len) else {
        return;
    };
    let Ok(mut filter) = CuckooFilter::from_bytes(filter, MAX_FILTER) else {
        return;
    };
    assert_eq!(
        filter.to_bytes(),
        rest[..len],
        "filter re-encodes differently"
    );
    if let Ok(delta) = DeltaBody::decode(delta, filter.capacity_slots()) {
        if filter.import_slots(&delta.slots, &delta.packed).is_ok() {
            assert_eq!(filter.export_slots(&delta.slots), delta.packed);
        }
    }
    let tag: [u8; 16] = Sha256::digest(data)[..16]
        .try_into()
        .expect("16 of 32 bytes");
    if filter.insert(&tag).is_ok() {
        assert!(filter.contains(&tag));
        assert!(filter.delete(&tag));
    }
    let again = CuckooFilter::from_bytes(&filter.to_bytes(), MAX_FILTER);
    assert!(again.is_ok_and(|f| f.len() == filter.len()));
}

/// The filter server's state file (first byte even) or the client's cache
/// file (odd). A state that loads must save back to its bytes and answer
/// every sync its history allows; a cache must save back to its bytes.
pub fn filter_files(data: &[u8]) {
    let Some((which, file)) = split(data) else {
        return;
    };
    if which & 2 != 0 {
        // A change file's body after a state: `u32` LE state length, the
        // state, the change (filter state when `which` is even, tag
        // cache when odd).
        let Some((len, rest)) = file.split_first_chunk::<4>() else {
            return;
        };
        let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
        let (base, change) = rest.split_at(len);
        match which & 1 {
            0 => filter_change(&digest_last(base, 9), change),
            _ => tag_cache_change(&digest_last(base, 9), change),
        }
    } else if which & 1 == 0 {
        for file in [file.to_vec(), digest_last(file, 9)] {
            filter_state(&file);
        }
    } else {
        for file in [file.to_vec(), digest_cache(file)] {
            if let Ok(cache) = ClientCache::decode(&file) {
                assert_eq!(cache.encode(), file, "cache re-encodes differently");
            }
        }
    }
}

fn filter_state(file: &[u8]) {
    let key = filter_key();
    let Ok(state) = ServerState::decode(key, file) else {
        return;
    };
    // Files of the current format re-encode exactly; older ones load as
    // the current format.
    if file.get(8) == Some(&crate::filter_psi::STATE_VERSION) {
        assert_eq!(state.encode(), file, "state re-encodes differently");
    }
    let current = state.version();
    let snapshot = FilterSnapshot::new(state);
    let mut requests = vec![SyncRequest { have: None }];
    requests.extend((0..=current.epoch).rev().take(70).map(|epoch| SyncRequest {
        have: Some(FilterVersion { epoch, ..current }),
    }));
    for request in &requests {
        let (header, body) = snapshot.answer_sync(request, MAX_ITEMS);
        assert_eq!(header.version, current);
        // The client's side of the same answer: a fresh client takes the
        // full filter.
        if request.have.is_none() {
            let mut cache = None;
            ClientCache::apply_sync(&mut cache, &header, body.bytes()).expect("full sync");
        }
    }
}

/// A change replayed on a state: refused, or a state whose tags are still
/// sorted and unique and whose filter still answers syncs.
fn filter_change(base: &[u8], change: &[u8]) {
    let Ok(mut state) = ServerState::decode(filter_key(), base) else {
        return;
    };
    if state.apply_change(change).is_err() {
        return;
    }
    assert!(state.tags_in_order(), "a replayed change unsorted the tags");
    let snapshot = FilterSnapshot::new(state);
    let current = snapshot.state.version();
    for have in [
        None,
        Some(FilterVersion {
            epoch: 0,
            ..current
        }),
    ] {
        let (header, _) = snapshot.answer_sync(&SyncRequest { have }, MAX_ITEMS);
        assert_eq!(header.version, current);
    }
}

/// A change replayed on a tag cache: refused, or entries still sorted.
fn tag_cache_change(base: &[u8], change: &[u8]) {
    let Ok(cache) = TagCache::decode(base) else {
        return;
    };
    if let Ok(entries) = crate::filter_psi::tag_cache::apply_change(cache.entries(), change) {
        assert!(
            entries.windows(2).all(|w| w[0].0 < w[1].0),
            "entries unsorted"
        );
    }
}

/// `file` with its last 32 bytes replaced by the SHA-256 of the rest, if
/// it is at least `min` bytes longer than a digest.
fn digest_last(file: &[u8], min: usize) -> Vec<u8> {
    let mut out = file.to_vec();
    if let Some(split) = file.len().checked_sub(32).filter(|&s| s >= min) {
        let digest = Sha256::digest(&file[..split]);
        out[split..].copy_from_slice(&digest);
    }
    out
}

/// A cache file with the digest field recomputed over the filter bytes it
/// announces (magic 8, version 1, id 16, epoch 8, digest 32, items 4,
/// length 8, filter).
fn digest_cache(file: &[u8]) -> Vec<u8> {
    const DIGEST: usize = 33;
    const FILTER: usize = 77;
    let mut out = file.to_vec();
    if let Some(filter) = file.get(FILTER..) {
        let digest = Sha256::digest(filter);
        out[DIGEST..DIGEST + 32].copy_from_slice(&digest);
    }
    out
}

/// A secret key file (either format); a key that loads must be a valid
/// OPRF key that saves back to the same file.
pub fn key_file(data: &[u8]) {
    for file in [data.to_vec(), digest_last(data, 8)] {
        let Ok(secret) = crate::keyfile::decode(&file) else {
            continue;
        };
        if let Ok(key) = ServerKey::from_bytes(secret) {
            if file.starts_with(b"PSIKKEY2") {
                assert_eq!(*crate::keyfile::encode(&key.to_bytes()), file);
            }
        }
    }
}

/// The HE protocol's messages, with the ciphertexts and key they carry
/// decoded as the receiving side decodes them.
pub fn he_messages(data: &[u8]) {
    let Some((which, payload)) = split(data) else {
        return;
    };
    let which = usize::from(which) % (he::FUZZED + 1);
    if !he::fuzz_decode(which, payload, 0) {
        drop(he::DecodedResultCt::decode(payload, he_params()));
    }
}

/// An HE sender database file; the digest is recomputed over the mutated
/// contents in a second pass.
pub fn he_db(data: &[u8]) {
    for file in [data.to_vec(), digest_last(data, 8)] {
        drop(crate::he_psi::server::db_file::read_from(
            file.as_slice(),
            Path::new("fuzz"),
        ));
    }
}

/// The files of a sharded database and of its build: a shard's
/// `shard.json` (first byte 0 mod 3), a router's `manifest.json` (1), or a
/// spool file of OPRF outputs (2; the next byte is the longest label
/// accepted). What loads must write out and load back as the same value;
/// a manifest that loads must give a router what it serves from it (the
/// client's bundle counts, which its checks keep within a `u32`).
pub fn shard_files(data: &[u8]) {
    let Some((which, file)) = split(data) else {
        return;
    };
    match which % 3 {
        0 => {
            let Ok(info) = serde_json::from_slice::<ShardInfo>(file) else {
                return;
            };
            if info.check().is_ok() {
                let again = serde_json::to_vec(&info).expect("plain fields serialize");
                let again = serde_json::from_slice::<ShardInfo>(&again).ok();
                assert_eq!(
                    again.as_ref(),
                    Some(&info),
                    "shard.json changes when written"
                );
            }
        }
        1 => {
            let Ok(manifest) = std::str::from_utf8(file).map(Manifest::from_json) else {
                return;
            };
            if let Ok(manifest) = manifest {
                let again = Manifest::from_json(&manifest.to_json()).ok();
                assert_eq!(
                    again.as_ref(),
                    Some(&manifest),
                    "manifest changes when written"
                );
                let totals = manifest.total_bundle_counts();
                assert!(
                    totals.len()
                        <= manifest
                            .bundle_counts
                            .iter()
                            .map(Vec::len)
                            .max()
                            .unwrap_or(0)
                );
            }
        }
        _ => {
            let Some((&longest, batch)) = file.split_first() else {
                return;
            };
            if let Ok(rows) = OutputBatch::from_bytes(batch, usize::from(longest)) {
                assert_eq!(rows.to_bytes(), batch, "spool batch re-encodes differently");
                assert!(rows.longest_label() <= usize::from(longest));
            }
        }
    }
}

/// APSI's JSON parameter files; parameters that load must write out and
/// load back as the same parameters.
pub fn apsi_params(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(params) = PsiParams::from_apsi_json(text) else {
        return;
    };
    let again = PsiParams::from_apsi_json(&params.to_apsi_json());
    assert_eq!(
        again.ok(),
        Some(params),
        "parameters change when written out"
    );
}

/// The OT layer's messages.
pub fn ot_messages(data: &[u8]) {
    use psikit_ot::messages::{BaseReceiverMessage, BaseSenderMessage, ExtHeader};
    let Some((which, payload)) = split(data) else {
        return;
    };
    match which % 3 {
        0 => drop(round_trip::<BaseSenderMessage>(payload, ())),
        1 => drop(round_trip::<BaseReceiverMessage>(payload, ())),
        _ => {
            if let Ok(header) = ExtHeader::decode(payload) {
                assert_eq!(header.to_frame().payload, payload);
            }
        }
    }
}

/// RR16's messages and chunked payloads. The receiver's bounds are the
/// input's next two bytes (a big-endian `u16`), so edge cases of the
/// bounds are explored too: OTs per chunk for a challenge, challenged OTs
/// for a response, bits per value (top 6 bits) and values (low 10) for
/// π, bits per value (high byte) and most values (low byte) for summaries.
pub fn rr16_messages(data: &[u8]) {
    let Some((which, rest)) = split(data) else {
        return;
    };
    let Some((bound, payload)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let bound = u16::from_be_bytes(*bound);
    let which = usize::from(which) % (rr16::FUZZED + 2);
    if rr16::fuzz_decode(which, payload, bound) {
        return;
    }
    match which - rr16::FUZZED {
        0 => {
            let width = u32::from(bound >> 10);
            let count = usize::from(bound & 0x3ff);
            if let Ok(pi) = rr16::unpack_indices(payload, count, width) {
                assert_eq!(rr16::pack_indices(&pi, width), payload);
            }
        }
        _ => {
            let (bits, count) = (u32::from(bound >> 8), u64::from(bound & 0xff));
            if let Ok(values) = summary_codec::decode(payload, bits, count) {
                assert_eq!(summary_codec::encode(&values, bits), payload);
            }
            // The same bytes as a segment of a run of `count` values.
            let layout = summary_codec::Layout::segmented(bits, count);
            let segment = (count as usize) % layout.segments();
            if let Ok(values) = summary_codec::decode_segment(&layout, segment, payload, count, 0) {
                assert_eq!(
                    summary_codec::encode_segment(&layout, segment, &values, 0),
                    payload
                );
            }
        }
    }
}

/// VOLE-PSI's messages and the silent OT's (trees, malicious check): a selector byte, two
/// bound bytes (blocks expected, big-endian; for the masked table the top
/// seven bits are its value bits less one, the low nine its count), then
/// the payload. A decoded message must re-encode to its bytes.
pub fn vole_messages(data: &[u8]) {
    let Some((which, rest)) = split(data) else {
        return;
    };
    let Some((bound, payload)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let bound = u16::from_be_bytes(*bound);
    let which = usize::from(which) % (vole::FUZZED + 4);
    if vole::fuzz_decode(which, payload, bound) {
        return;
    }
    let blocks = usize::from(bound);
    match which - vole::FUZZED {
        0 => {
            let (bits, count) = (u32::from(bound >> 9) + 1, blocks & 0x1ff);
            if let Ok(table) = vole::decode_values(payload, count, bits) {
                assert_eq!(vole::encode_values(&table, bits), payload);
            }
        }
        1 => drop(round_trip::<SilentTrees>(payload, blocks)),
        2 => drop(round_trip::<SilentChallenge>(payload, ())),
        _ => drop(round_trip::<SilentCheck>(payload, ())),
    }
}

/// Circuit PSI's own messages; two bound bytes give the bit count of a
/// packed bit vector (the GMW openings and OT corrections) or the number
/// of result shares.
pub fn cpsi_messages(data: &[u8]) {
    let Some((which, rest)) = split(data) else {
        return;
    };
    let Some((bound, payload)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let bound = u16::from_be_bytes(*bound);
    let which = usize::from(which) % (cpsi::FUZZED + 1);
    if !cpsi::fuzz_decode(which, payload, bound) {
        if let Some(b) = crate::cpsi::Bits::from_bytes(payload, usize::from(bound)) {
            assert_eq!(b.to_bytes(), payload);
        }
    }
}

/// Circuit PSI's EPC messages, each then used as the party receiving it
/// uses it: a public key taken by a receiver, a sender batch evaluated, a
/// reply decrypted. What decodes must be usable.
pub fn epc_messages(data: &[u8]) {
    let Some((which, payload)) = split(data) else {
        return;
    };
    crate::cpsi::epc::fuzz_decode(usize::from(which) % crate::cpsi::epc::FUZZED, payload, 0);
}

/// A long job's messages: a selector byte, two bound bytes (the job's
/// bucket count, big-endian, for `Committed` and `BucketStart`; the lane
/// count in the low byte for `Lane`), then the payload.
pub fn job_messages(data: &[u8]) {
    let Some((which, rest)) = split(data) else {
        return;
    };
    let Some((bound, payload)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let bound = u16::from_be_bytes(*bound);
    job::fuzz_decode(usize::from(which) % job::FUZZED, payload, bound);
}

/// A job directory's files, the selector's low two bits picking which:
/// the agreement, the input summary, a bucket's result (each sealed with
/// SHA-256), or a spool file loaded as a padded bucket. Each is read as
/// given and with its digest recomputed over the mutated contents; what
/// reads must write back and read again the same.
pub fn job_files(data: &[u8]) {
    let Some((which, file)) = split(data) else {
        return;
    };
    for file in [file.to_vec(), digest_last(file, 8)] {
        let Ok(root) = tempfile::tempdir() else {
            return;
        };
        crate::jobs::fuzzing::fuzz_file(root.path(), which, &file);
    }
}

/// A CSV file read under a key spec given on the input's first line, as
/// the CLI gives it: `key columns;label columns;normalisation`, then a
/// byte of flags (bit 0: no header row; bits 1-2: the delimiter). The
/// streaming reader and the table reader must agree, keys must be within
/// the limit, and labels must decode back to their columns.
pub fn csv_keys(data: &[u8]) {
    let Some((flags, rest)) = split(data) else {
        return;
    };
    let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
        return;
    };
    let (line, csv) = (&rest[..newline], &rest[newline + 1..]);
    let Some(spec) = std::str::from_utf8(line)
        .ok()
        .and_then(|l| key_spec(l, flags))
    else {
        return;
    };
    let Ok(mut reader) = KeyReader::from_reader(csv, &spec) else {
        return;
    };
    let mut items: Vec<LabeledItem> = Vec::new();
    let mut batch = Vec::new();
    while let Ok(n) = reader.next_labeled_batch(7, &mut batch) {
        if n == 0 {
            break;
        }
        items.append(&mut batch);
    }
    for item in &items {
        assert!(!item.key.is_empty() && item.key.len() <= psikit_io::MAX_KEY_BYTES);
        let fields = psikit_io::decode_label(&item.label).expect("a label decodes");
        let mut again = Vec::new();
        psikit_io::encode_label(&fields, &mut again);
        assert_eq!(again, item.label);
    }
    if let Ok(table) = psikit_io::read_rows_from(csv, &spec) {
        let keys: Vec<&[u8]> = table.keys().collect();
        let streamed: Vec<&[u8]> = items.iter().map(|i| i.key.as_slice()).collect();
        // The stream may have stopped at an error the table also hits
        // (a label column missing only matters to the stream).
        assert!(keys.starts_with(&streamed), "readers disagree");
    }
    drop(psikit_io::decode_label(csv));
}

/// An input file as its bytes (a Parquet file, or anything else, which is
/// then read as CSV) through every reader of input files: `KeyReader`
/// (keys, and the second column as values), `read_rows` and
/// `write_selected_rows`. The readers must agree on the keys.
pub fn parquet_keys(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let path = dir.path().join("input");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let mut spec = KeySpec::new(vec![Column::Index(0)]);
    spec.value_columns = vec![Column::Index(1)];
    let mut streamed = Vec::new();
    if let Ok(mut reader) = KeyReader::open(&path, &spec) {
        let (mut batch, mut values) = (Vec::new(), Vec::new());
        while let Ok(n) = reader.next_valued_batch(5, &mut batch, &mut values) {
            if n == 0 {
                break;
            }
            assert_eq!(values.len(), n, "one value per item");
            streamed.extend(batch.drain(..).map(|item| item.key));
        }
    }
    spec.value_columns.clear();
    if let Ok(table) = psikit_io::read_rows(&path, &spec) {
        let keys: Vec<Vec<u8>> = table.keys().map(<[u8]>::to_vec).collect();
        // The stream may have stopped at a value the table does not read.
        assert!(keys.starts_with(&streamed), "readers disagree");
        if let Ok((_, written)) = psikit_io::write_selected_rows(&path, &spec, Vec::new(), |_| true)
        {
            assert_eq!(written, table.stats.rows_read, "every row written");
        }
    }
}

/// The spec of [`csv_keys`]'s first line.
fn key_spec(line: &str, flags: u8) -> Option<KeySpec> {
    let mut parts = line.split(';');
    let columns = Column::parse_list(parts.next()?).ok()?;
    let labels = match parts.next().unwrap_or("") {
        "" => Vec::new(),
        list => Column::parse_list(list).ok()?,
    };
    let normalize = match parts.next() {
        Some(n) => Normalize::parse(n).ok()?,
        None => Normalize::default(),
    };
    Some(KeySpec {
        columns,
        normalize,
        has_headers: flags & 1 == 0,
        delimiter: [b',', b'\t', b';', b'|'][usize::from(flags >> 1 & 3)],
        label_columns: labels,
        value_columns: Vec::new(),
    })
}
