//! OKVS tests: round trips, failure rate, randomness of non-members,
//! linearity, parameters, refusals.

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn random_pairs(n: usize, rng: &mut StdRng) -> (Vec<u128>, Vec<u128>) {
    let keys: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
    let values: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
    (keys, values)
}

/// The whole table from an encoder, every bin at once.
fn every_bin(okvs: &Okvs, mut encoder: BinEncoder) -> Vec<u128> {
    let mut table = vec![0u128; okvs.params().table_len()];
    encoder
        .encode_bins(0..okvs.params().bins(), &mut table)
        .expect("bins");
    table
}

fn okvs_for(n: usize, seed: u8) -> Okvs {
    Okvs::new(OkvsParams::new(n).expect("params"), [seed; 16])
}

/// Encodes random pairs and checks every key, batched and one by one.
fn round_trip(n: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (keys, values) = random_pairs(n, &mut rng);
    let okvs = okvs_for(n, seed as u8);
    let table = okvs.encode(&keys, &values, &mut rng).expect("encode");
    assert_eq!(table.len(), okvs.params().table_len());
    let mut out = vec![0u128; n];
    okvs.decode(&table, &keys, &mut out).expect("decode");
    assert_eq!(out, values);
    for (k, v) in keys.iter().zip(&values).take(50) {
        assert_eq!(okvs.decode_one(&table, *k).expect("decode_one"), *v);
    }
}

