//! The seed corpus: real messages and files from the real encoders, one
//! list per target, in each target's input layout (see the targets' docs),
//! plus a few malformed inputs the encoders cannot make. Written to
//! `fuzz/corpus/` by `cargo test -p psikit-protocols --features fuzzing
//! --test fuzz_corpus -- --ignored`.

use psikit_he::{wire, Evaluator, RelinKey, SecretKey};
use psikit_ot::messages::{BaseReceiverMessage, BaseSenderMessage, ExtHeader, Mode};
use psikit_ot::messages::{SilentChallenge, SilentCheck, SilentTrees};
use psikit_primitives::oprf::{self, BlindedElement, ServerKey};
use psikit_structures::{CuckooFilter, CuckooFilterParams};
use psikit_transport::{Channel, ErrorCode, ErrorMessage, Frame, Limits, Message};
use rand::rngs::OsRng;
use tokio::io::AsyncReadExt;

use super::harness::{epc_parties, filter_key, he_params, run, EXPECTED_ANSWERS, MAX_ITEMS};
use sha2::{Digest, Sha256};

use crate::common::oprf_stage::OutputBatch;
use crate::common::two_party::Hello;
use crate::cpsi::epc::EpcSender;
use crate::filter_psi::messages::{
    DeltaBody, FilterVersion, QueryRequest, QueryResponse, SyncHeader, SyncRequest,
};
use crate::filter_psi::tag_cache::TagCache;
use crate::filter_psi::{ClientCache, FilterConfig, FilterSnapshot, ServerState};
use crate::he_psi::messages as he;
use crate::he_psi::params::PsiParams;
use crate::he_psi::server::sender_db::{DbEntry, SenderDb};
use crate::he_psi::shard::{Manifest, ShardInfo};
use crate::rr16::messages as rr16;
use crate::vole_psi::messages as vole;

/// One seed input of one target.
pub struct Seed {
    /// The target (a name in [`TARGETS`]).
    pub target: &'static str,
    /// The file name, unique within the target.
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// Every target's seeds.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |target, list: Vec<(&'static str, Vec<u8>)>| {
        out.extend(list.into_iter().map(|(name, bytes)| Seed {
            target,
            name,
            bytes,
        }));
    };
    add("frame", frames());
    add("filter_messages", filter_message_seeds());
    add("cuckoo_filter", cuckoo_filter_seeds());
    add("filter_files", filter_file_seeds());
    add("key_file", key_file_seeds());
    add("he_messages", he_message_seeds());
    add("he_db", he_db_seeds());
    add("shard_files", shard_file_seeds());
    add("apsi_params", apsi_param_seeds());
    add("ot_messages", ot_message_seeds());
    add("rr16_messages", rr16_message_seeds());
    add("vole_messages", vole_message_seeds());
    add("cpsi_messages", cpsi_message_seeds());
    add("epc_messages", epc_message_seeds());
    add("job_messages", crate::jobs::fuzzing::message_seeds());
    add("job_files", crate::jobs::fuzzing::seeds());
    add("csv_keys", csv_seeds());
    out
}

/// `which` followed by `payload`.
fn tagged(which: u8, payload: &[u8]) -> Vec<u8> {
    [&[which][..], payload].concat()
}

/// The fuzz selector of message `M` in its family's list (`KINDS`, from
/// `wire_messages!`).
pub(crate) fn pick<M: Message>(kinds: &[(u8, &str)]) -> u8 {
    let at = kinds.iter().position(|&(kind, _)| kind == M::KIND);
    u8::try_from(at.expect("the message is in its family's list")).expect("a short list")
}

/// The selector of a target's payload codec number `n`, after the family's
/// `listed` messages.
fn extra(listed: usize, n: usize) -> u8 {
    u8::try_from(listed + n).expect("a short list")
}

/// The payload of `message`, after the selector `which`.
fn message<M: Message>(which: u8, message: &M) -> Vec<u8> {
    tagged(which, &message.to_frame().payload)
}

/// Blinded elements and their evaluations for `n` items.
fn oprf_round(n: usize) -> (Vec<BlindedElement>, Vec<oprf::EvaluatedElement>) {
    let items: Vec<Vec<u8>> = (0..n).map(|i| format!("item{i}").into_bytes()).collect();
    let (_, blinded) = oprf::blind_batch(&items, &mut OsRng).expect("blind");
    let evaluated = ServerKey::generate(&mut OsRng).blind_evaluate_batch(&blinded);
    (blinded, evaluated)
}

