//! A sharded HE database answers as the same database unsharded would:
//! the same matches and labels for 1, 2, 4 and 8 shards, through the real
//! router and shard servers over TCP; a shard dying mid-answer fails the
//! query (retryably, with no partial answer) and the next query succeeds.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use psikit_io::{Column, KeySpec};
use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::he_psi::facade::{self, BuildOptions, QueryOptions};
use psikit_protocols::he_psi::router::ShardRouter;
use psikit_protocols::he_psi::select::SelectionInput;
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

async fn query(at: &str, keys: &[Vec<u8>]) -> Result<Vec<(usize, Option<Vec<u8>>)>, Error> {
    let mut ch = addr(at).connect().await?;
    let session = facade::query(&mut ch, keys, &QueryOptions::default(), &NoProgress).await?;
    Ok(session
        .matches
        .into_iter()
        .map(|m| (m.index, m.label))
        .collect())
}

/// Serves the shards of `dir` and their router; the shard servers go
/// first in the returned list.
async fn serve_sharded(
    dir: &Path,
    shards: u32,
    via: Option<Vec<String>>,
) -> (Vec<LocalServer>, LocalServer) {
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
    let router = ShardRouter::open(
        &dir.join("router"),
        addrs.iter().map(|a| addr(a)).collect(),
        common::server_limits(),
    );
    let router = serve(Arc::new(router.unwrap())).await;
    (servers, router)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_databases_answer_as_the_whole_database() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, truth) = server_csv(dir.path(), 1 << 14);
    let whole = dir.path().join("whole");
    facade::build(&csv, &spec(), &whole, options(), &NoProgress).unwrap();
    let whole = serve(Arc::new(
        HeService::open(&whole, true, common::server_limits()).unwrap(),
    ))
    .await;

    let mut client: Vec<Vec<u8>> = (0..150)
        .map(|i| format!("user{}@x.org", i * 97).into_bytes())
        .collect();
    client.extend((0..100).map(|i| format!("stranger{i}@y.org").into_bytes()));
    let want: Vec<(usize, Option<Vec<u8>>)> = (client.iter().enumerate())
        .filter_map(|(i, k)| truth.get(k).map(|l| (i, Some(l.clone()))))
        .collect();
    assert_eq!(query(whole.addr(), &client).await.unwrap(), want);

    for shards in [1, 2, 4, 8] {
        let sharded = dir.path().join(format!("sharded-{shards}"));
        let report =
            sharded::build_sharded(&csv, &spec(), &sharded, shards, options(), &NoProgress)
                .unwrap();
        assert_eq!(report.manifest.items.iter().sum::<u64>(), 1 << 14);
        assert!(
            report.manifest.items.iter().all(|&n| n > 0),
            "{:?}",
            report.manifest.items
        );
        assert!(
            !sharded.join("shard-0").join("oprf.key").exists(),
            "shards never hold the key"
        );
        let (_shards, router) = serve_sharded(&sharded, shards, None).await;
        assert_eq!(
            query(router.addr(), &client).await.unwrap(),
            want,
            "{shards} shards"
        );
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
    let (_none, router) = serve_sharded(
        &sharded,
        0,
        Some(vec![servers[0].addr().to_string(), proxy]),
    )
    .await;

    let client: Vec<Vec<u8>> = (0..64)
        .map(|i| format!("user{i}@x.org").into_bytes())
        .collect();
    let err = query(router.addr(), &client).await.unwrap_err();
    assert!(err.is_busy(), "a retryable refusal: {err}");
    assert!(err.to_string().contains("shard 1"), "{err}");

    cutting.store(false, Ordering::SeqCst); // the shard is back
    let got = query(router.addr(), &client).await.unwrap();
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
    let (_shards, router) = serve_sharded(&sharded, 4, None).await;
    let client: Vec<Vec<u8>> = (0..80)
        .map(|i| format!("user{}@x.org", i * 50).into_bytes())
        .collect();
    let answer = |truth: &HashMap<Vec<u8>, Vec<u8>>| -> Vec<(usize, Option<Vec<u8>>)> {
        (client.iter().enumerate())
            .filter_map(|(i, k)| truth.get(k).map(|l| (i, Some(l.clone()))))
            .collect()
    };
    let before = answer(&truth);
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
    let after = answer(&truth);
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
        tasks.push(tokio::spawn(Arc::new(router).run(listener)));
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
