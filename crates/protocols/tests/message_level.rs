//! The message level of the filter and HE protocols: a client stepped by
//! hand (`query_stepper`) whose bytes a caller carries to
//! `Router::respond`, each request over a fresh in-memory connection, finds
//! what a networked client finds; a bad request comes back as an error the
//! client's step reports.

#![cfg(all(feature = "filter", feature = "he"))]

use std::collections::HashMap;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use psikit_io::Item;
use psikit_primitives::oprf::ServerKey;
use psikit_protocols::filter_psi::{
    self, tags_for_items, FilterClient, FilterConfig, FilterService, ServerState, SyncKind,
};
use psikit_protocols::he_psi::facade::{self as he_facade, QueryOptions};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::{HeService, HeState, Row};
use psikit_protocols::service::{Router, ServerLimits, Service};
use psikit_protocols::{Error, NoProgress};
use psikit_transport::{Limits, Stepper};

mod common;

const PARAMS_256K: &str = include_str!("../src/he_psi/apsi-params/256K-1024.json");

fn limits() -> Limits {
    common::limits(Duration::from_secs(30))
}

fn router(service: Arc<dyn Service>) -> Router {
    let mut router = Router::new(ServerLimits::default());
    router.register(service).unwrap();
    router
}

/// Steps `client` to its end, carrying each request to `router` as an
/// exchange of its own; also returns how many exchanges it took.
async fn exchange<T>(
    router: &Router,
    mut client: Stepper<Result<T, Error>>,
) -> (Result<T, Error>, usize) {
    let mut exchanges = 0;
    let mut answer = Vec::new();
    loop {
        client.push(&answer);
        if let Poll::Ready(out) = client.advance() {
            return (out, exchanges);
        }
        let request = client.take_outgoing();
        assert!(!request.is_empty(), "a waiting client has sent a request");
        answer = router.respond(&request, limits()).await;
        exchanges += 1;
    }
}

fn keys(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

fn tags(key: &ServerKey, keys: &[Vec<u8>]) -> Vec<[u8; 16]> {
    let items: Vec<Item> = (keys.iter().zip(1..))
        .map(|(k, row)| Item {
            key: k.clone(),
            row,
        })
        .collect();
    tags_for_items(key, &items).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_queries_by_message_find_the_intersection_and_follow_updates() {
    let server = keys("s", 0..3000);
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let server_tags = tags(&key, &server);
    let (mut state, _) = ServerState::build(key, server_tags, FilterConfig::default()).unwrap();
    state.save(&state_dir).unwrap();
    let service = Arc::new(FilterService::open(&state_dir, ServerLimits::default()).unwrap());
    let router = router(service.clone());

    let cache = dir.path().join("filter.cache");
    let client: Vec<Vec<u8>> = keys("s", 2900..3000)
        .into_iter()
        .chain(keys("c", 0..50))
        .collect();
    let query = || {
        let c = FilterClient::with_cache_file(&cache, 1 << 30).unwrap();
        filter_psi::query_stepper(c, client.clone(), limits(), Arc::new(NoProgress)).map(|(_, r)| r)
    };
    let (done, exchanges) = exchange(&router, query()).await;
    let done = done.unwrap();
    assert_eq!(exchanges, 2, "one sync, one query");
    assert_eq!(done.syncs[0].kind, SyncKind::Full);
    let found = done.outcome.matches.iter().filter(|&&m| m).count();
    assert!(
        (100..=101).contains(&found),
        "the 100 shared items, at most a rare false positive: {found}"
    );
    assert!(done.outcome.matches[..100].iter().all(|&m| m));

    // The server adds ten of the client's items: the next query, from the
    // cache file, fetches a delta and finds them.
    let mut state = ServerState::load(&state_dir).unwrap();
    let added = tags(state.key(), &keys("c", 0..10));
    state.update(added, Vec::new()).unwrap();
    state.save(&state_dir).unwrap();
    assert!(service.reload().unwrap().is_some());
    let (done, _) = exchange(&router, query()).await;
    let done = done.unwrap();
    assert_eq!(done.syncs[0].kind, SyncKind::Delta);
    assert!(done.outcome.matches[..110].iter().all(|&m| m));
    assert!(done.outcome.matches[110..].iter().filter(|&&m| m).count() <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn he_queries_by_message_return_matches_with_labels() {
    let rows: Vec<Row> = (0..2000)
        .map(|i| Row {
            key: format!("s{i}").into_bytes(),
            label: format!("label of {i}").into_bytes(),
        })
        .collect();
    let params = PsiParams::from_apsi_json(PARAMS_256K).unwrap();
    let mut state = HeState::create(params, 16, true).unwrap();
    state.insert(&rows, &mut |_| Ok(())).unwrap();
    let router = router(Arc::new(HeService::new(state, ServerLimits::default())));
    let labels: HashMap<Vec<u8>, Vec<u8>> = rows.into_iter().map(|r| (r.key, r.label)).collect();

    let client: Vec<Vec<u8>> = keys("c", 0..40)
        .into_iter()
        .chain(keys("s", 1980..2000))
        .collect();
    let stepper = he_facade::query_stepper(client.clone(), QueryOptions::default(), limits());
    let (session, exchanges) = exchange(&router, stepper).await;
    let session = session.unwrap();
    assert_eq!(exchanges, 3, "parameters, OPRF, query");
    let found: Vec<(usize, Vec<u8>)> = session
        .matches
        .into_iter()
        .map(|m| (m.index, m.label.unwrap_or_default()))
        .collect();
    let truth: Vec<(usize, Vec<u8>)> = (client.iter().enumerate())
        .filter_map(|(i, k)| labels.get(k).map(|l| (i, l.clone())))
        .collect();
    assert_eq!(found, truth);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_request_is_answered_with_an_error_the_client_reports() {
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let (state, _) = ServerState::build(key, Vec::new(), FilterConfig::default()).unwrap();
    let router = router(Arc::new(FilterService::new(state, ServerLimits::default())));
    let client = FilterClient::in_memory(1 << 30);
    let mut stepper =
        filter_psi::query_stepper(client, keys("c", 0..5), limits(), Arc::new(NoProgress))
            .map(|(_, r)| r);
    assert!(stepper.advance().is_pending());
    let mut request = stepper.take_outgoing();
    // Cut the sync request short: the server answers with an error.
    request.truncate(request.len() - 1);
    let answer = router.respond(&request, limits()).await;
    stepper.push(&answer);
    stepper.peer_closed();
    match stepper.advance() {
        Poll::Ready(Err(e)) => assert!(!e.to_string().is_empty()),
        Poll::Ready(Ok(_)) => panic!("a cut request cannot succeed"),
        Poll::Pending => panic!("the client saw the answer and the close"),
    }
    // Garbage is answered too, never with silence.
    assert!(!router
        .respond(b"\x00\x00\x00\x03\x01\x01", limits())
        .await
        .is_empty());
}