/// What a channel puts on the wire for `send`'s frames.
fn sent(send: impl FnOnce(&mut Channel)) -> Vec<u8> {
    let (ours, mut theirs) = tokio::io::duplex(1 << 20);
    let mut ch = Channel::unclocked(ours, Limits::default());
    send(&mut ch);
    drop(ch);
    let mut wire = Vec::new();
    run(theirs.read_to_end(&mut wire)).expect("in-memory read");
    wire
}

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let messages = sent(|ch| {
        run(ch.send_msg(&SyncRequest { have: None })).expect("send");
        run(ch.send_msg(&he::QueryDone {
            packages: 3,
            evaluation_micros: 1500,
        }))
        .expect("send");
        run(ch.send_error(1, &ErrorMessage::new(ErrorCode::Stale, "filter changed")));
    });
    let body: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let chunked = sent(|ch| run(ch.send_chunked(1, 3, &body)).expect("send"));
    let oversized = Frame::new(1, 1, Vec::new()).header().map(|b| b | 0x70);
    vec![
        ("messages", tagged(0, &messages)),
        ("chunked", tagged(1, &chunked)),
        ("cut-short", tagged(0, &messages[..messages.len() - 3])),
        ("oversized", tagged(0, &oversized)),
    ]
}

fn filter_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let version = FilterVersion {
        filter_id: [7; 16],
        epoch: 42,
    };
    let (blinded, evaluated) = oprf_round(EXPECTED_ANSWERS);
    let header = SyncHeader {
        mode: crate::filter_psi::messages::SyncMode::Delta,
        version,
        from_epoch: 40,
        digest: [5; 32],
        max_query_items: 1000,
        key_format: "psikit-key-v1;columns=1;normalize=trim,lower".into(),
    };
    let (_, delta) = filter_and_delta();
    vec![
        ("sync-none", message(0, &SyncRequest { have: None })),
        (
            "sync-have",
            message(
                0,
                &SyncRequest {
                    have: Some(version),
                },
            ),
        ),
        ("sync-header", message(1, &header)),
        ("query", message(2, &QueryRequest { version, blinded })),
        ("answers", message(3, &QueryResponse { evaluated })),
        ("delta", tagged(4, &delta.encode())),
        (
            "delta-repeated-slot",
            tagged(4, &[0, 0, 0, 2, 5, 0, 0, 0, 0, 0]),
        ),
    ]
}

/// A small filter as a client holds it, and the delta of the server's
/// next update to it.
fn filter_and_delta() -> (Vec<u8>, DeltaBody) {
    let tag = |i: u32| -> [u8; 16] {
        Sha256::digest(i.to_le_bytes())[..16]
            .try_into()
            .expect("16 bytes")
    };
    let params = CuckooFilterParams::for_capacity(150, 10, 4, 0.9).expect("params");
    let mut filter = CuckooFilter::new(params, 1).expect("filter");
    for i in 0..120 {
        filter.insert(&tag(i)).expect("insert");
    }
    let before = filter.to_bytes();
    filter.set_track_changes(true);
    for i in 120..130 {
        filter.insert(&tag(i)).expect("insert");
    }
    filter.delete(&tag(3));
    let slots = filter.take_changed_slots();
    let packed = filter.export_slots(&slots);
    (before, DeltaBody { slots, packed })
}

fn cuckoo_filter_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let (filter, delta) = filter_and_delta();
    let with_delta = |filter: &[u8], delta: &[u8]| {
        [&(filter.len() as u32).to_be_bytes()[..], filter, delta].concat()
    };
    let empty = CuckooFilter::new(
        CuckooFilterParams::for_capacity(1, 4, 1, 1.0).expect("p"),
        0,
    )
    .expect("filter")
    .to_bytes();
    vec![
        ("filter-delta", with_delta(&filter, &delta.encode())),
        ("filter", with_delta(&filter, &[])),
        (
            "empty",
            with_delta(
                &empty,
                &DeltaBody {
                    slots: vec![],
                    packed: vec![],
                }
                .encode(),
            ),
        ),
    ]
}

