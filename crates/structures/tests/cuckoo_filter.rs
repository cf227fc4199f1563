//! Behavioural tests of the cuckoo filter through its public API.

use proptest::prelude::*;
use psikit_structures::{
    theoretical_bits_per_item, CuckooFilter, CuckooFilterParams, FilterError, Tag, HEADER_LEN,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn params(f: u32, b: u32, m: u64) -> CuckooFilterParams {
    CuckooFilterParams {
        fingerprint_bits: f,
        bucket_size: b,
        num_buckets: m,
    }
}

fn random_tags(rng: &mut StdRng, n: usize) -> Vec<Tag> {
    (0..n).map(|_| rng.gen()).collect()
}

/// Filter with `n` random tags inserted; panics if any insertion fails.
fn filled(p: CuckooFilterParams, n: usize, seed: u64) -> (CuckooFilter, Vec<Tag>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let tags = random_tags(&mut rng, n);
    let mut cf = CuckooFilter::new(p, seed).expect("valid params");
    for (k, tag) in tags.iter().enumerate() {
        cf.insert(tag)
            .unwrap_or_else(|e| panic!("insert {k} of {n} failed: {e}"));
    }
    (cf, tags)
}

#[derive(Debug, Clone)]
enum Op {
    /// Insert tag number `.0` of a small pool (so duplicates occur).
    Insert(usize),
    /// Delete the present item at position `.0 % len` of the model.
    Delete(usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..96).prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Delete),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Inserts and deletes of present items against a multiset model: no
    /// false negatives, `len` tracks the model, failed inserts change nothing,
    /// and per-operation deltas keep a client copy byte-identical.
    #[test]
    fn model_inserts_and_deletes(
        f in 4u32..=20,
        b in 1u32..=4,
        m in 5u64..=41,
        seed: u64,
        ops in proptest::collection::vec(op_strategy(), 1..220),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let pool = random_tags(&mut rng, 96);
        let mut cf = CuckooFilter::new(params(f, b, m), seed).expect("valid params");
        cf.set_track_changes(true);
        // A client kept in sync through deltas only, including after failed inserts.
        let mut client = cf.clone();
        let mut model: Vec<Tag> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(k) => {
                    let before = cf.to_bytes();
                    match cf.insert(&pool[k]) {
                        Ok(()) => model.push(pool[k]),
                        Err(e) => {
                            prop_assert_eq!(e, FilterError::Full);
                            prop_assert_eq!(&cf.to_bytes(), &before);
                        }
                    }
                }
                Op::Delete(k) if !model.is_empty() => {
                    let tag = model.swap_remove(k % model.len());
                    prop_assert!(cf.delete(&tag));
                }
                Op::Delete(_) => {}
            }
            prop_assert_eq!(cf.len(), model.len() as u64);
            let changed = cf.take_changed_slots();
            client.import_slots(&changed, &cf.export_slots(&changed)).expect("own delta");
            prop_assert_eq!(client.to_bytes(), cf.to_bytes());
            for tag in &model {
                prop_assert!(cf.contains(tag));
            }
        }
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn from_bytes_survives_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = CuckooFilter::from_bytes(&bytes, 1 << 20);
    }

    /// Garbage behind a plausible header: either rejected or a filter whose
    /// re-encoding is the input itself.
    #[test]
    fn from_bytes_survives_corrupted_filters(pos in 0usize..200, byte: u8, seed: u64) {
        // A small table can legitimately refuse an insert (its alternate
        // buckets are few), so failures are skipped: this test is about decoding.
        let mut rng = StdRng::seed_from_u64(seed);
        let mut cf = CuckooFilter::new(params(9, 3, 17), seed).expect("valid params");
        for tag in random_tags(&mut rng, 30) {
            let _ = cf.insert(&tag);
        }
        prop_assert!(!cf.is_empty());
        let mut bytes = cf.to_bytes();
        let pos = pos % bytes.len();
        bytes[pos] ^= byte | 1;
        if let Ok(decoded) = CuckooFilter::from_bytes(&bytes, 1 << 20) {
            prop_assert_eq!(decoded.to_bytes(), bytes);
        }
    }
}

