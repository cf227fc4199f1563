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
    let edges = [0, 1, 2, 151, 152, 500, BIN_ITEMS - 1, BIN_ITEMS, BIN_ITEMS + 1, 3 * BIN_ITEMS + 7];
    for (i, n) in edges.into_iter().enumerate() {
        round_trip(n, i as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn round_trips_at_random_sizes(n in 0usize..3000, seed in any::<u64>()) {
        round_trip(n, seed);
    }
}