fn filter_file_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = filter_key();
    let tags = crate::filter_psi::tags_for_items(
        &key,
        &(0..60u32)
            .map(|i| psikit_io::Item {
                key: i.to_le_bytes().to_vec(),
                row: 1,
            })
            .collect::<Vec<_>>(),
    )
    .expect("tags");
    let config = FilterConfig {
        fpr_log2: 8,
        history_epochs: 3,
        ..FilterConfig::default()
    };
    let (mut state, _) = ServerState::build(key, tags[..50].to_vec(), config).expect("build");
    for pair in tags[50..58].chunks(2) {
        state.update(pair.to_vec(), vec![]).expect("update");
    }
    // The state before its last update and that update's change file.
    let before = state.encode();
    state
        .update(tags[58..].to_vec(), tags[..1].to_vec())
        .expect("update");
    let change = state.last_change().expect("a change").to_vec();
    let file = state.encode();
    // Format 1: no key digest (32 bytes after the version), no key format
    // (an empty one is four zero bytes after that) and no file digest.
    let mut undigested = file[..file.len() - 32].to_vec();
    undigested.drain(9..9 + 32 + 4);
    undigested[8] = 1;
    let snapshot = FilterSnapshot::new(state);
    let (header, body) = snapshot.answer_sync(&SyncRequest { have: None }, MAX_ITEMS);
    let mut cache = None;
    ClientCache::apply_sync(&mut cache, &header, body.bytes()).expect("sync");
    let cache = cache.expect("a cache").encode();
    let (tag_cache, tag_change) = tag_cache_seed();
    vec![
        ("state", tagged(0, &file)),
        ("state-undigested", tagged(0, &undigested)),
        ("state-change", tagged(2, &with_change(&before, &change))),
        ("cache", tagged(1, &cache)),
        (
            "tag-cache-change",
            tagged(3, &with_change(&tag_cache, &tag_change)),
        ),
    ]
}

/// `filter_files`' layout for a change: the base's length, the base, the
/// change.
fn with_change(base: &[u8], change: &[u8]) -> Vec<u8> {
    let len = u32::try_from(base.len()).expect("a small seed");
    [&len.to_le_bytes()[..], base, change].concat()
}

/// A tag cache of 40 items and the change file of a query that drops 5
/// and adds 5.
fn tag_cache_seed() -> (Vec<u8>, Vec<u8>) {
    let query = |cache: &mut TagCache, ids: std::ops::Range<u8>| {
        let items: Vec<Vec<u8>> = ids.clone().map(|i| vec![i]).collect();
        let (_, sorted) = cache.lookup(&TagCache::hash_all(&items));
        let tags: Vec<[u8; 16]> = ids.map(|i| [i; 16]).collect();
        cache.replace([7; 16], &sorted, &tags);
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("tags");
    let mut cache = TagCache::default();
    query(&mut cache, 0..40);
    cache.save(&path).expect("save");
    let base = std::fs::read(&path).expect("the base");
    let mut cache = TagCache::load(&path).expect("load");
    query(&mut cache, 5..45);
    cache.save(&path).expect("save");
    let digest = crate::common::changelog::trailing_digest(&base);
    let (_, mut changes) =
        crate::common::changelog::ChangeLog::read(&path, digest, base.len() as u64, true)
            .expect("the change");
    (base, changes.pop().expect("a change file"))
}

fn key_file_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = ServerKey::generate(&mut OsRng).to_bytes();
    vec![
        ("key", crate::keyfile::encode(&key).to_vec()),
        ("key-undigested", [&b"PSIKKEY1"[..], &key].concat()),
    ]
}