#[test]
fn fills_to_95_percent_with_non_power_of_two_buckets() {
    let p = params(16, 4, 10_007);
    let n = (p.capacity_slots() as f64 * 0.95) as usize;
    let (mut cf, tags) = filled(p, n, 42);
    assert_eq!(cf.len(), n as u64);
    assert!(cf.load_factor() >= 0.949);
    assert!(tags.iter().all(|t| cf.contains(t)));

    // Push past capacity until an insert fails; the failure must be atomic.
    let mut rng = StdRng::seed_from_u64(43);
    let mut failures = 0;
    for _ in 0..(p.capacity_slots() as usize) {
        let before = cf.to_bytes();
        let len = cf.len();
        match cf.insert(&rng.gen()) {
            Ok(()) => continue,
            Err(e) => assert_eq!(e, FilterError::Full),
        }
        failures += 1;
        assert_eq!(cf.to_bytes(), before, "failed insert modified the filter");
        assert_eq!(cf.len(), len);
        if failures == 5 {
            break;
        }
    }
    assert_eq!(failures, 5, "filter never reported Full");
    assert!(cf.len() <= cf.capacity_slots());
    assert!(tags.iter().all(|t| cf.contains(t)), "an item was lost");
}

#[test]
fn measured_false_positive_rate_matches_estimate() {
    for f in [8u32, 10] {
        let p = params(f, 4, 6_007);
        let n = (p.capacity_slots() as f64 * 0.9) as usize;
        let (cf, _) = filled(p, n, 7);
        let mut rng = StdRng::seed_from_u64(1000 + u64::from(f));
        let trials = 1_000_000u32;
        let hits = (0..trials).filter(|_| cf.contains(&rng.gen())).count();
        let measured = hits as f64 / f64::from(trials);
        let expected = p.expected_fpr(cf.load_factor());
        let ratio = measured / expected;
        eprintln!("f={f}: measured FPR {measured:.5}, expected {expected:.5}");
        assert!(
            (0.9..1.1).contains(&ratio),
            "f={f}: measured {measured:.5}, expected {expected:.5}"
        );
        assert!(measured <= p.fpr_upper_bound());
    }
}

#[test]
fn serialization_round_trip() {
    let p = params(13, 3, 1_001);
    let (mut cf, tags) = filled(p, 2_500, 5);
    for tag in &tags[..100] {
        assert!(cf.delete(tag));
    }
    let bytes = cf.to_bytes();
    assert_eq!(bytes.len() as u64, p.serialized_len());
    assert_eq!(bytes.len() as u64, HEADER_LEN as u64 + cf.size_bytes());
    let back = CuckooFilter::from_bytes(&bytes, bytes.len()).expect("round trip");
    assert_eq!(back.params(), cf.params());
    assert_eq!(back.len(), cf.len());
    assert_eq!(back.to_bytes(), bytes);
    assert!(tags[100..].iter().all(|t| back.contains(t)));
}

#[test]
fn from_bytes_rejects_malformed_input() {
    let (cf, _) = filled(params(12, 4, 257), 700, 9);
    let good = cf.to_bytes();
    let decode = |bytes: &[u8]| CuckooFilter::from_bytes(bytes, 1 << 20).err();

    assert!(matches!(decode(&[]), Some(FilterError::WrongLength { .. })));
    assert!(matches!(
        decode(&good[..10]),
        Some(FilterError::WrongLength { .. })
    ));
    assert!(matches!(
        decode(&good[..good.len() - 1]),
        Some(FilterError::WrongLength { .. })
    ));
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(
        decode(&long),
        Some(FilterError::WrongLength { .. })
    ));

    let mut bad_version = good.clone();
    bad_version[0] = 2;
    assert!(matches!(
        decode(&bad_version),
        Some(FilterError::UnsupportedVersion { found: 2, .. })
    ));

    for (offset, value) in [(1usize, 3u8), (1, 65), (2, 0), (2, 9)] {
        let mut bad = good.clone();
        bad[offset] = value;
        assert!(matches!(decode(&bad), Some(FilterError::InvalidParams(_))));
    }
    let mut huge_m = good.clone();
    huge_m[3..11].copy_from_slice(&((1u64 << 40) + 1).to_le_bytes());
    assert!(matches!(
        decode(&huge_m),
        Some(FilterError::InvalidParams(_))
    ));

    // A header claiming 2^40 buckets is refused by size, before allocating.
    let mut big = good.clone();
    big[3..11].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(decode(&big), Some(FilterError::TooLarge { .. })));
    assert!(matches!(
        CuckooFilter::from_bytes(&good, good.len() - 1).err(),
        Some(FilterError::TooLarge { .. })
    ));

    let mut wrong_count = good.clone();
    wrong_count[11..19].copy_from_slice(&699u64.to_le_bytes());
    assert_eq!(
        decode(&wrong_count),
        Some(FilterError::CountMismatch {
            declared: 699,
            actual: 700
        })
    );
}

