//! A sharded HE database answers as the same database unsharded would:
//! the same matches and labels for 1, 2, 4 and 8 shards at 2^14 rows (2
//! and 8 at 2^16) and after the same update, through the real router and
//! shard servers over TCP; the router's trace of each query counts what
//! the shards and the client got; a shard dying mid-answer fails the
//! query (retryably, with no partial answer) and the next query succeeds.

#![cfg(feature = "he")]

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use psikit_io::{Column, KeySpec};
use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::he_psi::facade::{self, BuildOptions, QueryOptions, Session};
use psikit_protocols::he_psi::select::SelectionInput;
use psikit_protocols::he_psi::shard::Manifest;
use psikit_protocols::he_psi::shard::{QueryTrace, ShardRouter};
use psikit_protocols::he_psi::sharded;
use psikit_protocols::he_psi::HeService;
use psikit_protocols::service::{LocalServer, Router, Service};
use psikit_protocols::{Error, NoProgress};
use psikit_transport::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod common;

fn limits() -> Limits {
    common::limits(Duration::from_secs(30))
}

fn spec() -> KeySpec {
    let mut spec = KeySpec::new(vec![Column::Name("email".into())]);
    spec.label_columns = vec![Column::Name("tier".into())];
    spec
}

fn options() -> BuildOptions {
    BuildOptions {
        params: None,
        max_label_bytes: None,
        capacity: None,
        workload: SelectionInput::new(0, 256, 0),
        force: false,
    }
}

/// A server CSV of `n` rows with labels; returns its path and the truth.
fn server_csv(dir: &Path, n: usize) -> (std::path::PathBuf, HashMap<Vec<u8>, Vec<u8>>) {
    let mut csv = String::from("email,tier\n");
    let mut truth = HashMap::new();
    for i in 0..n {
        let (key, label) = (format!("user{i}@x.org"), format!("t{}", i % 7));
        csv.push_str(&format!("{key},{label}\n"));
        truth.insert(key.into_bytes(), label.into_bytes());
    }
    let path = dir.join("server.csv");
    std::fs::write(&path, csv).unwrap();
    (path, truth)
}

async fn serve(service: Arc<dyn Service>) -> LocalServer {
    let mut router = Router::new(common::server_limits());
    router.register(service).unwrap();
    LocalServer::start(router, limits()).await.unwrap()
}

fn addr(at: &str) -> ServerAddr {
    ServerAddr {
        addr: at.to_string(),
        tls: None,
        limits: limits(),
    }
}

type Answer = Vec<(usize, Option<Vec<u8>>)>;

async fn query_session(at: &str, keys: &[Vec<u8>]) -> Result<Session, Error> {
    let mut ch = addr(at).connect().await?;
    facade::query(&mut ch, keys, &QueryOptions::default(), &NoProgress).await
}

fn answer(session: &Session) -> Answer {
    (session.matches.iter())
        .map(|m| (m.index, m.label.clone()))
        .collect()
}

async fn query(at: &str, keys: &[Vec<u8>]) -> Result<Answer, Error> {
    Ok(answer(&query_session(at, keys).await?))
}

/// What `truth` answers for `client`'s keys, in the client's order.
fn expected(client: &[Vec<u8>], truth: &HashMap<Vec<u8>, Vec<u8>>) -> Answer {
    (client.iter().enumerate())
        .filter_map(|(i, k)| truth.get(k).map(|l| (i, Some(l.clone()))))
        .collect()
}

/// A sharded database's servers; the router reports its query traces to
/// `traces`.
struct Served {
    _shards: Vec<LocalServer>,
    router: LocalServer,
    traces: Arc<Mutex<Vec<QueryTrace>>>,
}

impl Served {
    fn traces(&self) -> Vec<QueryTrace> {
        std::mem::take(&mut *self.traces.lock().unwrap())
    }
}