fn he_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let params = he_params();
    let json = crate::he_psi::presets::apsi_preset("256K-1024").expect("a preset");
    let (blinded, evaluated) = oprf_round(EXPECTED_ANSWERS);
    let sk = SecretKey::generate(params).expect("secret key");
    let relin = RelinKey::generate(&sk).expect("relinearization key");
    let slots: Vec<u64> = (0..params.degree() as u64).map(|i| i % 7).collect();
    let mut ct = sk.encrypt_slots(&slots).expect("encrypt");
    let query = he::QueryCt::encode(&ct).expect("query ciphertext");
    Evaluator::new(params, &relin)
        .and_then(|ev| ev.to_lowest(&mut ct))
        .expect("to the lowest level");
    let result = he::ResultCt::encode(5, 2, &ct).expect("result ciphertext");
    let response = he::ParamsResponse {
        params_json: json.into(),
        max_label_bytes: 16,
        db_id: [3; 32],
        max_query_items: 500,
        bundle_counts: vec![4, 0, 9],
        key_format: "psikit-key-v1;columns=1;normalize=trim".into(),
        label_columns: vec!["name".into(), "tier".into()],
    };
    let header = he::QueryHeader {
        db_id: [8; 32],
        relin_key: relin.to_bytes().expect("key bytes"),
    };
    let mut broken = wire::encode_query_ct(&ct_fresh(&sk, &slots)).expect("query");
    broken[40] = 0xff;
    broken[41] = 0xff;
    vec![
        ("params-request", message(0, &he::ParamsRequest)),
        ("params", message(1, &response)),
        ("oprf", message(2, &he::OprfRequest { blinded })),
        ("oprf-answers", message(3, &he::OprfResponse { evaluated })),
        ("query-header", message(4, &header)),
        ("query-ct", message(5, &query)),
        ("query-ct-out-of-range", tagged(5, &broken)),
        ("result-ct", message(6, &result)),
        (
            "result-ct-decoded",
            tagged(extra(he::FUZZED, 0), &result.to_frame().payload),
        ),
        (
            "done",
            message(
                7,
                &he::QueryDone {
                    packages: 7,
                    evaluation_micros: 90,
                },
            ),
        ),
        ("shard-query", message(8, &he::ShardQuery { epoch: 3 })),
    ]
}

/// A fresh encryption of `slots`.
fn ct_fresh(sk: &SecretKey, slots: &[u64]) -> psikit_he::Ciphertext {
    sk.encrypt_slots(slots).expect("encrypt")
}

/// Small parameters (n = 256, not secure: for tests only) so that a
/// database file stays a few kilobytes.
const SMALL_PARAMS: &str = r#"{"table_params": {"hash_func_count": 3, "table_size": 51,
    "max_items_per_bin": 16}, "item_params": {"felts_per_item": 5},
    "query_params": {"ps_low_degree": 0, "query_powers": [1, 3, 4]},
    "seal_params": {"plain_modulus": 65537, "poly_modulus_degree": 256,
    "coeff_modulus_bits": [30, 30]}}"#;

fn he_db_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let file = |max_label: usize, items: u32| {
        let params = PsiParams::from_apsi_json(SMALL_PARAMS).expect("parameters");
        let mut db = SenderDb::new(params, max_label).expect("a database");
        let outputs: Vec<[u8; 64]> = (0..items)
            .map(|i| {
                let half = Sha256::digest(i.to_le_bytes());
                [half, half].concat().try_into().expect("64 bytes")
            })
            .collect();
        let labels: Vec<Vec<u8>> = (0..items).map(|i| format!("l{i}").into_bytes()).collect();
        let entries: Vec<DbEntry> = outputs
            .iter()
            .zip(&labels)
            .map(|(oprf, label)| DbEntry {
                oprf: *oprf,
                label: &label[..label.len().min(max_label)],
            })
            .collect();
        db.insert_or_assign(&entries).expect("insert");
        let mut bytes = Vec::new();
        crate::he_psi::server::db_file::write_to(&db, &mut bytes).expect("in memory");
        bytes
    };
    vec![("db", file(4, 12)), ("empty-db", file(0, 0))]
}

/// A shard's description, a plan and a built manifest (two shards of
/// APSI's 256K-1024 parameters with 16-byte labels), spool batches.
fn shard_file_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let info = ShardInfo::new([3; 32], 1, 4, 2);
    let info = serde_json::to_vec(&info).expect("plain fields serialize");
    let json = crate::he_psi::presets::apsi_preset("256K-1024").expect("a preset");
    let params = PsiParams::from_apsi_json(json).expect("the preset's parameters");
    let width = crate::he_psi::common::shape::DbShape::new(&params, 16)
        .expect("a shape")
        .bundle_idx_count();
    let mut manifest = Manifest::new([3; 32], &params, 16, ("email".into(), vec!["tier".into()]));
    manifest.bundle_counts = vec![Vec::new(); 2];
    manifest.items = vec![0; 2];
    let plan = manifest.to_json();
    manifest.bundle_counts = (0..2)
        .map(|s| (0..width).map(|i| ((s + i) % 3 + 1) as u32).collect())
        .collect();
    manifest.items = vec![1000, 1200];
    let mut batch = OutputBatch::default();
    batch.push([1; 64], b"a label");
    batch.push([2; 64], b"");
    let spooled =
        |longest: u8, batch: &OutputBatch| tagged(2, &[&[longest][..], &batch.to_bytes()].concat());
    vec![
        ("shard", tagged(0, &info)),
        ("plan", tagged(1, plan.as_bytes())),
        ("manifest", tagged(1, manifest.to_json().as_bytes())),
        ("batch", spooled(16, &batch)),
        ("empty-batch", spooled(0, &OutputBatch::default())),
    ]
}