#[test]
fn from_bytes_rejects_nonzero_padding() {
    // 3 buckets * 1 slot * 5 bits = 15 bits: one padding bit.
    let cf = CuckooFilter::new(params(5, 1, 3), 0).expect("valid");
    let mut bytes = cf.to_bytes();
    assert_eq!(bytes.len(), HEADER_LEN + 2);
    *bytes.last_mut().expect("table byte") |= 0x80;
    assert_eq!(
        CuckooFilter::from_bytes(&bytes, 100).err(),
        Some(FilterError::NonZeroPadding)
    );
}

#[test]
fn deltas_reproduce_the_server_filter() {
    let p = CuckooFilterParams::for_capacity(100_000, 20, 4, 0.9).expect("valid");
    let (mut server, mut present) = filled(p, 100_000, 11);
    let mut client = CuckooFilter::from_bytes(&server.to_bytes(), 1 << 24).expect("decode");

    // 1% churn: 500 deletes of present items and 500 fresh inserts.
    server.set_track_changes(true);
    let mut rng = StdRng::seed_from_u64(12);
    for _ in 0..500 {
        let k = rng.gen_range(0..present.len());
        assert!(server.delete(&present.swap_remove(k)));
    }
    for tag in random_tags(&mut rng, 500) {
        server.insert(&tag).expect("room left");
        present.push(tag);
    }
    let changed = server.take_changed_slots();
    assert!(changed.windows(2).all(|w| w[0] < w[1]), "not sorted/dedup");
    let delta = server.export_slots(&changed);
    assert_eq!(
        delta.len() as u64,
        (changed.len() as u64 * u64::from(p.fingerprint_bits)).div_ceil(8)
    );

    client.import_slots(&changed, &delta).expect("valid delta");
    assert_eq!(client.to_bytes(), server.to_bytes());
    assert_eq!(client.len(), server.len());
    assert!(present.iter().all(|t| client.contains(t)));

    // Each update writes one slot, two when a resident is displaced; long
    // eviction chains would show up here.
    assert!(changed.len() <= 2 * 1000, "{} slots changed", changed.len());
    let full_size = server.to_bytes().len();
    assert!(
        delta.len() * 40 < full_size,
        "delta {} of {full_size} bytes",
        delta.len()
    );
    assert!(server.take_changed_slots().is_empty());
}

#[test]
fn import_rejects_bad_deltas_without_changes() {
    let (mut cf, _) = filled(params(11, 2, 50), 60, 3);
    let before = cf.to_bytes();
    let delta = cf.export_slots(&[1, 4]);
    assert_eq!(delta.len(), 3); // 2 * 11 bits -> 22 bits -> 3 bytes

    let errors = [
        cf.import_slots(&[4, 1], &delta),
        cf.import_slots(&[1, 1], &delta),
        cf.import_slots(&[1, 100], &delta),
        cf.import_slots(&[1, 4], &delta[..2]),
        cf.import_slots(&[1, 4], &[delta.as_slice(), &[0]].concat()),
        cf.import_slots(&[1, 4], &{
            let mut d = delta.clone();
            d[2] |= 0x80;
            d
        }),
    ];
    assert!(matches!(
        errors[0],
        Err(FilterError::UnsortedIndices {
            position: 1,
            index: 1
        })
    ));
    assert!(matches!(
        errors[1],
        Err(FilterError::UnsortedIndices { .. })
    ));
    assert!(matches!(
        errors[2],
        Err(FilterError::SlotOutOfRange { index: 100, .. })
    ));
    assert!(matches!(errors[3], Err(FilterError::WrongLength { .. })));
    assert!(matches!(errors[4], Err(FilterError::WrongLength { .. })));
    assert!(matches!(errors[5], Err(FilterError::NonZeroPadding)));
    assert_eq!(cf.to_bytes(), before);

    // Importing an emptied slot lowers len accordingly.
    let occupied = (0..100u64)
        .find(|&i| cf.export_slots(&[i]) != vec![0u8; 2])
        .expect("some slot is occupied");
    let len = cf.len();
    cf.import_slots(&[occupied], &[0, 0]).expect("valid");
    assert_eq!(cf.len(), len - 1);
    let recount = CuckooFilter::from_bytes(&cf.to_bytes(), 1 << 20).expect("consistent");
    assert_eq!(recount.len(), cf.len());
}

