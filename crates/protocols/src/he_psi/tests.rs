//! End-to-end tests of the HE protocol's computation (sender database,
//! query, answer, decoding) against a plaintext intersection with labels.

use std::collections::HashMap;
use std::sync::Mutex;

use psikit_he::wire;
use psikit_primitives::oprf::Output;
use rand::rngs::OsRng;
use rand::{Rng, SeedableRng};

use super::params::PsiParams;
use crate::common::Match;
use crate::he_psi::client::receiver::Receiver;
use crate::he_psi::common::answer::ResultPackage;
use crate::he_psi::server::sender::Sender;
use crate::he_psi::server::sender_db::tests::random_outputs;
use crate::he_psi::server::sender_db::{DbEntry, SenderDb};

pub(crate) const PARAMS_256K: &str = include_str!("apsi-params/256K-1024.json");

/// Runs one full query (with follow-up queries for cuckoo leftovers) and
/// returns the matches by client index.
pub(crate) fn run_query(sender: &Sender, client: &[Output], max_label: usize) -> Vec<Match> {
    let he = sender.he();
    let receiver = Receiver::new(sender.db().params().clone(), max_label).unwrap();
    // Everything crosses the wire encoding, as between two processes.
    let ev = sender
        .evaluator(&receiver.relin_key().to_bytes().unwrap())
        .unwrap();
    let rhe = receiver.he();
    let mut pending: Vec<usize> = (0..client.len()).collect();
    let mut all = Vec::new();
    while !pending.is_empty() {
        let outputs: Vec<Output> = pending.iter().map(|&i| client[i]).collect();
        let (mut state, query) = receiver.query(&outputs, &mut OsRng).unwrap();
        let query = query
            .iter()
            .map(|cts| {
                cts.iter()
                    .map(|ct| {
                        let bytes = wire::encode_query_ct(ct).unwrap();
                        wire::decode_query_ct(he, &bytes).unwrap()
                    })
                    .collect()
            })
            .collect();
        let packages: Mutex<Vec<ResultPackage>> = Mutex::new(Vec::new());
        sender
            .answer(&ev, query, |p| {
                packages.lock().unwrap().push(p);
                Ok(())
            })
            .unwrap();
        let drop = wire::safe_drop_bits(rhe);
        let decode = |ct: &psikit_he::Ciphertext| {
            let bytes = wire::encode_result_ct_dropped(ct, drop).unwrap();
            wire::decode_result_ct_dropped(rhe, &bytes, drop).unwrap()
        };
        let received: Vec<ResultPackage> = packages
            .into_inner()
            .unwrap()
            .iter()
            .map(|p| ResultPackage {
                bundle_idx: p.bundle_idx,
                matching: decode(&p.matching),
                labels: p.labels.iter().map(decode).collect(),
            })
            .collect();
        receiver.process(&mut state, &received).unwrap();
        let next: Vec<usize> = state.leftovers.iter().map(|&i| pending[i]).collect();
        for m in Receiver::matches(state) {
            all.push(Match {
                index: pending[m.index],
                label: m.label,
            });
        }
        assert!(next.len() < pending.len(), "each round places some items");
        pending = next;
    }
    all.sort_by_key(|m| m.index);
    all
}

fn expected(client: &[Output], truth: &HashMap<Output, Vec<u8>>, labeled: bool) -> Vec<Match> {
    client
        .iter()
        .enumerate()
        .filter_map(|(index, o)| {
            truth.get(o).map(|l| Match {
                index,
                label: labeled.then(|| l.clone()),
            })
        })
        .collect()
}

fn build(
    params: &PsiParams,
    items: &[Output],
    labels: &[Vec<u8>],
    max_label: usize,
    cache: bool,
) -> Sender {
    let entries: Vec<DbEntry> = items
        .iter()
        .zip(labels)
        .map(|(o, l)| DbEntry { oprf: *o, label: l })
        .collect();
    let mut db = SenderDb::new(params.clone(), max_label).unwrap();
    db.insert_or_assign(&entries).unwrap();
    Sender::new(db, cache).unwrap()
}

#[test]
fn labeled_query_matches_plaintext_intersection() {
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let server = random_outputs(&mut rng, 3000);
    let labels: Vec<Vec<u8>> = server
        .iter()
        .map(|_| {
            let len = rng.gen_range(0..=16);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect();
    let db = build(&params, &server, &labels, 16, true);
    let truth: HashMap<Output, Vec<u8>> = server.iter().copied().zip(labels).collect();
    let mut client = random_outputs(&mut rng, 40);
    client.extend_from_slice(&server[100..140]);
    let got = run_query(&db, &client, 16);
    assert_eq!(got, expected(&client, &truth, true));
    assert_eq!(got.len(), 40);
}

#[test]
fn unlabeled_query_without_cache_and_empty_cases() {
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(22);
    let server = random_outputs(&mut rng, 500);
    let none = vec![Vec::new(); server.len()];
    let db = build(&params, &server, &none, 0, false);
    let truth: HashMap<Output, Vec<u8>> = server.iter().map(|o| (*o, Vec::new())).collect();
    // Full overlap, disjoint, and empty client sets.
    let client = server[..200].to_vec();
    assert_eq!(run_query(&db, &client, 0), expected(&client, &truth, false));
    let client = random_outputs(&mut rng, 50);
    assert!(run_query(&db, &client, 0).is_empty());
    assert!(run_query(&db, &[], 0).is_empty());
    // An empty database answers with nothing.
    let empty = Sender::new(SenderDb::new(params, 0).unwrap(), true).unwrap();
    assert!(run_query(&empty, &server[..10], 0).is_empty());
}

#[test]
fn kilobyte_labels_round_trip() {
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let server = random_outputs(&mut rng, 200);
    let labels: Vec<Vec<u8>> = server
        .iter()
        .enumerate()
        .map(|(i, _)| (0..[0, 1, 32, 1024][i % 4]).map(|_| rng.gen()).collect())
        .collect();
    let db = build(&params, &server, &labels, 1024, true);
    let truth: HashMap<Output, Vec<u8>> = server.iter().copied().zip(labels).collect();
    let client = server[..8].to_vec();
    assert_eq!(
        run_query(&db, &client, 1024),
        expected(&client, &truth, true)
    );
}

#[test]
fn client_set_larger_than_one_table_takes_several_rounds() {
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(24);
    let server = random_outputs(&mut rng, 1500);
    let none = vec![Vec::new(); server.len()];
    let db = build(&params, &server, &none, 0, true);
    let truth: HashMap<Output, Vec<u8>> = server.iter().map(|o| (*o, Vec::new())).collect();
    // 2500 items cannot fit one table of 1638 bins.
    let mut client = server.clone();
    client.extend(random_outputs(&mut rng, 1000));
    assert!(client.len() > params.table.table_size as usize);
    assert_eq!(run_query(&db, &client, 0), expected(&client, &truth, false));
}