fn apsi_param_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = crate::he_psi::presets::APSI_PRESETS
        .iter()
        .map(|&(name, json)| (name, json.as_bytes().to_vec()))
        .collect();
    out.push(("small", SMALL_PARAMS.as_bytes().to_vec()));
    out.push(("empty-object", b"{}".to_vec()));
    out
}

fn ot_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let (blinded, _) = oprf_round(4);
    let point = |i: usize| blinded[i].to_bytes();
    let header = ExtHeader {
        mode: Mode::Kos,
        param: psikit_ot::messages::KOS_UNCONFIRMED,
        first_row: 1 << 20,
        n: 12_345,
        frame_rows: 65_536,
    };
    vec![
        (
            "base-sender",
            message(
                0,
                &BaseSenderMessage {
                    count: 128,
                    point: point(0),
                },
            ),
        ),
        (
            "base-receiver",
            message(
                1,
                &BaseReceiverMessage {
                    pairs: vec![[point(1), point(2)], [point(3), point(0)]],
                },
            ),
        ),
        ("ext-header", tagged(2, &header.to_frame().payload)),
    ]
}

fn epc_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let (params, sender, receiver) = epc_parties();
    let (_, key) = EpcSender::new(params).expect("an EPC key pair");
    let batch = sender.encrypt_batch(7, &[1, 2, 3]).expect("an EPC batch");
    let (reply, _) = receiver
        .evaluate_batch(7, &batch, &[1, 2, 4])
        .expect("an EPC reply");
    vec![
        ("public-key", message(0, &key)),
        ("sender-batch", message(1, &batch)),
        ("reply", message(2, &reply)),
    ]
}

fn vole_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    /// Selector, the two bound bytes, the payload.
    fn bounded(which: u8, blocks: u16, payload: &[u8]) -> Vec<u8> {
        [&[which][..], &blocks.to_be_bytes(), payload].concat()
    }
    let hello = Hello::<{ vole::PROTOCOL_ID }> {
        mode: crate::common::two_party::Mode {
            malicious: false,
            low_comm: false,
            reveal: true,
        },
        set_size: 1 << 16,
        key_format: "psikit-key-v1;columns=2;normalize=trim".into(),
    };
    let table: Vec<u128> = (0..5).map(|i| u128::MAX / 7 * i).collect();
    let trees = SilentTrees {
        count: 4096,
        blocks: (0..9).collect(),
    };
    vec![
        (
            "hello",
            bounded(
                pick::<Hello<{ vole::PROTOCOL_ID }>>(vole::KINDS),
                0,
                &hello.to_frame().payload,
            ),
        ),
        (
            "okvs-seed",
            bounded(
                pick::<vole::OkvsSeed>(vole::KINDS),
                0,
                &vole::OkvsSeed([9; 16]).to_frame().payload,
            ),
        ),
        (
            "masked-table",
            bounded(
                extra(vole::FUZZED, 0),
                60 << 9 | 5,
                &vole::encode_values(&table.iter().map(|v| v >> 67).collect::<Vec<_>>(), 61),
            ),
        ),
        (
            "silent-trees",
            bounded(extra(vole::FUZZED, 1), 9, &trees.to_frame().payload),
        ),
        (
            "commitment",
            bounded(
                pick::<vole::Commitment>(vole::KINDS),
                0,
                &vole::Commitment([5; 32]).to_frame().payload,
            ),
        ),
        (
            "receiver-offset",
            bounded(
                pick::<vole::ReceiverOffset>(vole::KINDS),
                0,
                &vole::ReceiverOffset([6; 16]).to_frame().payload,
            ),
        ),
        (
            "sender-offset",
            bounded(
                pick::<vole::SenderOffset>(vole::KINDS),
                0,
                &vole::SenderOffset([7; 16]).to_frame().payload,
            ),
        ),
        (
            "silent-challenge",
            bounded(
                extra(vole::FUZZED, 2),
                0,
                &SilentChallenge(u128::MAX / 3).to_frame().payload,
            ),
        ),
        (
            "silent-check",
            bounded(
                extra(vole::FUZZED, 3),
                0,
                &SilentCheck([8; 32]).to_frame().payload,
            ),
        ),
    ]
}