#[test]
fn sizing_for_30_bit_fpr() {
    let p = CuckooFilterParams::for_capacity(1_000_000, 30, 4, 0.9).expect("valid");
    assert_eq!(p.fingerprint_bits, 33);
    assert_eq!(p.bucket_size, 4);
    assert_eq!(p.num_buckets, 277_778);
    assert!(p.fpr_upper_bound() <= (-30f64).exp2());
    let bits_per_item = p.table_bits() as f64 / 1_000_000.0;
    let formula = theoretical_bits_per_item((-30f64).exp2(), 4, 0.95);
    assert!((formula - 34.737).abs() < 0.01);
    let ratio = bits_per_item / formula;
    assert!((1.0..1.1).contains(&ratio), "{bits_per_item} vs {formula}");

    assert_eq!(
        CuckooFilterParams::for_capacity(0, 10, 4, 0.9)
            .expect("valid")
            .num_buckets,
        1
    );
    for b in 1..=8u32 {
        let p = CuckooFilterParams::for_capacity(1000, 20, b, 0.9).expect("valid");
        assert!(p.fpr_upper_bound() <= (-20f64).exp2());
        assert!(
            p.fpr_upper_bound() > (-21f64).exp2(),
            "f not minimal for b={b}"
        );
    }
    assert!(CuckooFilterParams::for_capacity(10, 62, 4, 0.9).is_err());
    assert!(CuckooFilterParams::for_capacity(10, 20, 4, 0.0).is_err());
    assert!(CuckooFilterParams::for_capacity(10, 20, 4, f64::NAN).is_err());
    assert!(CuckooFilterParams::for_capacity(10, 20, 9, 0.9).is_err());
    assert!(CuckooFilterParams::for_capacity(u64::MAX, 20, 4, 0.9).is_err());
}

#[test]
fn fpr_formulas() {
    let p = params(8, 4, 100);
    assert!((p.fpr_upper_bound() - 8.0 / 256.0).abs() < 1e-15);
    let direct = 1.0 - (1.0 - 1.0 / 256.0f64).powf(8.0 * 0.5);
    assert!((p.expected_fpr(0.5) - direct).abs() < 1e-12);
    let wide = params(64, 4, 100);
    assert!(wide.expected_fpr(1.0) > 0.0);
    assert!(wide.expected_fpr(1.0) <= wide.fpr_upper_bound());
}

#[test]
fn validation_and_accessors() {
    assert!(params(4, 1, 1).validate().is_ok());
    assert!(params(64, 8, 1 << 40).validate().is_ok());
    assert!(params(3, 4, 10).validate().is_err());
    assert!(params(65, 4, 10).validate().is_err());
    assert!(params(8, 0, 10).validate().is_err());
    assert!(params(8, 9, 10).validate().is_err());
    assert!(params(8, 4, 0).validate().is_err());
    assert!(CuckooFilter::new(params(8, 4, 0), 0).is_err());

    let mut cf = CuckooFilter::new(params(10, 4, 25), 0).expect("valid");
    assert!(cf.is_empty());
    assert_eq!(cf.capacity_slots(), 100);
    assert_eq!(cf.size_bytes(), 125);
    assert_eq!(cf.bits_per_item(), f64::INFINITY);
    let tag = [3u8; 16];
    assert!(!cf.delete(&tag));
    cf.insert(&tag).expect("room");
    cf.insert(&tag).expect("duplicates allowed");
    assert_eq!(cf.len(), 2);
    assert!((cf.load_factor() - 0.02).abs() < 1e-12);
    assert!((cf.bits_per_item() - 500.0).abs() < 1e-9);
    assert!(cf.delete(&tag) && cf.contains(&tag));
    assert!(cf.delete(&tag) && !cf.contains(&tag));
    assert!(cf.is_empty());
}

#[test]
fn single_bucket_and_wide_fingerprints() {
    for p in [params(64, 8, 1), params(64, 1, 3), params(37, 3, 1)] {
        let n = (p.capacity_slots() as usize).min(8);
        let (mut cf, tags) = filled(p, n, 77);
        assert!(tags.iter().all(|t| cf.contains(t)));
        let bytes = cf.to_bytes();
        let back = CuckooFilter::from_bytes(&bytes, 1 << 10).expect("round trip");
        assert_eq!(back.to_bytes(), bytes);
        for t in &tags {
            assert!(cf.delete(t));
        }
        assert!(cf.is_empty());
    }
}
