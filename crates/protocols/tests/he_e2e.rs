//! End-to-end tests of the HE protocol over TCP on loopback: labeled and
//! unlabeled databases, updates, and hostile clients, checked against the
//! plaintext intersection.

#![cfg(feature = "he")]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::he_psi::facade::{Client, QueryOptions, Session};
use psikit_protocols::he_psi::messages::{
    OprfRequest, ParamsRequest, ParamsResponse, QueryCt, QueryHeader,
};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::{HeClient, HeService, HeState, Row};
use psikit_protocols::service::ServerLimits;
use psikit_protocols::NoProgress;
use psikit_transport::net::connect;
use psikit_transport::{Channel, Frame, Limits, Message, TransportError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PARAMS_256K: &str = include_str!("../src/he_psi/apsi-params/256K-1024.json");

mod common;
use common::TestServer;

fn limits() -> Limits {
    common::limits(Duration::from_secs(30))
}

async fn start(state: HeState) -> TestServer<HeService> {
    let service = Arc::new(HeService::new(
        state,
        ServerLimits {
            max_query_items: 5000,
            max_concurrent_queries: 2,
            ..ServerLimits::default()
        },
    ));
    common::start(service, limits()).await
}

fn random_rows(rng: &mut StdRng, n: usize, max_label: usize) -> Vec<Row> {
    (0..n)
        .map(|i| Row {
            key: format!("user-{i}-{}@example.com", rng.gen::<u32>()).into_bytes(),
            label: (0..rng.gen_range(0..=max_label))
                .map(|_| rng.gen())
                .collect(),
        })
        .collect()
}

fn state_with(rows: &[Row], max_label: usize) -> HeState {
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut state = HeState::create(params, max_label, true).unwrap();
    state.insert(rows, &mut |_| Ok(())).unwrap();
    state
}

/// The expected matches: (client index, label) for client keys the server
/// holds.
fn truth(
    server: &HashMap<Vec<u8>, Vec<u8>>,
    client: &[Vec<u8>],
    labeled: bool,
) -> Vec<(usize, Option<Vec<u8>>)> {
    client
        .iter()
        .enumerate()
        .filter_map(|(i, k)| server.get(k).map(|l| (i, labeled.then(|| l.clone()))))
        .collect()
}

async fn run(addr: &str, client: &[Vec<u8>]) -> Vec<(usize, Option<Vec<u8>>)> {
    let mut ch = connect(addr, None, limits()).await.unwrap();
    let c = HeClient::connect(&mut ch).await.unwrap();
    let out = c.query(&mut ch, client).await.unwrap();
    out.matches
        .into_iter()
        .map(|m| (m.index, m.label))
        .collect()
}

/// A query's times split its whole time: the client's own phases and its
/// waiting add up to it, and the server's evaluation (as the server
/// reports it) fits in the client's waiting and decrypting, with the
/// server in this process on the same rayon pool as the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_querys_times_add_up_and_the_server_reports_its_evaluation() {
    let mut rng = StdRng::seed_from_u64(37);
    let rows = random_rows(&mut rng, 3000, 16);
    let server = start(state_with(&rows, 16)).await;
    let client: Vec<Vec<u8>> = rows[..400].iter().map(|r| r.key.clone()).collect();
    let mut ch = connect(&server.addr, None, limits()).await.unwrap();
    let c = HeClient::connect(&mut ch).await.unwrap();
    let start = std::time::Instant::now();
    let out = c.query(&mut ch, &client).await.unwrap();
    let total = start.elapsed().as_secs_f64();
    assert_eq!(out.matches.len(), 400);
    let t = out.times;
    let parts = [t.oprf, t.encrypt, t.decrypt, t.waiting].map(|d| d.as_secs_f64());
    let sum: f64 = parts.iter().sum();
    assert!(parts.iter().all(|&p| p > 0.0), "{t:?}");
    assert!(
        (sum - total).abs() <= 0.02 * total + 0.002,
        "{sum} against {total}: {t:?}"
    );
    let server_eval = t.server.as_secs_f64();
    assert!(server_eval > 0.0, "{t:?}");
    let room = (t.waiting + t.decrypt).as_secs_f64();
    assert!(server_eval <= 1.05 * room + 0.002, "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labeled_queries_over_tcp_with_updates() {
    let mut rng = StdRng::seed_from_u64(31);
    let rows = random_rows(&mut rng, 2000, 32);
    let server = start(state_with(&rows, 32)).await;
    let mut map: HashMap<Vec<u8>, Vec<u8>> = rows
        .iter()
        .map(|r| (r.key.clone(), r.label.clone()))
        .collect();

    // Some members, some strangers, a unicode key; more items than fit one
    // table's load, so several rounds may run.
    let mut client: Vec<Vec<u8>> = rows[..300].iter().map(|r| r.key.clone()).collect();
    client.extend((0..300).map(|i| format!("stranger-{i}").into_bytes()));
    client.push("ünïcødé@example.com".as_bytes().to_vec());
    assert_eq!(run(&server.addr, &client).await, truth(&map, &client, true));

    // Relabel, remove and insert, then query again.
    let mut state = state_with(&rows, 32);
    let relabel: Vec<Row> = rows[..50]
        .iter()
        .map(|r| Row {
            key: r.key.clone(),
            label: b"new label".to_vec(),
        })
        .collect();
    let fresh = vec![Row {
        key: "ünïcødé@example.com".as_bytes().to_vec(),
        label: vec![7; 32],
    }];
    state.insert(&relabel, &mut |_| Ok(())).unwrap();
    state.insert(&fresh, &mut |_| Ok(())).unwrap();
    let removed: Vec<Vec<u8>> = rows[50..100].iter().map(|r| r.key.clone()).collect();
    let stats = state.remove(&removed).unwrap();
    assert_eq!(stats.removed, 50);
    server.service.publish(state);
    for r in relabel.iter().chain(&fresh) {
        map.insert(r.key.clone(), r.label.clone());
    }
    for k in &removed {
        map.remove(k);
    }
    assert_eq!(run(&server.addr, &client).await, truth(&map, &client, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_client_reuses_its_keys_and_refreshes_them_for_a_new_database() {
    let mut rng = StdRng::seed_from_u64(33);
    let rows = random_rows(&mut rng, 1000, 8);
    let server = start(state_with(&rows, 8)).await;
    let map: HashMap<Vec<u8>, Vec<u8>> = (rows.iter())
        .map(|r| (r.key.clone(), r.label.clone()))
        .collect();
    let mut client_keys: Vec<Vec<u8>> = rows[..40].iter().map(|r| r.key.clone()).collect();
    client_keys.extend((0..40).map(|i| format!("stranger-{i}").into_bytes()));
    let found = |s: Session| -> Vec<(usize, Option<Vec<u8>>)> {
        s.matches.into_iter().map(|m| (m.index, m.label)).collect()
    };
    let addr = ServerAddr {
        addr: server.addr.clone(),
        tls: None,
        limits: limits(),
    };
    let mut client = Client::new(addr);
    let options = QueryOptions::default();
    let first = client
        .query(&client_keys, &options, &NoProgress)
        .await
        .unwrap();
    assert!(first.setup > Duration::ZERO);
    assert_eq!(found(first), truth(&map, &client_keys, true));
    let second = client
        .query(&client_keys, &options, &NoProgress)
        .await
        .unwrap();
    assert_eq!(second.setup, Duration::ZERO, "the kept keys were used");
    assert_eq!(found(second), truth(&map, &client_keys, true));

    // The same rows under a new OPRF key: the kept keys are stale, the
    // client is told so, fetches the new parameters and retries.
    server.service.publish(state_with(&rows, 8));
    let third = client
        .query(&client_keys, &options, &NoProgress)
        .await
        .unwrap();
    assert!(
        third.setup > Duration::ZERO,
        "the parameters were fetched again"
    );
    assert_eq!(found(third), truth(&map, &client_keys, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlabeled_full_overlap_and_empty_client() {
    let mut rng = StdRng::seed_from_u64(32);
    let rows = random_rows(&mut rng, 1000, 0);
    let server = start(state_with(&rows, 0)).await;
    let map: HashMap<Vec<u8>, Vec<u8>> = rows.iter().map(|r| (r.key.clone(), Vec::new())).collect();
    let client: Vec<Vec<u8>> = rows.iter().map(|r| r.key.clone()).collect();
    assert_eq!(
        run(&server.addr, &client).await,
        truth(&map, &client, false)
    );
    assert!(run(&server.addr, &[]).await.is_empty());
}

async fn expect_peer_error(ch: &mut Channel, needle: &str) {
    match ch.recv().await {
        Err(TransportError::Peer(msg)) => assert!(msg.text.contains(needle), "{}", msg.text),
        Err(e) => panic!("expected a peer error mentioning {needle:?}, got {e}"),
        Ok(f) => panic!("expected a peer error, got kind {}", f.kind),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_get_clear_errors_and_others_are_served() {
    let mut rng = StdRng::seed_from_u64(33);
    let rows = random_rows(&mut rng, 300, 8);
    let server = start(state_with(&rows, 8)).await;

    // Too many OPRF items.
    let mut ch = connect(&server.addr, None, limits()).await.unwrap();
    let mut payload = 6000u32.to_be_bytes().to_vec();
    payload.extend(vec![0u8; 32 * 6000]);
    let frame = Frame::new(OprfRequest::PROTOCOL, OprfRequest::KIND, payload);
    ch.send(&frame).await.unwrap();
    expect_peer_error(&mut ch, "OPRF items").await;

    // A query for another database.
    let mut ch = connect(&server.addr, None, limits()).await.unwrap();
    ch.send_msg(&ParamsRequest).await.unwrap();
    ch.recv_msg::<ParamsResponse>(()).await.unwrap();
    let he = PsiParams::from_apsi_json(PARAMS_256K)
        .unwrap()
        .he_params()
        .unwrap();
    let header = QueryHeader {
        db_id: [9; 32],
        relin_key: vec![0; psikit_he::wire::relin_key_size(&he)],
    };
    ch.send_msg(&header).await.unwrap();
    expect_peer_error(&mut ch, "another database").await;

    // A truncated query ciphertext under the right database id.
    let mut ch = connect(&server.addr, None, limits()).await.unwrap();
    let client = HeClient::connect(&mut ch).await.unwrap();
    let _ = client;
    let db_id = server.service.snapshot().db_id();
    let header = QueryHeader {
        db_id,
        relin_key: vec![0; psikit_he::wire::relin_key_size(&he)],
    };
    ch.send_msg(&header).await.unwrap();
    ch.send(&Frame::new(QueryCt::PROTOCOL, QueryCt::KIND, vec![1, 2, 3]))
        .await
        .unwrap();
    expect_peer_error(&mut ch, "").await;

    // An invalid blinded element.
    let mut ch = connect(&server.addr, None, limits()).await.unwrap();
    let req = OprfRequest {
        blinded: Vec::new(),
    };
    let mut frame = req.to_frame();
    frame.payload = 1u32
        .to_be_bytes()
        .iter()
        .copied()
        .chain([0xff; 32])
        .collect();
    ch.send(&frame).await.unwrap();
    expect_peer_error(&mut ch, "blinded element").await;

    // The server still answers an honest client.
    let client: Vec<Vec<u8>> = rows[..20].iter().map(|r| r.key.clone()).collect();
    assert_eq!(run(&server.addr, &client).await.len(), 20);
}

#[test]
fn a_state_is_never_saved_next_to_another_databases_key() {
    let dir = tempfile::tempdir().unwrap();
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let first = HeState::create(params.clone(), 0, false).unwrap();
    first.save(dir.path()).unwrap();
    first.save(dir.path()).unwrap();
    let second = HeState::create(params, 0, false).unwrap();
    let err = second.save(dir.path()).err().unwrap().to_string();
    assert!(err.contains("another database"), "{err}");
    let loaded = HeState::load(dir.path(), false).unwrap();
    assert_eq!(loaded.db_id(), first.db_id());
}