#[test]
fn round_trips_at_edge_sizes() {
    let edges = [
        0,
        1,
        2,
        151,
        152,
        500,
        BIN_ITEMS - 1,
        BIN_ITEMS,
        BIN_ITEMS + 1,
        3 * BIN_ITEMS + 7,
    ];
    for (i, n) in edges.into_iter().enumerate() {
        round_trip(n, i as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn round_trips_at_random_sizes(
        n in prop_oneof![0usize..3000, BIN_ITEMS - 40..BIN_ITEMS + 40],
        seed in any::<u64>(),
    ) {
        round_trip(n, seed);
    }
}

/// Bins take their randomness from per-bin seeds drawn in order, so the
/// table does not depend on how many threads encode it.
#[test]
fn tables_do_not_depend_on_thread_count() {
    let n = 5 * BIN_ITEMS / 2;
    let mut rng = StdRng::seed_from_u64(21);
    let (keys, values) = random_pairs(n, &mut rng);
    let okvs = okvs_for(n, 3);
    let encode_on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        let mut fixed = StdRng::seed_from_u64(22);
        pool.install(|| okvs.encode(&keys, &values, &mut fixed))
            .expect("encode")
    };
    assert_eq!(encode_on(1), encode_on(2));
}

/// Zero failures over many random instances at small sizes, where each
/// encode is cheap (the bound says at most 2^-40 each; this checks that no
/// gross error makes failures common).
#[test]
fn many_seeds_never_fail() {
    let cases = [
        (0usize, 200usize),
        (50, 400),
        (152, 600),
        (400, 600),
        (1500, 300),
        (6000, 80),
        (BIN_ITEMS + 500, 12),
    ];
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut encodes = 0;
    for (n, runs) in cases {
        let params = OkvsParams::new(n).expect("params");
        for _ in 0..runs {
            let okvs = Okvs::new(params.clone(), rng.gen());
            let (keys, values) = random_pairs(n, &mut rng);
            let table = okvs.encode(&keys, &values, &mut rng).expect("no failure");
            let probe = n / 2;
            if n > 0 {
                assert_eq!(
                    okvs.decode_one(&table, keys[probe]).expect("decode"),
                    values[probe]
                );
            }
            encodes += 1;
        }
    }
    assert_eq!(encodes, 2192);
}

/// An under-sized table (rate 1.0) must fail, and fail with an error.
#[test]
fn overfull_tables_fail_cleanly() {
    let n = 2000;
    let params = OkvsParams::unchecked(n, 1, n, BAND_WIDTH);
    let mut rng = StdRng::seed_from_u64(3);
    let (keys, values) = random_pairs(n, &mut rng);
    let okvs = Okvs::new(params, [1; 16]);
    assert_eq!(
        okvs.encode(&keys, &values, &mut rng),
        Err(OkvsError::EncodeFailed(40))
    );
}

/// Non-members decode to values whose bits are balanced: each of the 128
/// bit positions over 2^14 non-member keys. Hoeffding: a deviation of 384
/// ones from 8192 has probability at most 2 exp(-2 * 384^2 / 2^14) < 2^-24
/// per bit, so the fixed tolerance would hold for almost any seed (and the
/// seeded RNG makes the test deterministic).
#[test]
fn non_members_decode_to_balanced_bits() {
    const PROBES: usize = 1 << 14;
    const TOLERANCE: usize = 384;
    let mut rng = StdRng::seed_from_u64(11);
    let n = 3 * BIN_ITEMS / 2;
    let (keys, _) = random_pairs(n, &mut rng);
    let values = vec![0u128; n]; // the most structured input
    let okvs = okvs_for(n, 4);
    let table = okvs.encode(&keys, &values, &mut rng).expect("encode");
    let probes: Vec<u128> = (0..PROBES).map(|_| rng.gen()).collect();
    let mut out = vec![0u128; PROBES];
    okvs.decode(&table, &probes, &mut out).expect("decode");
    for bit in 0..128 {
        let ones = out.iter().filter(|v| (*v >> bit) & 1 == 1).count();
        assert!(
            ones.abs_diff(PROBES / 2) <= TOLERANCE,
            "bit {bit}: {ones} ones"
        );
    }
}

/// Encoding is linear in the values for fixed randomness (the table is
/// `S v + T r`), and decoding is linear in the table.
#[test]
fn encode_and_decode_are_linear() {
    let n = 2 * BIN_ITEMS + 100;
    let mut rng = StdRng::seed_from_u64(5);
    let (keys, v1) = random_pairs(n, &mut rng);
    let (_, v2) = random_pairs(n, &mut rng);
    let v12: Vec<u128> = v1.iter().zip(&v2).map(|(a, b)| a ^ b).collect();
    let okvs = okvs_for(n, 6);
    let encode = |values: &[u128]| {
        let mut fixed = StdRng::seed_from_u64(77);
        okvs.encode(&keys, values, &mut fixed).expect("encode")
    };
    let (t1, t2, t12, t0) = (encode(&v1), encode(&v2), encode(&v12), encode(&vec![0; n]));
    for i in 0..t0.len() {
        assert_eq!(t1[i] ^ t2[i] ^ t12[i], t0[i]);
    }
    let sum: Vec<u128> = t1.iter().zip(&t2).map(|(a, b)| a ^ b).collect();
    let probes: Vec<u128> = (0..1000)
        .map(|_| rng.gen())
        .chain(keys[..1000].iter().copied())
        .collect();
    let decode = |table: &[u128]| {
        let mut out = vec![0u128; probes.len()];
        okvs.decode(table, &probes, &mut out).expect("decode");
        out
    };
    let (d1, d2, ds) = (decode(&t1), decode(&t2), decode(&sum));
    for i in 0..probes.len() {
        assert_eq!(d1[i] ^ d2[i], ds[i]);
    }
}

#[test]
fn caller_errors_are_reported() {
    let mut rng = StdRng::seed_from_u64(8);
    let okvs = okvs_for(10, 1);
    let err = okvs.encode(&[1, 2], &[1], &mut rng);
    assert_eq!(err, Err(OkvsError::LengthMismatch { keys: 2, values: 1 }));
    let many: Vec<u128> = (0..11).collect();
    let err = okvs.encode(&many, &many, &mut rng);
    assert_eq!(
        err,
        Err(OkvsError::OverCapacity {
            keys: 11,
            capacity: 10
        })
    );
    let err = okvs.encode(&[5, 6, 5], &[1, 2, 3], &mut rng);
    assert_eq!(
        err,
        Err(OkvsError::DuplicateKey {
            first: 0,
            second: 2
        })
    );
    let table = okvs
        .encode(&[5, 6, 5], &[1, 2, 1], &mut rng)
        .expect("exact repeats are fine");
    assert_eq!(okvs.decode_one(&table, 5), Ok(1));
    let len = table.len();
    assert_eq!(
        okvs.decode_one(&table[1..], 5),
        Err(OkvsError::TableLength {
            expected: len,
            got: len - 1
        })
    );
    let mut out = [0u128; 1];
    assert_eq!(
        okvs.decode(&table, &[5, 6], &mut out),
        Err(OkvsError::OutputLength { keys: 2, out: 1 })
    );
    assert_eq!(
        OkvsParams::with_security(10, 0),
        Err(OkvsError::Security(0))
    );
}

/// Duplicates spread over bins are found too.
#[test]
fn duplicate_keys_in_large_inputs_are_found() {
    let n = 3 * BIN_ITEMS;
    let mut rng = StdRng::seed_from_u64(9);
    let (mut keys, values) = random_pairs(n, &mut rng);
    keys[n - 1] = keys[17];
    let okvs = okvs_for(n, 2);
    let err = okvs.encode(&keys, &values, &mut rng);
    assert_eq!(
        err,
        Err(OkvsError::DuplicateKey {
            first: 17,
            second: n - 1
        })
    );
}

/// The rate is at most 1.3 from 137 keys to 2^24 and every parameter set
/// meets its bound; up to 151 keys the rows are dense over `n + 41` columns.
#[test]
fn parameters_meet_rate_and_bound() {
    let mut sizes: Vec<usize> = (137..2500).step_by(13).collect();
    sizes.extend([5000, 10_000, 50_000, 100_000, 1 << 24]);
    sizes.extend((12..24).flat_map(|k| [(1usize << k) - 1, 1 << k, 3 << (k - 1)]));
    for n in sizes {
        let p = OkvsParams::new(n).expect("params");
        assert!(p.rate() <= 1.3, "n {n}: rate {}", p.rate());
        assert!(p.failure_bound_log2() <= -40.0, "n {n}");
        assert_eq!(p.table_len(), p.bins() * p.bin_len());
    }
    for n in [0, 1, 100, 151] {
        let p = OkvsParams::new(n).expect("params");
        assert_eq!((p.table_len(), p.band_width()), (n + 41, n + 41));
    }
    assert_eq!(
        OkvsParams::new(152).expect("params").band_width(),
        BAND_WIDTH
    );
    for (n, security) in [(5000, 80), (100_000, 64), (300, 20), (3, 128)] {
        let p = OkvsParams::with_security(n, security).expect("params");
        assert!(
            p.failure_bound_log2() <= -f64::from(security),
            "n {n}, {security} bits"
        );
    }
    assert_eq!(
        OkvsParams::with_security(10, 129),
        Err(OkvsError::Security(129))
    );
}

/// The single-key row function agrees with the batched one.
#[test]
fn single_and_batched_rows_agree() {
    let okvs = okvs_for(5 * BIN_ITEMS, 12);
    let keys: Vec<u128> = (0..100u128)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
        .collect();
    let mut rows = vec![hash::Row::default(); keys.len()];
    okvs.hasher.rows(&keys, &mut rows);
    for (k, r) in keys.iter().zip(&rows) {
        assert_eq!(okvs.hasher.row(*k), *r);
    }
    let mut bins = vec![0u32; keys.len()];
    okvs.hasher.bins(&keys, &mut bins);
    assert!(bins.iter().zip(&rows).all(|(&b, r)| b == r.bin));
    assert!(bins.iter().any(|&b| b != bins[0]));
}

#[test]
fn bin_by_bin_equals_the_whole_table() {
    let mut rng = StdRng::seed_from_u64(11);
    for n in [100, 20_000, 70_000] {
        let (keys, values) = random_pairs(n, &mut rng);
        let okvs = okvs_for(n, 5);
        let (bins, bin_len) = (okvs.params().bins(), okvs.params().bin_len());
        // The same seeds drawn either way: the same table.
        let whole = okvs
            .encode(&keys, &values, &mut StdRng::seed_from_u64(1))
            .expect("encode");
        let mut parts = vec![0u128; whole.len()];
        let mut encoder = okvs
            .encoder(&keys, &values, Fill::Random(&mut StdRng::seed_from_u64(1)))
            .expect("encoder");
        let mut decoder = okvs.decoder(&keys);
        for first in (0..bins).step_by(2) {
            let bins = first..(first + 2).min(bins);
            let cols = &mut parts[bins.start * bin_len..bins.end * bin_len];
            encoder.encode_bins(bins.clone(), cols).expect("bins");
            decoder.decode_bins(bins, cols).expect("decode bins");
        }
        assert_eq!(parts, whole, "n = {n}");
        let mut out = vec![0u128; n];
        decoder.finish(&mut out).expect("finish");
        assert_eq!(out, values, "n = {n}");
    }
}

#[test]
fn values_made_from_keys_encode_as_given_values() {
    let mut rng = StdRng::seed_from_u64(13);
    // A value function: anything of the key alone.
    let f = |k: u128| k.rotate_left(17) ^ 0x5555;
    for n in [1, 100, 70_000] {
        let keys: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
        let values: Vec<u128> = keys.iter().map(|&k| f(k)).collect();
        let okvs = okvs_for(n, 5);
        let given = okvs
            .encode(&keys, &values, &mut StdRng::seed_from_u64(2))
            .expect("encode");
        let value = |keys: &[u128], out: &mut [u128]| {
            keys.iter().zip(out).for_each(|(&k, o)| *o = f(k));
        };
        let encoder = okvs.encoder_of(&keys, value, Fill::Random(&mut StdRng::seed_from_u64(2)));
        let made = every_bin(&okvs, encoder.expect("encoder"));
        assert_eq!(made, given, "n = {n}");
        let mut out = vec![0u128; n];
        okvs.decode(&made, &keys, &mut out).expect("decode");
        assert_eq!(out, values, "n = {n}");
    }
}

/// A zero fill sets only pivot columns (at most one a key) and decodes
/// the same values.
#[test]
fn a_zero_fill_sets_only_pivot_columns() {
    let mut rng = StdRng::seed_from_u64(14);
    for n in [1, 300, 50_000] {
        let (keys, values) = random_pairs(n, &mut rng);
        let okvs = okvs_for(n, 6);
        let table = every_bin(
            &okvs,
            okvs.encoder(&keys, &values, Fill::Zero).expect("encoder"),
        );
        let set = table.iter().filter(|&&c| c != 0).count();
        assert!(set <= n, "n = {n}: {set} entries set");
        let mut out = vec![0u128; n];
        okvs.decode(&table, &keys, &mut out).expect("decode");
        assert_eq!(out, values, "n = {n}");
    }
}

#[test]
fn bins_out_of_order_or_missing_are_refused() {
    let mut rng = StdRng::seed_from_u64(12);
    let (keys, values) = random_pairs(40_000, &mut rng);
    let okvs = okvs_for(keys.len(), 6);
    let bin_len = okvs.params().bin_len();
    assert!(okvs.params().bins() >= 3);
    let table = okvs.encode(&keys, &values, &mut rng).expect("encode");
    let mut decoder = okvs.decoder(&keys);
    let skipped = decoder.decode_bins(1..2, &table[bin_len..2 * bin_len]);
    assert!(matches!(skipped, Err(OkvsError::BinOrder { .. })));
    let short = decoder.decode_bins(0..1, &table[..bin_len - 1]);
    assert!(matches!(short, Err(OkvsError::TableLength { .. })));
    decoder.decode_bins(0..1, &table[..bin_len]).expect("bin 0");
    let mut out = vec![0u128; keys.len()];
    assert!(matches!(
        decoder.finish(&mut out),
        Err(OkvsError::BinOrder { .. })
    ));
}

/// An encoder's decoder reads its keys from another table of the same
/// OKVS, and `map_decoded` sees each decoded key with its value, bins
/// decoded only.
#[test]
fn an_encoders_keys_decode_from_another_table() {
    let mut rng = StdRng::seed_from_u64(13);
    let (keys, values) = random_pairs(40_000, &mut rng);
    let okvs = okvs_for(keys.len(), 7);
    let (bins, bin_len) = (okvs.params().bins(), okvs.params().bin_len());
    let other: Vec<u128> = (0..okvs.params().table_len()).map(|_| rng.gen()).collect();
    let mut table = vec![0u128; okvs.params().table_len()];
    let mut encoder = okvs
        .encoder(&keys, &values, Fill::Random(&mut rng))
        .expect("encoder");
    encoder.encode_bins(0..bins, &mut table).expect("encode");
    let mut decoder = encoder.into_decoder();
    let early = decoder.map_decoded(0..1, |_, _| {});
    assert!(matches!(early, Err(OkvsError::BinOrder { .. })));
    decoder.decode_bins(0..1, &other[..bin_len]).expect("bin 0");
    decoder
        .decode_bins(1..bins, &other[bin_len..])
        .expect("the rest");
    // Each value becomes its key's decoded value XOR the key itself.
    decoder
        .map_decoded(0..bins, |keys, values| {
            for (v, k) in values.iter_mut().zip(keys) {
                *v ^= k;
            }
        })
        .expect("map");
    let mut out = vec![0u128; keys.len()];
    decoder.finish(&mut out).expect("finish");
    for ((k, o), i) in keys.iter().zip(&out).zip(0..) {
        let want = okvs.decode_one(&other, *k).expect("one") ^ k;
        assert_eq!(*o, want, "key {i}");
    }
}
