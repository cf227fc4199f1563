//! End-to-end tests of the filter protocol over TCP on loopback, checked
//! against the plaintext intersection, plus hostile and stale clients.

#![cfg(feature = "filter")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use psikit_io::Item;
use psikit_primitives::oprf::ServerKey;
use psikit_protocols::filter_psi::{
    tags_for_items, ClientCache, FilterConfig, FilterService, ServerState, SyncKind, PROTOCOL_ID,
};
use psikit_protocols::service::{Router, ServerLimits};
use psikit_protocols::{NoProgress, Progress};
use psikit_transport::frame::KIND_ERROR;
use psikit_transport::net::{connect, Listener};
use psikit_transport::{Channel, ErrorCode, Frame, Limits, TransportError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::TestServer;

fn limits() -> Limits {
    common::limits(Duration::from_secs(10))
}

fn items(keys: &[Vec<u8>]) -> Vec<Item> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| Item {
            key: k.clone(),
            row: i as u64 + 1,
        })
        .collect()
}

fn state_for(keys: &[Vec<u8>]) -> ServerState {
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let tags = tags_for_items(&key, &items(keys)).unwrap();
    ServerState::build(key, tags, FilterConfig::default())
        .unwrap()
        .0
}

async fn start(state: ServerState, server_limits: ServerLimits) -> TestServer<FilterService> {
    common::start(Arc::new(FilterService::new(state, server_limits)), limits()).await
}

/// Records a sync's download as a progress watcher sees it.
#[derive(Default)]
struct Download(Mutex<Vec<(String, Option<u64>, u64)>>);

impl Progress for Download {
    fn stage(&self, what: &str, total: Option<u64>) {
        self.0.lock().unwrap().push((what.to_owned(), total, 0));
    }

    fn advance(&self, done: u64) {
        if let Some(last) = self.0.lock().unwrap().last_mut() {
            last.2 = done;
        }
    }
}

async fn client(addr: &str) -> (Channel, ClientCache) {
    let mut ch = connect(addr, None, limits()).await.unwrap();
    let mut cache = None;
    let download = Download::default();
    let sync = ClientCache::sync(&mut cache, &mut ch, 1 << 30, &download)
        .await
        .unwrap();
    assert_eq!(sync.kind, SyncKind::Full);
    // The download is one stage counting its bytes to the end.
    let body = sync.body_bytes;
    let seen = download.0.into_inner().unwrap();
    assert_eq!(
        seen,
        vec![("downloading the filter".to_owned(), Some(body), body)]
    );
    (ch, cache.unwrap())
}

