//! A sharded HE database through real processes: `psikit he db build
//! --shards`, one `psikit serve` per shard and one router, queried by `psikit
//! he query`, gives the unsharded database's answer; a shard process
//! killed while queries run fails them cleanly (a retryable error, no
//! matches written) until it is restarted on its port.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{psikit, run_ok, serve, serve_on, Server};

fn build(dir: &Path, state: &str, extra: &[&str]) -> String {
    run_ok(
        psikit()
            .args([
                "he",
                "db",
                "build",
                "--key",
                "email",
                "--label",
                "tier",
                "--client-items",
                "256",
            ])
            .arg("--csv")
            .arg(dir.join("server.csv"))
            .arg("--state")
            .arg(dir.join(state))
            .args(extra),
    )
}

/// The matched rows `psikit he query` writes, in order.
fn query(addr: &str, dir: &Path) -> Vec<String> {
    let out = dir.join("matches.csv");
    run_ok(
        psikit()
            .args(["he", "query", "--server", addr, "--key", "email"])
            .arg("--csv")
            .arg(dir.join("client.csv"))
            .arg("--out")
            .arg(&out),
    );
    let text = std::fs::read_to_string(&out).expect("read the matches");
    text.lines().map(str::to_string).collect()
}

/// Runs `psikit he query` against `addr`, writing its matches to `out`:
/// the rows written, or what it printed on stderr when it failed.
fn try_query(addr: &str, dir: &Path, out: &Path) -> Result<Vec<String>, String> {
    let run = psikit()
        .args(["he", "query", "--server", addr, "--key", "email"])
        .arg("--csv")
        .arg(dir.join("client.csv"))
        .arg("--out")
        .arg(out)
        .output()
        .expect("run psikit");
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    let text = std::fs::read_to_string(out).expect("read the matches");
    Ok(text.lines().map(str::to_string).collect())
}

/// Writes the server's 6000 rows and the client's 300 keys (147 present)
/// into `dir`, builds the whole database and returns its answer.
fn whole_answer(dir: &Path) -> Vec<String> {
    let mut server = String::from("email,tier\n");
    for i in 0..6000 {
        server.push_str(&format!("user{i}@x.org,tier {}\n", i % 4));
    }
    std::fs::write(dir.join("server.csv"), server).expect("write");
    let mut client = String::from("email\n");
    for i in (0..300).map(|i| i * 41) {
        client.push_str(&format!("user{i}@x.org\n"));
    }
    std::fs::write(dir.join("client.csv"), client).expect("write");

    build(dir, "whole", &[]);
    let whole = serve(&["--he-state", &dir.join("whole").to_string_lossy()]);
    let want = query(&whole.addr, dir);
    assert_eq!(want.len(), 1 + 147, "a header and the 147 keys below 6000");
    want
}

fn shard_dir(sharded: &Path, i: usize) -> String {
    sharded
        .join(format!("shard-{i}"))
        .to_string_lossy()
        .into_owned()
}

/// Builds `dir/sharded` in 4 shards and serves each; returns its path
/// and the shard servers.
fn serve_shards(dir: &Path) -> (PathBuf, Vec<Server>) {
    let out = build(dir, "sharded", &["--shards", "4"]);
    assert!(out.contains("6000 items in 4 shards"), "{out}");
    let sharded = dir.join("sharded");
    let shards = (0..4)
        .map(|i| serve(&["--he-state", &shard_dir(&sharded, i)]))
        .collect();
    (sharded, shards)
}