/// Serves the shards of `dir` and their router (reaching the shards at
/// `via` when given, else at the servers started here).
async fn serve_sharded(dir: &Path, shards: u32, via: Option<Vec<String>>) -> Served {
    let mut servers = Vec::new();
    for i in 0..shards {
        let shard = HeService::open(
            &dir.join(format!("shard-{i}")),
            true,
            common::server_limits(),
        );
        servers.push(serve(Arc::new(shard.unwrap())).await);
    }
    let addrs = via.unwrap_or_else(|| servers.iter().map(|s| s.addr().to_string()).collect());
    let traces = Arc::new(Mutex::new(Vec::new()));
    let sink = traces.clone();
    let router = ShardRouter::open(
        &dir.join("router"),
        addrs.iter().map(|a| addr(a)).collect(),
        common::server_limits(),
    )
    .unwrap()
    .with_trace(Arc::new(move |t: &QueryTrace| {
        sink.lock().unwrap().push(t.clone())
    }));
    let router = serve(Arc::new(router)).await;
    Served {
        _shards: servers,
        router,
        traces,
    }
}

/// Checks the router's traces of `session` (one per query round) against
/// the database's shape: each shard answers with one package per bin
/// bundle it holds, every package reaches the client, and the times of
/// each shard come in order.
fn check_traces(traces: &[QueryTrace], session: &Session, manifest: &Manifest) {
    assert_eq!(traces.len(), session.outcome.rounds, "one trace per round");
    for t in traces {
        assert_eq!(t.epoch, manifest.epoch);
        assert_eq!(
            t.shards.len(),
            manifest.bundle_counts.len(),
            "one per shard"
        );
        assert!(t.query_bytes > 0 && t.fan_out_bytes() == t.query_bytes * t.shards.len() as u64);
        for (s, counts) in t.shards.iter().zip(&manifest.bundle_counts) {
            assert_eq!(s.packages, counts.iter().sum::<u32>(), "a package a bundle");
            assert_eq!(s.bytes > 0, s.packages > 0, "{s:?}");
            assert!(t.received <= s.sent && s.done <= t.done, "{s:?} in {t:?}");
            if let (Some(first), Some(last)) = (s.first, s.last) {
                assert!(s.sent <= first && first <= last && last <= s.done, "{s:?}");
            }
        }
        assert_eq!(t.packages, t.shards.iter().map(|s| s.packages).sum::<u32>());
        assert_eq!(
            t.forwarded_bytes,
            t.shards.iter().map(|s| s.bytes).sum::<u64>()
        );
        assert!(t.gather() <= t.done);
    }
    let forwarded: u64 = traces.iter().map(|t| t.forwarded_bytes).sum();
    assert!(
        0 < forwarded && forwarded < session.bytes_received,
        "the client received the packages ({forwarded} B) and more"
    );
    let line = traces[0].to_json();
    let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(parsed["packages"], traces[0].packages);
    assert_eq!(
        parsed["shards"].as_array().map(Vec::len),
        Some(traces[0].shards.len())
    );
}