/// Random sets with a known overlap; returns (server, client, truth mask).
fn random_sets(
    rng: &mut StdRng,
    n_server: usize,
    n_client: usize,
    overlap: usize,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<bool>) {
    let mut fresh =
        |tag: &str| -> Vec<u8> { format!("{tag}-{:032x}", rng.gen::<u128>()).into_bytes() };
    let server: Vec<Vec<u8>> = (0..n_server).map(|_| fresh("s")).collect();
    let mut client: Vec<(Vec<u8>, bool)> = server[..overlap]
        .iter()
        .map(|k| (k.clone(), true))
        .collect();
    client.extend((overlap..n_client).map(|_| (fresh("c"), false)));
    // Interleave so matches are not all at the front.
    client.sort_by(|a, b| a.0.cmp(&b.0));
    let (keys, truth) = client.into_iter().unzip();
    (server, keys, truth)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_plaintext_intersection_for_varied_sizes() {
    let mut rng = StdRng::seed_from_u64(1);
    for (n_server, n_client, overlap) in [
        (0, 5, 0),
        (1000, 0, 0),
        (1, 1, 1),
        (5000, 700, 300),
        (3000, 3000, 3000),
        (20_000, 1500, 1),
    ] {
        let (server_set, client_set, truth) = random_sets(&mut rng, n_server, n_client, overlap);
        let srv = start(state_for(&server_set), ServerLimits::default()).await;
        let (mut ch, cache) = client(&srv.addr).await;
        let out = cache.query(&mut ch, &client_set).await.unwrap();
        assert_eq!(out.matches, truth, "sizes {n_server}/{n_client}/{overlap}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_set_equal_to_server_set_and_unicode_keys() {
    let keys: Vec<Vec<u8>> = [
        "émile@exämple.com",
        "李雷@例子.中国",
        "😀",
        "plain",
        "Ωμέγα",
        "a\u{0301}",
        "\u{00e1}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let srv = start(state_for(&keys), ServerLimits::default()).await;
    let (mut ch, cache) = client(&srv.addr).await;
    let out = cache.query(&mut ch, &keys).await.unwrap();
    assert!(out.matches.iter().all(|m| *m));
    // Different byte strings (NFD vs NFC, case) are different items.
    let others: Vec<Vec<u8>> = ["ÉMILE@exämple.com", "a"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let out = cache.query(&mut ch, &others).await.unwrap();
    assert_eq!(out.matches, vec![false, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_larger_than_the_server_limit_are_split() {
    let mut rng = StdRng::seed_from_u64(2);
    let (server_set, client_set, truth) = random_sets(&mut rng, 2000, 1000, 400);
    let srv = start(
        state_for(&server_set),
        ServerLimits {
            max_query_items: 128,
            ..ServerLimits::default()
        },
    )
    .await;
    let (mut ch, cache) = client(&srv.addr).await;
    let out = cache.query(&mut ch, &client_set).await.unwrap();
    assert_eq!(out.matches, truth);
}

/// A client whose keys are encoded otherwise than the server's is refused
/// before it queries, with both encodings named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_encoding_keys_otherwise_is_refused() {
    use psikit_protocols::filter_psi::FilterClient;
    let mut rng = StdRng::seed_from_u64(10);
    let (server_set, client_set, truth) = random_sets(&mut rng, 500, 100, 50);
    let mut state = state_for(&server_set);
    state.set_key_format("psikit-key-v1;columns=1;normalize=trim,lower".into());
    let srv = start(state, ServerLimits::default()).await;
    let query = |format: &str| {
        let (addr, items, format) = (srv.addr.clone(), client_set.clone(), format.to_string());
        async move {
            let mut ch = connect(&addr, None, limits()).await.unwrap();
            FilterClient::in_memory(1 << 30)
                .with_key_format(format)
                .query(&mut ch, &items, &psikit_protocols::NoProgress)
                .await
        }
    };
    let err = query("psikit-key-v1;columns=1;normalize=trim")
        .await
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains("normalize=trim,lower") && text.contains("--normalize"),
        "{text}"
    );
    let same = query("psikit-key-v1;columns=1;normalize=trim,lower")
        .await
        .unwrap();
    assert_eq!(same.outcome.matches, truth);
}

/// A server with a query budget answers a client until its budget is
/// spent, then refuses with a message saying so; the client's answers
/// before that are right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_budget_refuses_a_client_that_spent_it() {
    use psikit_protocols::service::{LocalServer, QueryBudget};
    let mut rng = StdRng::seed_from_u64(9);
    let (server_set, client_set, truth) = random_sets(&mut rng, 1000, 300, 100);
    let budget = QueryBudget {
        items: 500,
        window: Duration::from_secs(3600),
    };
    let server_limits = ServerLimits {
        query_budget: Some(budget),
        ..ServerLimits::default()
    };
    let service = Arc::new(FilterService::new(state_for(&server_set), server_limits));
    let mut router = Router::new(server_limits);
    router.register(service).unwrap();
    let server = LocalServer::start(router, limits()).await.unwrap();
    let (mut ch, cache) = client(server.addr()).await;
    let first = cache.query(&mut ch, &client_set).await.unwrap();
    assert_eq!(first.matches, truth);
    // 300 of 500 spent: another 300 do not fit, on a new connection too.
    let (mut ch, cache) = client(server.addr()).await;
    let err = cache.query(&mut ch, &client_set).await.unwrap_err();
    assert!(err.to_string().contains("query budget exceeded"), "{err}");
    let (mut ch, cache) = client(server.addr()).await;
    let rest = cache.query(&mut ch, &client_set[..200]).await.unwrap();
    assert_eq!(rest.matches, truth[..200]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_are_reloaded_live_stale_clients_are_told_then_get_a_delta() {
    let mut rng = StdRng::seed_from_u64(3);
    let (server_set, client_set, mut truth) = random_sets(&mut rng, 10_000, 500, 200);
    let dir = tempfile::tempdir().unwrap();
    state_for(&server_set).save(dir.path()).unwrap();
    let service = FilterService::open(dir.path(), ServerLimits::default()).unwrap();
    let srv = common::start(Arc::new(service), limits()).await;
    let (mut ch, cache) = client(&srv.addr).await;
    assert_eq!(
        cache.query(&mut ch, &client_set).await.unwrap().matches,
        truth
    );

    // As `psikit filter update` does: load, remove 50 of the client's
    // matches, add 20 client-only items, save. The server reloads it.
    let matched: Vec<usize> = (0..client_set.len()).filter(|&i| truth[i]).collect();
    let unmatched: Vec<usize> = (0..client_set.len()).filter(|&i| !truth[i]).collect();
    let pick =
        |idx: &[usize]| -> Vec<Vec<u8>> { idx.iter().map(|&i| client_set[i].clone()).collect() };
    let mut state = ServerState::load(dir.path()).unwrap();
    let add = tags_for_items(state.key(), &items(&pick(&unmatched[..20]))).unwrap();
    let remove = tags_for_items(state.key(), &items(&pick(&matched[..50]))).unwrap();
    let report = state.update(add, remove).unwrap();
    assert_eq!(
        (report.added, report.removed, report.rebuilt),
        (20, 50, false)
    );
    state.save(dir.path()).unwrap();
    for &i in &matched[..50] {
        truth[i] = false;
    }
    for &i in &unmatched[..20] {
        truth[i] = true;
    }
    let reloaded = async {
        while srv.service.snapshot().state.version().epoch != 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reloaded)
        .await
        .expect("server did not reload");

    let err = cache.query(&mut ch, &client_set).await.err().unwrap();
    assert!(err.is_stale(), "{err}");
    let mut c = Some(cache);
    let sync = ClientCache::sync(&mut c, &mut ch, 1 << 30, &NoProgress)
        .await
        .unwrap();
    assert_eq!(sync.kind, SyncKind::Delta);
    let full = srv.service.snapshot().full_filter_bytes() as u64;
    assert!(
        sync.body_bytes * 10 < full,
        "delta {} vs full {full}",
        sync.body_bytes
    );
    let cache = c.unwrap();
    assert_eq!(cache.epoch(), 1);
    let out = cache.query(&mut ch, &client_set).await.unwrap();
    assert_eq!(out.matches, truth);

    // A second sync is a no-op.
    let mut c = Some(cache);
    let sync = ClientCache::sync(&mut c, &mut ch, 1 << 30, &NoProgress)
        .await
        .unwrap();
    assert_eq!(sync.kind, SyncKind::UpToDate);
}

/// Sends raw bytes on a fresh TCP connection and returns what the server
/// answered (an error frame is expected) or that it closed.
async fn raw_exchange(addr: &str, bytes: &[u8]) -> Result<Frame, TransportError> {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // The server may hang up before reading everything; what it answered
    // (if anything) is what we check.
    let _ = tcp.write_all(bytes).await;
    // Half-close, as a crashed client would: a cut-short frame then ends in
    // EOF instead of waiting for the server's read timeout.
    let _ = tcp.shutdown().await;
    let mut ch = Channel::new(tcp, limits());
    ch.recv_or_eof().await?.ok_or(TransportError::Closed)
}

fn frame_bytes(f: &Frame) -> Vec<u8> {
    let mut v = f.header().to_vec();
    v.extend_from_slice(&f.payload);
    v
}

fn expect_error_frame(reply: Result<Frame, TransportError>, code: ErrorCode) {
    let f = reply.expect("server should answer with an error frame");
    assert_eq!(f.kind, KIND_ERROR);
    let msg = psikit_transport::ErrorMessage::decode(&f.payload).unwrap();
    assert_eq!(msg.code, code, "{}", msg.text);
    assert!(!msg.text.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_get_clear_errors_and_server_keeps_serving() {
    let mut rng = StdRng::seed_from_u64(4);
    let (server_set, client_set, truth) = random_sets(&mut rng, 3000, 200, 50);
    let srv = start(
        state_for(&server_set),
        ServerLimits {
            max_query_items: 100,
            ..ServerLimits::default()
        },
    )
    .await;
    let (mut good_ch, cache) = client(&srv.addr).await;

    // Truncated query: claims 5 elements, carries 1.
    let mut payload = vec![0u8; 24];
    payload.extend_from_slice(&5u32.to_be_bytes());
    payload.extend_from_slice(&[1u8; 32]);
    let f = Frame::new(PROTOCOL_ID, 4, payload);
    expect_error_frame(
        raw_exchange(&srv.addr, &frame_bytes(&f)).await,
        ErrorCode::BadRequest,
    );

    // Too many items for the server's limit.
    let mut payload = vec![0u8; 24];
    payload.extend_from_slice(&101u32.to_be_bytes());
    payload.extend_from_slice(&vec![0u8; 32 * 101]);
    let f = Frame::new(PROTOCOL_ID, 4, payload);
    expect_error_frame(
        raw_exchange(&srv.addr, &frame_bytes(&f)).await,
        ErrorCode::BadRequest,
    );

    // Invalid group elements.
    let mut payload = vec![0u8; 24];
    payload.extend_from_slice(&1u32.to_be_bytes());
    payload.extend_from_slice(&[0xffu8; 32]);
    let f = Frame::new(PROTOCOL_ID, 4, payload);
    expect_error_frame(
        raw_exchange(&srv.addr, &frame_bytes(&f)).await,
        ErrorCode::BadRequest,
    );

    // Unknown message kind and unknown protocol.
    let f = Frame::new(PROTOCOL_ID, 77, vec![]);
    expect_error_frame(
        raw_exchange(&srv.addr, &frame_bytes(&f)).await,
        ErrorCode::BadRequest,
    );
    let f = Frame::new(99, 1, vec![]);
    expect_error_frame(
        raw_exchange(&srv.addr, &frame_bytes(&f)).await,
        ErrorCode::Unsupported,
    );

    // Frames the server cannot take are answered with why, then the
    // connection closes: an oversized frame (unread), another wire
    // version, garbage (read as an absurd length), a frame cut short.
    let huge = (1u32 << 31).to_be_bytes();
    expect_error_frame(raw_exchange(&srv.addr, &huge).await, ErrorCode::BadRequest);
    expect_error_frame(
        raw_exchange(&srv.addr, &[0, 0, 0, 3, 42, 1, 1]).await,
        ErrorCode::Unsupported,
    );
    expect_error_frame(
        raw_exchange(&srv.addr, b"GET / HTTP/1.1\r\n\r\n").await,
        ErrorCode::BadRequest,
    );
    expect_error_frame(
        raw_exchange(&srv.addr, &[0, 0, 1, 0, 1, 1]).await,
        ErrorCode::BadRequest,
    );

    // The well-behaved client, connected all along, is still served.
    let out = cache.query(&mut good_ch, &client_set).await.unwrap();
    assert_eq!(out.matches, truth);
    // And new clients too.
    let (mut ch2, cache2) = client(&srv.addr).await;
    assert_eq!(
        cache2.query(&mut ch2, &client_set).await.unwrap().matches,
        truth
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_clients() {
    let mut rng = StdRng::seed_from_u64(5);
    let (server_set, client_set, truth) = random_sets(&mut rng, 5000, 100, 30);
    let srv = start(state_for(&server_set), ServerLimits::default()).await;
    let client_set = Arc::new(client_set);
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let (addr, set) = (srv.addr.clone(), client_set.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ch, cache) = client(&addr).await;
            cache.query(&mut ch, &set).await.unwrap().matches
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), truth);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_survives_save_and_load() {
    let mut rng = StdRng::seed_from_u64(6);
    let (server_set, client_set, truth) = random_sets(&mut rng, 2000, 100, 10);
    let srv = start(state_for(&server_set), ServerLimits::default()).await;
    let (mut ch, cache) = client(&srv.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.cache");
    cache.save(&path).unwrap();
    let mut loaded = ClientCache::load(&path).unwrap();
    let sync = ClientCache::sync(&mut loaded, &mut ch, 1 << 30, &NoProgress)
        .await
        .unwrap();
    assert_eq!(sync.kind, SyncKind::UpToDate);
    assert_eq!(
        loaded
            .unwrap()
            .query(&mut ch, &client_set)
            .await
            .unwrap()
            .matches,
        truth
    );
    // A corrupted cache is detected.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(ClientCache::load(&path).is_err());
    assert!(ClientCache::load(&dir.path().join("missing"))
        .unwrap()
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_over_an_in_memory_channel() {
    let mut rng = StdRng::seed_from_u64(7);
    let (server_set, client_set, truth) = random_sets(&mut rng, 4000, 300, 120);
    let mut router = Router::new(ServerLimits::default());
    router
        .register(Arc::new(FilterService::new(
            state_for(&server_set),
            ServerLimits::default(),
        )))
        .unwrap();
    let (mut client_ch, server_ch) = Channel::memory_pair(limits());
    let server = tokio::spawn(async move { router.serve_connection(server_ch).await });
    let mut cache = None;
    ClientCache::sync(&mut cache, &mut client_ch, 1 << 30, &NoProgress)
        .await
        .unwrap();
    let out = cache
        .unwrap()
        .query(&mut client_ch, &client_set)
        .await
        .unwrap();
    assert_eq!(out.matches, truth);
    // Requests and responses are 32 bytes per item plus framing.
    assert!(out.bytes_sent >= 32 * 300 && out.bytes_sent < 32 * 300 + 100);
    assert!(out.bytes_received >= 32 * 300 && out.bytes_received < 32 * 300 + 100);
    drop(client_ch);
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_over_mutual_tls() {
    use psikit_transport::net::{ClientTlsFiles, ServerTlsFiles};

    let dir = tempfile::tempdir().unwrap();
    let pki = common::test_pki(dir.path());
    let ((server_cert, server_key), client_cert, ca_path) = (pki.server, pki.client, pki.ca);

    let mut rng = StdRng::seed_from_u64(8);
    let (server_set, client_set, truth) = random_sets(&mut rng, 2000, 100, 40);
    let mut router = Router::new(common::server_limits());
    router
        .register(Arc::new(FilterService::new(
            state_for(&server_set),
            ServerLimits::default(),
        )))
        .unwrap();
    let tls = ServerTlsFiles {
        cert_chain: server_cert,
        private_key: server_key,
        client_ca: Some(ca_path.clone()),
    };
    let listener = Listener::bind("127.0.0.1:0", Some(&tls), limits())
        .await
        .unwrap();
    let addr = format!("localhost:{}", listener.local_addr().unwrap().port());
    let task = tokio::spawn(Arc::new(router).run(vec![listener]));
    let client_tls = ClientTlsFiles {
        server_ca: ca_path,
        server_name: None,
        client_cert: Some(client_cert),
    };
    let mut ch = connect(&addr, Some(&client_tls), limits()).await.unwrap();
    let mut cache = None;
    ClientCache::sync(&mut cache, &mut ch, 1 << 30, &NoProgress)
        .await
        .unwrap();
    let out = cache.unwrap().query(&mut ch, &client_set).await.unwrap();
    assert_eq!(out.matches, truth);
    task.abort();
}

/// With a tag cache, a repeated query asks the server only for the items
/// that changed (plus the canary), finds the same matches as without, and
/// a server with another key voids the cache instead of being trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_cache_asks_only_for_new_items_and_notices_a_new_key() {
    use psikit_protocols::filter_psi::FilterClient;
    use psikit_protocols::NoProgress;
    let mut rng = StdRng::seed_from_u64(12);
    let (server_set, mut client_set, mut truth) = random_sets(&mut rng, 2000, 400, 150);
    let dir = tempfile::tempdir().unwrap();
    let tags = dir.path().join("tags");
    let srv = start(state_for(&server_set), ServerLimits::default()).await;
    let query = |addr: String, items: Vec<Vec<u8>>| {
        let tags = tags.clone();
        async move {
            let mut ch = connect(&addr, None, limits()).await.unwrap();
            let mut client = FilterClient::in_memory(1 << 30)
                .with_tag_cache(&tags)
                .unwrap();
            client
                .query(&mut ch, &items, &NoProgress)
                .await
                .unwrap()
                .outcome
        }
    };

    let first = query(srv.addr.clone(), client_set.clone()).await;
    assert_eq!(first.matches, truth);
    assert_eq!(first.cached, 0);

    // 1% of the client's items change: two now match, two do not.
    client_set[0] = server_set[1990].clone();
    client_set[1] = server_set[1991].clone();
    client_set[2] = b"new item 1".to_vec();
    client_set[3] = b"new item 2".to_vec();
    truth[..4].copy_from_slice(&[true, true, false, false]);
    let again = query(srv.addr.clone(), client_set.clone()).await;
    assert_eq!(again.matches, truth);
    assert_eq!(again.cached, 396);
    assert!(
        again.bytes_sent * 20 < first.bytes_sent,
        "{} vs {} bytes sent",
        again.bytes_sent,
        first.bytes_sent
    );

    // Same set, a new key: the canary's tag differs, every item is asked.
    let rekeyed = start(state_for(&server_set), ServerLimits::default()).await;
    let fresh = query(rekeyed.addr.clone(), client_set.clone()).await;
    assert_eq!(fresh.matches, truth);
    assert_eq!(fresh.cached, 0);
    assert!(fresh.bytes_sent > first.bytes_sent / 2);

    // A damaged cache is set aside; the answer is still right.
    let mut bytes = std::fs::read(&tags).unwrap();
    bytes[40] ^= 1;
    std::fs::write(&tags, bytes).unwrap();
    let client = FilterClient::in_memory(1 << 30)
        .with_tag_cache(&tags)
        .unwrap();
    assert!(client.discarded_tag_cache().unwrap().contains("damaged"));
    let repaired = query(rekeyed.addr.clone(), client_set.clone()).await;
    assert_eq!(repaired.matches, truth);
}