/// Serves the router of `sharded` in front of `shards`, with `extra`
/// flags and its stderr in `log`.
fn serve_router(sharded: &Path, shards: &[Server], extra: &[&str], log: Option<&Path>) -> Server {
    let mut args = vec![
        "--he-router".to_string(),
        sharded.join("router").to_string_lossy().into_owned(),
    ];
    for s in shards {
        args.extend(["--he-shard".to_string(), s.addr.clone()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    serve_on("127.0.0.1:0", &args, log)
}

#[test]
fn a_sharded_database_served_by_processes_answers_as_the_whole() {
    let d = tempfile::tempdir().expect("tempdir");
    let want = whole_answer(d.path());
    let (sharded, shards) = serve_shards(d.path());
    let log = d.path().join("router.log");
    let router = serve_router(&sharded, &shards, &["--trace-queries"], Some(&log));
    assert_eq!(query(&router.addr, d.path()), want);
    // One trace line per query round, with every shard in it.
    let traces = std::fs::read_to_string(&log).expect("read the router's log");
    let trace = (traces.lines())
        .find_map(|l| l.strip_prefix("psikit: query trace "))
        .unwrap_or_else(|| panic!("no trace in {traces:?}"));
    assert_eq!(trace.matches("\"shard\":").count(), 4, "{trace}");
    assert!(trace.contains("\"fan_out_bytes\":"), "{trace}");
    assert!(
        !trace.contains("\"packages\":0,"),
        "every shard answered: {trace}"
    );

    // An update through the router's OPRF: the router switches to it once
    // every shard has it.
    std::fs::write(
        d.path().join("add.csv"),
        "email,tier\nuser41@x.org,tier 9\n",
    )
    .expect("write");
    std::fs::write(d.path().join("remove.csv"), "email\nuser0@x.org\n").expect("write");
    let out = run_ok(
        psikit()
            .args(["he", "db", "update", "--key", "email", "--label", "tier"])
            .arg("--state")
            .arg(&sharded)
            .arg("--add")
            .arg(d.path().join("add.csv"))
            .arg("--remove")
            .arg(d.path().join("remove.csv")),
    );
    assert!(out.contains("epoch 1"), "{out}");
    let mut updated = want.clone();
    updated.retain(|l| l != "user0@x.org,tier 0");
    for l in updated.iter_mut().filter(|l| l.starts_with("user41@")) {
        *l = "user41@x.org,tier 9".into();
    }
    let mut got = query(&router.addr, d.path());
    for _ in 0..100 {
        if got == updated {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        got = query(&router.addr, d.path());
    }
    assert_eq!(got, updated);

    // A shard asked directly refuses to evaluate the OPRF: it has no key.
    let err = psikit()
        .args(["he", "query", "--server", &shards[0].addr, "--key", "email"])
        .arg("--csv")
        .arg(d.path().join("client.csv"))
        .arg("--out")
        .arg(d.path().join("direct.csv"))
        .output()
        .expect("run psikit");
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("query the shards' router"));
}

/// Queries' outcomes (rows written, or the error printed) as they ended.
type Outcomes = Mutex<Vec<(Instant, Result<Vec<String>, String>)>>;

/// Waits until `outcomes` holds one at or after `since` that `pick`
/// accepts.
fn wait_for(
    outcomes: &Outcomes,
    since: Instant,
    pick: impl Fn(&Result<Vec<String>, String>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let seen = outcomes.lock().unwrap_or_else(|p| p.into_inner());
        if seen.iter().any(|(at, r)| *at >= since && pick(r)) {
            return;
        }
        drop(seen);
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no such query outcome within 120 s");
}

#[test]
fn a_shard_process_killed_under_queries_fails_them_cleanly_until_restarted() {
    let d = tempfile::tempdir().expect("tempdir");
    let want = whole_answer(d.path());
    let (sharded, mut shards) = serve_shards(d.path());
    let router = serve_router(&sharded, &shards, &[], None);

    // Queries run back to back while shard 2 is killed and restarted, so
    // some are cut mid-answer; each either gives the whole answer or fails
    // with the retryable error and writes nothing.
    let outcomes: Arc<Outcomes> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let querying = {
        let (outcomes, stop) = (outcomes.clone(), stop.clone());
        let (addr, dir) = (router.addr.clone(), d.path().to_path_buf());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let out = dir.join(format!("loop-{i}.csv"));
                let got = try_query(&addr, &dir, &out);
                if got.is_err() {
                    assert!(!out.exists(), "a failed query wrote matches");
                }
                let done = Instant::now();
                outcomes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((done, got));
                i += 1;
            }
        })
    };
    let start = Instant::now();
    wait_for(&outcomes, start, Result::is_ok);
    let dead = shards.remove(2);
    let port = dead.addr.clone();
    drop(dead); // killed
    let killed = Instant::now();
    wait_for(&outcomes, killed, Result::is_err);
    let restarted = Instant::now();
    shards.insert(
        2,
        serve_on(&port, &["--he-state", &shard_dir(&sharded, 2)], None),
    );
    wait_for(&outcomes, restarted, Result::is_ok);
    stop.store(true, Ordering::SeqCst);
    querying.join().expect("the query loop");

    let outcomes = outcomes.lock().unwrap_or_else(|p| p.into_inner());
    for (_, outcome) in outcomes.iter() {
        match outcome {
            Ok(rows) => assert_eq!(rows, &want, "a whole answer"),
            Err(e) => assert!(
                e.contains("shard 2 of the database is unavailable") && e.contains("retry"),
                "{e}"
            ),
        }
    }
    // And the restarted shard keeps serving.
    assert_eq!(query(&router.addr, d.path()), want);
}