fn cpsi_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use crate::cpsi::{messages as cpsi, Agreed, App, Bits, Epc, OtKind, Reveal};
    fn bounded(which: u8, bits: u16, payload: &[u8]) -> Vec<u8> {
        [&[which][..], &bits.to_be_bytes(), payload].concat()
    }
    let hello = cpsi::Hello {
        agreed: Agreed {
            app: App::Sum,
            ot: OtKind::Silent,
            epc: Epc::Bits(22),
            reveal: Reveal::Both,
            min_intersection: 1000,
            product_bits: 32,
        },
        set_size: 1 << 20,
        value_columns: 3,
        max_item_len: 40,
        key_format: "psikit-key-v1;columns=1;normalize=trim,lower".into(),
    };
    let seeds = cpsi::Seeds {
        hashing: u128::MAX / 5,
        okvs: [3; 16],
    };
    let opening = Bits::from_bools((0..77).map(|i| i % 3 == 1));
    vec![
        ("hello", bounded(0, 0, &hello.to_frame().payload)),
        ("seeds", bounded(1, 0, &seeds.to_frame().payload)),
        (
            "hint-seed",
            bounded(2, 0, &cpsi::HintSeed([4; 16]).to_frame().payload),
        ),
        (
            "share",
            bounded(3, 2, &cpsi::Share(vec![u64::MAX - 9, 7]).to_frame().payload),
        ),
        ("opening", bounded(4, 77, &opening.to_bytes())),
    ]
}

fn rr16_message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    /// Selector, the two bound bytes, the payload.
    fn bounded(which: u8, bound: u16, payload: &[u8]) -> Vec<u8> {
        [&[which][..], &bound.to_be_bytes(), payload].concat()
    }
    let hello = Hello::<{ rr16::PROTOCOL_ID }> {
        mode: crate::common::two_party::Mode {
            malicious: true,
            low_comm: false,
            reveal: false,
        },
        set_size: 1 << 20,
        key_format: "psikit-key-v1;columns=1;normalize=trim,lower".into(),
    };
    let challenge = rr16::Challenge {
        indices: vec![0, 3, 4, 1000, 1999],
    };
    let response = rr16::Response {
        zero_bits: vec![true, false, true, true, false, false, true, false, true],
        proof: 0x1234,
    };
    let pi: Vec<u32> = (0..20).map(|i| (i * 97) % 2048).collect();
    let values: Vec<crate::common::summaries::Summary> =
        (0..30u64).map(|i| [(i << 40) | (i * 977), 0, 0]).collect();
    let values = crate::common::summary_codec::encode(&values, 42);
    vec![
        ("hello", bounded(0, 0, &hello.to_frame().payload)),
        (
            "commit",
            bounded(1, 0, &rr16::Commit([1; 32]).to_frame().payload),
        ),
        (
            "nonce",
            bounded(2, 0, &rr16::Nonce([2; 32]).to_frame().payload),
        ),
        (
            "open",
            bounded(3, 0, &rr16::Open([3; 32]).to_frame().payload),
        ),
        ("challenge", bounded(4, 2000, &challenge.to_frame().payload)),
        ("response", bounded(5, 9, &response.to_frame().payload)),
        (
            "permutation",
            bounded(6, 11 << 10 | 20, &rr16::pack_indices(&pi, 11)),
        ),
        ("summaries", bounded(7, 42 << 8 | 30, &values)),
    ]
}

fn csv_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let labeled = "email;name,tier;trim,lower\n\
                   email,name,tier\n\
                   A@x.com,Alice,gold\n \
                   b@y.org ,\"Bob, Jr\",\"say \"\"hi\"\"\"\n\
                   ,Nobody,none\n";
    let composite = "#0,#2;;nfc,collapse,digits\n1,x,2\n3,,4\n5 5,y,6\n";
    let tabs = "id;;none\nid\tv\n1\ta\n2\tb\n";
    let header_missing = "email;;trim\nname\nAlice\n";
    vec![
        ("labeled", tagged(0, labeled.as_bytes())),
        ("composite", tagged(1, composite.as_bytes())),
        ("tabs", tagged(2, tabs.as_bytes())),
        ("header-missing", tagged(0, header_missing.as_bytes())),
    ]
}