/// Builds a database of `2^log2` rows whole and in each of `shard_counts`
/// shards, and checks that every sharded one answers a client of 150
/// present and 100 absent keys as the whole one does.
async fn answers_as_the_whole(log2: u32, shard_counts: &[u32]) {
    let dir = tempfile::tempdir().unwrap();
    let n = 1usize << log2;
    let (csv, truth) = server_csv(dir.path(), n);
    let whole = dir.path().join("whole");
    facade::build(&csv, &spec(), &whole, options(), &NoProgress).unwrap();
    let whole = serve(Arc::new(
        HeService::open(&whole, true, common::server_limits()).unwrap(),
    ))
    .await;

    // Present keys spread over the whole range, so every shard holds some.
    let mut client: Vec<Vec<u8>> = (0..150)
        .map(|i| format!("user{}@x.org", i * (n / 150)).into_bytes())
        .collect();
    client.extend((0..100).map(|i| format!("stranger{i}@y.org").into_bytes()));
    let want = expected(&client, &truth);
    assert_eq!(want.len(), 150);
    assert_eq!(query(whole.addr(), &client).await.unwrap(), want);

    for &shards in shard_counts {
        let sharded = dir.path().join(format!("sharded-{shards}"));
        let report =
            sharded::build_sharded(&csv, &spec(), &sharded, shards, options(), &NoProgress)
                .unwrap();
        assert_eq!(report.manifest.items.iter().sum::<u64>(), n as u64);
        assert!(
            report.manifest.items.iter().all(|&n| n > 0),
            "{:?}",
            report.manifest.items
        );
        assert!(
            !sharded.join("shard-0").join("oprf.key").exists(),
            "shards never hold the key"
        );
        let served = serve_sharded(&sharded, shards, None).await;
        let session = query_session(served.router.addr(), &client).await.unwrap();
        assert_eq!(answer(&session), want, "{shards} shards, 2^{log2} rows");
        check_traces(&served.traces(), &session, &report.manifest);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_databases_answer_as_the_whole_database() {
    answers_as_the_whole(14, &[1, 2, 4, 8]).await;
}

/// At 2^16 rows only 2 and 8 shards: each build costs seconds in the
/// test profile, and 2^14 covers every count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_databases_of_2_16_rows_answer_as_the_whole_database() {
    answers_as_the_whole(16, &[2, 8]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_sharded_databases_answer_as_the_updated_whole() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1usize << 14;
    let (csv, mut truth) = server_csv(dir.path(), n);
    // The client asks for 150 present keys, the 30 keys the update adds,
    // and 50 absent ones.
    let mut client: Vec<Vec<u8>> = (0..150)
        .map(|i| format!("user{}@x.org", i * 100).into_bytes())
        .collect();
    client.extend((0..30).map(|i| format!("user{}@x.org", n + i).into_bytes()));
    client.extend((0..50).map(|i| format!("stranger{i}@y.org").into_bytes()));
    // Remove 30 of its matches, relabel 30, add 30 new rows.
    let mut add = String::from("email,tier\n");
    let mut remove = String::from("email\n");
    for i in 0..30 {
        let gone = format!("user{}@x.org", i * 100);
        remove.push_str(&format!("{gone}\n"));
        truth.remove(gone.as_bytes());
        let relabel = format!("user{}@x.org", (30 + i) * 100);
        add.push_str(&format!("{relabel},nw\n"));
        truth.insert(relabel.into_bytes(), b"nw".to_vec());
        let new = format!("user{}@x.org", n + i);
        add.push_str(&format!("{new},z{}\n", i % 10));
        truth.insert(new.into_bytes(), format!("z{}", i % 10).into_bytes());
    }
    let (add_csv, remove_csv) = (dir.path().join("add.csv"), dir.path().join("remove.csv"));
    std::fs::write(&add_csv, add).unwrap();
    std::fs::write(&remove_csv, remove).unwrap();
    let want = expected(&client, &truth);
    assert_eq!(want.len(), 150);

    let whole = dir.path().join("whole");
    facade::build(&csv, &spec(), &whole, options(), &NoProgress).unwrap();
    facade::update(
        &whole,
        &spec(),
        Some(&add_csv),
        Some(&remove_csv),
        &NoProgress,
    )
    .unwrap();
    let whole = serve(Arc::new(
        HeService::open(&whole, true, common::server_limits()).unwrap(),
    ))
    .await;
    assert_eq!(query(whole.addr(), &client).await.unwrap(), want);

    for shards in [1, 2, 4, 8] {
        let sharded = dir.path().join(format!("sharded-{shards}"));
        sharded::build_sharded(&csv, &spec(), &sharded, shards, options(), &NoProgress).unwrap();
        let report = sharded::update_sharded(
            &sharded,
            &spec(),
            Some(&add_csv),
            Some(&remove_csv),
            &NoProgress,
        )
        .unwrap();
        assert_eq!(report.manifest.epoch, 1);
        assert_eq!(report.manifest.items.iter().sum::<u64>(), n as u64);
        let stats = &report.stats;
        assert_eq!(
            (stats.removed, stats.relabelled, stats.inserted),
            (30, 30, 30),
            "{shards} shards"
        );
        let served = serve_sharded(&sharded, shards, None).await;
        let session = query_session(served.router.addr(), &client).await.unwrap();
        assert_eq!(answer(&session), want, "{shards} shards, updated");
        check_traces(&served.traces(), &session, &report.manifest);
    }
}

/// Forwards connections to `target`, cutting each answer after `cut_at`
/// bytes while `cutting` is set: a shard that dies mid-answer.
async fn flaky_proxy(target: String, cut_at: usize, cutting: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (target, cutting) = (target.clone(), cutting.clone());
            tokio::spawn(async move {
                let server = TcpStream::connect(&target).await.unwrap();
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                let limit = if cutting.load(Ordering::SeqCst) {
                    cut_at
                } else {
                    usize::MAX
                };
                let mut buf = vec![0u8; 1 << 16];
                let mut sent = 0;
                while let Ok(n) = sr.read(&mut buf).await {
                    let n = n.min(limit - sent);
                    if n == 0 || cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    sent += n;
                }
            });
        }
    });
    at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_dying_mid_answer_fails_the_query_and_the_next_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, truth) = server_csv(dir.path(), 1 << 12);
    let sharded = dir.path().join("sharded");
    sharded::build_sharded(&csv, &spec(), &sharded, 2, options(), &NoProgress).unwrap();
    // Shard 1 is reached through a proxy that cuts its answer short.
    let mut servers = Vec::new();
    for i in 0..2 {
        let shard = HeService::open(
            &sharded.join(format!("shard-{i}")),
            true,
            common::server_limits(),
        );
        servers.push(serve(Arc::new(shard.unwrap())).await);
    }
    let cutting = Arc::new(AtomicBool::new(true));
    let proxy = flaky_proxy(servers[1].addr().to_string(), 5000, cutting.clone()).await;
    let served = serve_sharded(
        &sharded,
        0,
        Some(vec![servers[0].addr().to_string(), proxy]),
    )
    .await;

    let client: Vec<Vec<u8>> = (0..64)
        .map(|i| format!("user{i}@x.org").into_bytes())
        .collect();
    let err = query(served.router.addr(), &client).await.unwrap_err();
    assert!(err.is_busy(), "a retryable refusal: {err}");
    assert!(err.to_string().contains("shard 1"), "{err}");
    assert!(served.traces().is_empty(), "a failed query is not traced");

    cutting.store(false, Ordering::SeqCst); // the shard is back
    let session = query_session(served.router.addr(), &client).await.unwrap();
    assert_eq!(served.traces().len(), session.outcome.rounds);
    let got = answer(&session);
    let want: Vec<(usize, Option<Vec<u8>>)> = (client.iter().enumerate())
        .map(|(i, k)| (i, truth.get(k).cloned()))
        .collect();
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_switch_every_shard_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, mut truth) = server_csv(dir.path(), 1 << 12);
    let sharded = dir.path().join("sharded");
    sharded::build_sharded(&csv, &spec(), &sharded, 4, options(), &NoProgress).unwrap();
    let served = serve_sharded(&sharded, 4, None).await;
    let router = &served.router;
    let client: Vec<Vec<u8>> = (0..80)
        .map(|i| format!("user{}@x.org", i * 50).into_bytes())
        .collect();
    let before = expected(&client, &truth);
    assert_eq!(query(router.addr(), &client).await.unwrap(), before);

    // Remove 20 of the client's matches, relabel 20, add 20 beyond the set.
    let mut add = String::from("email,tier\n");
    let mut remove = String::from("email\n");
    for i in 0..20 {
        remove.push_str(&format!("user{}@x.org\n", i * 50));
        truth.remove(format!("user{}@x.org", i * 50).as_bytes());
        let relabel = format!("user{}@x.org", (20 + i) * 50);
        add.push_str(&format!("{relabel},nw\n"));
        truth.insert(relabel.into_bytes(), b"nw".to_vec());
    }
    std::fs::write(dir.path().join("add.csv"), add).unwrap();
    std::fs::write(dir.path().join("remove.csv"), remove).unwrap();
    let after = expected(&client, &truth);
    let (add, remove) = (dir.path().join("add.csv"), dir.path().join("remove.csv"));
    let updating = {
        let (sharded, add, remove) = (sharded.clone(), add.clone(), remove.clone());
        tokio::task::spawn_blocking(move || {
            sharded::update_sharded(&sharded, &spec(), Some(&add), Some(&remove), &NoProgress)
        })
    };
    // While the update lands, every answer is one epoch's, never a mix.
    let mut seen_after = false;
    for _ in 0..200 {
        let got = query(router.addr(), &client).await.unwrap();
        assert!(got == before || got == after, "an answer mixing epochs");
        seen_after |= got == after;
        if seen_after && updating.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = updating.await.unwrap().unwrap();
    assert_eq!(report.manifest.epoch, 1);
    assert_eq!((report.stats.removed, report.stats.relabelled), (20, 20));
    assert!(seen_after, "the router switched to the update");
    assert_eq!(query(router.addr(), &client).await.unwrap(), after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_reaches_shards_over_mutual_tls() {
    use psikit_transport::net::{ClientTlsFiles, Listener, ServerTlsFiles};

    let dir = tempfile::tempdir().unwrap();
    let pki = common::test_pki(dir.path());
    let (csv, truth) = server_csv(dir.path(), 1 << 11);
    let sharded = dir.path().join("sharded");
    sharded::build_sharded(&csv, &spec(), &sharded, 2, options(), &NoProgress).unwrap();
    let shard_tls = ServerTlsFiles {
        cert_chain: pki.server.0.clone(),
        private_key: pki.server.1.clone(),
        client_ca: Some(pki.ca.clone()),
    };
    let mut addrs = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..2 {
        let shard = HeService::open(
            &sharded.join(format!("shard-{i}")),
            true,
            common::server_limits(),
        );
        let mut router = Router::new(common::server_limits());
        router.register(Arc::new(shard.unwrap())).unwrap();
        let listener = Listener::bind("127.0.0.1:0", Some(&shard_tls), limits())
            .await
            .unwrap();
        addrs.push(format!(
            "localhost:{}",
            listener.local_addr().unwrap().port()
        ));
        tasks.push(tokio::spawn(Arc::new(router).run(vec![listener])));
    }
    let client: Vec<Vec<u8>> = (0..40)
        .map(|i| format!("user{}@x.org", i * 13).into_bytes())
        .collect();
    let want: Vec<(usize, Option<Vec<u8>>)> = (client.iter().enumerate())
        .map(|(i, k)| (i, truth.get(k).cloned()))
        .collect();
    let route = |client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>| {
        let tls = ClientTlsFiles {
            server_ca: pki.ca.clone(),
            server_name: None,
            client_cert,
        };
        let shards = (addrs.iter())
            .map(|a| ServerAddr {
                addr: a.clone(),
                tls: Some(tls.clone()),
                limits: limits(),
            })
            .collect();
        ShardRouter::open(&sharded.join("router"), shards, common::server_limits()).unwrap()
    };
    let router = serve(Arc::new(route(Some(pki.client.clone())))).await;
    assert_eq!(query(router.addr(), &client).await.unwrap(), want);
    // Without its certificate the router is refused by the shards.
    let anonymous = serve(Arc::new(route(None))).await;
    let err = query(anonymous.addr(), &client).await.unwrap_err();
    assert!(err.is_busy(), "a shard unavailable: {err}");
    for t in tasks {
        t.abort();
    }
}

/// The value of the metric sample `sample` (0 when absent).
fn metric(text: &str, sample: &str) -> f64 {
    (text.lines())
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_is_ready_while_every_shard_answers_and_counts_its_fan_out() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, truth) = server_csv(dir.path(), 1 << 10);
    let sharded = dir.path().join("sharded");
    sharded::build_sharded(&csv, &spec(), &sharded, 2, options(), &NoProgress).unwrap();
    let mut shards = Vec::new();
    for i in 0..2 {
        let shard = HeService::open(
            &sharded.join(format!("shard-{i}")),
            true,
            common::server_limits(),
        );
        shards.push(serve(Arc::new(shard.unwrap())).await);
    }
    let addrs = shards.iter().map(|s| addr(s.addr())).collect();
    let service = ShardRouter::open(&sharded.join("router"), addrs, common::server_limits());
    let mut router = Router::new(common::server_limits());
    router.register(Arc::new(service.unwrap())).unwrap();
    let router = Arc::new(router);
    let listener = psikit_transport::net::Listener::bind("127.0.0.1:0", None, limits())
        .await
        .unwrap();
    let at = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(router.clone().run(vec![listener]));
    assert_eq!(router.readiness().await, Ok(()));

    let client: Vec<Vec<u8>> = (0..32)
        .map(|i| format!("user{i}@x.org").into_bytes())
        .collect();
    assert_eq!(
        query(&at, &client).await.unwrap(),
        expected(&client, &truth)
    );
    let text = router.metrics_text();
    let evaluations = metric(
        &text,
        r#"psikit_requests_total{protocol="he",step="he_eval",outcome="ok"}"#,
    );
    assert!(evaluations >= 1.0, "{text}");
    for shard in 0..2 {
        let asked = format!(r#"psikit_shard_queries_total{{shard="{shard}",outcome="ok"}}"#);
        assert_eq!(metric(&text, &asked), evaluations, "{text}");
    }
    assert_eq!(metric(&text, "psikit_he_evaluations_running"), 0.0);

    drop(shards.pop()); // shard 1 is gone
    let why = router.readiness().await.unwrap_err();
    assert!(why.iter().any(|w| w.contains("shard 1")), "{why:?}");
    task.abort();
}
