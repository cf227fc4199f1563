//! Bucketed jobs through the CLI: they survive what long runs meet (either
//! party killed with SIGKILL at spread-out moments and rerun with
//! `--resume`; the TCP link cut at spread-out moments by a proxy, after
//! which the job reconnects by itself), every run's output equals the
//! plaintext truth (which an uninterrupted run also writes), and a party's
//! peak memory follows its budget, not its input.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::psikit;

const BUCKET_ITEMS: &str = "700";

/// `n` rows `email,n` with ids drawn (deterministically) from
/// `0..universe`; returns the path and the ids.
fn input(dir: &Path, name: &str, seed: u64, n: u64, universe: u64) -> (PathBuf, Vec<u64>) {
    let mut text = String::from("email,n\n");
    let mut ids = Vec::new();
    let mut x = seed;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let id = (x >> 33) % universe;
        text.push_str(&format!("u{id}@example.org,{i}\n"));
        ids.push(id);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write input");
    (path, ids)
}

fn truth(mine: &[u64], theirs: &[u64]) -> Vec<String> {
    let held: HashSet<u64> = theirs.iter().copied().collect();
    let mut rows = vec!["email,n".to_string()];
    rows.extend(
        mine.iter()
            .enumerate()
            .filter(|(_, id)| held.contains(id))
            .map(|(i, id)| format!("u{id}@example.org,{i}")),
    );
    rows
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// One party's command: `role` is `send` (listening) or `receive`
/// (connecting), `peer` its `--listen` or `--connect` flag and address;
/// buckets of [`BUCKET_ITEMS`] items unless the caller adds `--memory`.
fn party(role: &str, input: &Path, job: &Path, peer: (&str, &str), resume: bool) -> Command {
    let mut cmd = psikit();
    cmd.args(["psi", role, "--key", "email", "-i"])
        .arg(input)
        .arg("--job-dir")
        .arg(job)
        .args([peer.0, peer.1])
        .args(["--retry-secs", "60", "--idle-secs", "60"]);
    if role == "send" {
        // A listener left alone gives up instead of hanging the test.
        cmd.args(["--accept-timeout-secs", "60"]);
    }
    if role == "receive" {
        cmd.arg("-o").arg(job.with_extension("csv"));
    }
    if resume {
        cmd.arg("--resume");
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// [`party`] with buckets of [`BUCKET_ITEMS`] items, two at a time (so
/// kills and cuts also meet a side's other lane).
fn small_buckets(
    role: &str,
    input: &Path,
    job: &Path,
    peer: (&str, &str),
    resume: bool,
) -> Command {
    let mut cmd = party(role, input, job, peer, resume);
    cmd.args(["--bucket-items", BUCKET_ITEMS, "--lanes", "2"]);
    cmd
}

/// Waits for a party, which must succeed; returns its stdout.
fn finish(child: Child, who: &str) -> String {
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{who} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn output(job: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(job.with_extension("csv")).expect("output");
    text.lines().map(str::to_owned).collect()
}

#[test]
fn a_killed_party_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_in, s_ids) = input(dir.path(), "s.csv", 1, 6000, 12000);
    let (r_in, r_ids) = input(dir.path(), "r.csv", 2, 4000, 12000);
    let want = truth(&r_ids, &s_ids);
    // Ten kill points spread over a run, alternating the killed party.
    let t = Instant::now();
    let (s_job, r_job) = (dir.path().join("s0"), dir.path().join("r0"));
    let addr = format!("127.0.0.1:{}", free_port());
    let s = small_buckets("send", &s_in, &s_job, ("--listen", &addr), false)
        .spawn()
        .expect("send");
    let r = small_buckets("receive", &r_in, &r_job, ("--connect", &addr), false)
        .spawn()
        .expect("receive");
    finish(s, "sender");
    finish(r, "receiver");
    assert_eq!(output(&r_job), want);
    let span = t.elapsed();
    let mut kills = 0;
    for k in 1..=10u32 {
        let (s_job, r_job) = (
            dir.path().join(format!("s{k}")),
            dir.path().join(format!("r{k}")),
        );
        let addr = format!("127.0.0.1:{}", free_port());
        let mut s = small_buckets("send", &s_in, &s_job, ("--listen", &addr), false)
            .spawn()
            .expect("send");
        let mut r = small_buckets("receive", &r_in, &r_job, ("--connect", &addr), false)
            .spawn()
            .expect("receive");
        std::thread::sleep(span.mul_f64(f64::from(k * 7 % 10) / 10.0 + 0.05));
        let kill_sender = k % 2 == 0;
        let victim = if kill_sender { &mut s } else { &mut r };
        let _ = victim.kill();
        // A party that had already finished is not run again.
        let killed = !victim.wait().expect("wait").success();
        kills += u32::from(killed);
        let (s, r) = match (killed, kill_sender) {
            (false, _) => (s, r),
            (true, true) => (
                small_buckets("send", &s_in, &s_job, ("--listen", &addr), true)
                    .spawn()
                    .expect("restart"),
                r,
            ),
            (true, false) => (
                s,
                small_buckets("receive", &r_in, &r_job, ("--connect", &addr), true)
                    .spawn()
                    .expect("restart"),
            ),
        };
        finish(s, &format!("sender (kill point {k})"));
        finish(r, &format!("receiver (kill point {k})"));
        assert_eq!(output(&r_job), want, "kill point {k}");
    }
    assert!(kills >= 5, "only {kills} of 10 kills hit a running party");
}

/// Forwards connections from `listener` to `target`, cutting each of the
/// first `cuts.len()` connections after its delay.
fn proxy(listener: TcpListener, target: String, cuts: Vec<Duration>, stop: Arc<AtomicBool>) {
    listener.set_nonblocking(true).expect("nonblocking");
    let mut cuts = cuts.into_iter();
    while !stop.load(Ordering::SeqCst) {
        let Ok((client, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        client.set_nonblocking(false).expect("blocking");
        let Ok(server) = TcpStream::connect(&target) else {
            continue;
        };
        let cut = cuts.next();
        let pump = |mut from: TcpStream, mut to: TcpStream| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 16 << 10];
                while let Ok(n) = from.read(&mut buf) {
                    if n == 0 || to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = to.shutdown(Shutdown::Both);
                let _ = from.shutdown(Shutdown::Both);
            });
        };
        let (c2, s2) = (
            client.try_clone().expect("clone"),
            server.try_clone().expect("clone"),
        );
        pump(c2, server);
        pump(s2, client.try_clone().expect("clone"));
        if let Some(after) = cut {
            std::thread::spawn(move || {
                std::thread::sleep(after);
                let _ = client.shutdown(Shutdown::Both);
            });
        }
    }
}

#[test]
fn a_cut_link_is_retried_until_the_job_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_in, s_ids) = input(dir.path(), "s.csv", 3, 6000, 12000);
    let (r_in, r_ids) = input(dir.path(), "r.csv", 4, 4000, 12000);
    let addr = format!("127.0.0.1:{}", free_port());
    let front = TcpListener::bind("127.0.0.1:0").expect("bind");
    let front_addr = front.local_addr().expect("addr").to_string();
    // Cuts at spread-out moments of successive connections.
    let cuts = (1..=5u64)
        .map(|k| Duration::from_millis(150 + 290 * (k * 3 % 5)))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let proxy_thread = {
        let (addr, stop) = (addr.clone(), stop.clone());
        std::thread::spawn(move || proxy(front, addr, cuts, stop))
    };
    let (s_job, r_job) = (dir.path().join("s"), dir.path().join("r"));
    let s = small_buckets("send", &s_in, &s_job, ("--listen", &addr), false)
        .spawn()
        .expect("send");
    let r = small_buckets("receive", &r_in, &r_job, ("--connect", &front_addr), false)
        .spawn()
        .expect("receive");
    let (s, r) = (s.wait_with_output(), r.wait_with_output());
    stop.store(true, Ordering::SeqCst);
    let (s, r) = (s.expect("wait"), r.expect("wait"));
    assert!(
        s.status.success() && r.status.success(),
        "sender: {}\nreceiver: {}",
        String::from_utf8_lossy(&s.stderr),
        String::from_utf8_lossy(&r.stderr)
    );
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(
        said.contains("reconnection(s)"),
        "the link was never cut: {said}"
    );
    proxy_thread.join().expect("proxy");
    assert_eq!(output(&r_job), truth(&r_ids, &s_ids));
}

/// The peak memory a party's summary reports, in bytes.
fn peak(said: &str) -> f64 {
    let text = said
        .split("peak memory ")
        .nth(1)
        .unwrap_or_else(|| panic!("no peak memory in {said}"));
    let mut words = text.split_whitespace();
    let value: f64 = words.next().and_then(|v| v.parse().ok()).expect("a number");
    let unit = match words.next() {
        Some("KiB") => 1024.0,
        Some("MiB") => 1024.0 * 1024.0,
        Some("GiB") => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    value * unit
}

#[test]
fn peak_memory_follows_the_budget_not_the_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut peaks = Vec::new();
    for (k, n) in [(1u64, 20_000u64), (8, 160_000)] {
        let (s_in, _) = input(dir.path(), &format!("s{k}.csv"), 5, n, 2 * n);
        let (r_in, _) = input(dir.path(), &format!("r{k}.csv"), 6, n, 2 * n);
        let addr = format!("127.0.0.1:{}", free_port());
        let (s_job, r_job) = (
            dir.path().join(format!("ms{k}")),
            dir.path().join(format!("mr{k}")),
        );
        let budget = ["--memory", "3M"];
        let s = party("send", &s_in, &s_job, ("--listen", &addr), false)
            .args(budget)
            .spawn()
            .expect("send");
        let r = party("receive", &r_in, &r_job, ("--connect", &addr), false)
            .args(budget)
            .spawn()
            .expect("receive");
        let (s, r) = (finish(s, "sender"), finish(r, "receiver"));
        peaks.push((peak(&s), peak(&r)));
    }
    let (small, large) = (peaks[0], peaks[1]);
    let slack = 12.0 * 1024.0 * 1024.0;
    assert!(large.0 < small.0 + slack, "sender: {small:?} -> {large:?}");
    assert!(
        large.1 < small.1 + slack,
        "receiver: {small:?} -> {large:?}"
    );
}

#[test]
fn a_circuit_psi_job_prints_the_whole_sum_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_in, s_ids) = input(dir.path(), "s.csv", 5, 3000, 6000);
    let (r_in, r_ids) = input(dir.path(), "r.csv", 6, 2000, 6000);
    // The value column `n` holds each row's number: a key's rows add up.
    let sums = |ids: &[u64]| {
        let mut m = std::collections::HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            *m.entry(*id).or_insert(0u64) += i as u64;
        }
        m
    };
    let (s_sums, r_sums) = (sums(&s_ids), sums(&r_ids));
    let common: Vec<u64> = r_sums
        .keys()
        .filter(|id| s_sums.contains_key(id))
        .copied()
        .collect();
    let addr = format!("127.0.0.1:{}", free_port());
    let party = |role: &str, input: &Path, job: &str, peer: [&str; 2]| {
        let mut cmd = psikit();
        cmd.args([
            "cpsi",
            "sum",
            role,
            "--key",
            "email",
            "--value-columns",
            "n",
            "-i",
        ])
        .arg(input)
        .arg("--job-dir")
        .arg(dir.path().join(job))
        .args(peer)
        .args(["--bucket-items", BUCKET_ITEMS, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        cmd.spawn().expect("spawn")
    };
    let s = party("send", &s_in, "s", ["--listen", &addr]);
    let r = party("receive", &r_in, "r", ["--connect", &addr]);
    finish(s, "sender");
    let said = finish(r, "receiver");
    let got: serde_json::Value = serde_json::from_str(said.trim()).expect("one JSON object");
    let want = serde_json::json!({
        "application": "sum",
        "intersection_size": common.len(),
        "sender_sums": [common.iter().map(|id| s_sums[id]).sum::<u64>()],
        "receiver_sums": [common.iter().map(|id| r_sums[id]).sum::<u64>()],
    });
    for key in [
        "application",
        "intersection_size",
        "sender_sums",
        "receiver_sums",
    ] {
        assert_eq!(got[key], want[key], "{said}");
    }
    // With --json, stdout holds the JSON object alone (the job's summary
    // goes to stderr).
    assert_eq!(said.lines().count(), 1, "{said}");
}

/// The `.psikit-job-*` directories in `dir`.
fn default_job_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".psikit-job-"))
        .collect()
}

/// Without `--job-dir` a run is still a job: its state lives beside the
/// output (the sender's, with no output, in its current directory), stays
/// after a failure so that the same command with `--resume` continues,
/// and is gone once the job has ended.
#[test]
fn a_run_without_a_job_dir_is_a_job_that_resumes_and_cleans_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_in, s_ids) = input(dir.path(), "s.csv", 5, 3000, 6000);
    let (r_in, r_ids) = input(dir.path(), "r.csv", 6, 2000, 6000);
    let out = dir.path().join("out.csv");
    let receiver = |addr: &str, resume: bool| {
        let mut cmd = psikit();
        cmd.args(["psi", "receive", "--key", "email", "-i"])
            .arg(&r_in)
            .arg("-o")
            .arg(&out)
            .args(["--connect", addr, "--retry-secs", "1", "--idle-secs", "60"])
            .args(["--bucket-items", BUCKET_ITEMS]);
        if resume {
            cmd.arg("--resume");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    };
    // Nobody listens: the receiver gives up and keeps its state.
    let addr = format!("127.0.0.1:{}", free_port());
    let failed = receiver(&addr, false).output().expect("receive");
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success());
    assert!(stderr.contains("--resume"), "{stderr}");
    assert_eq!(default_job_dirs(dir.path()).len(), 1);

    let addr = format!("127.0.0.1:{}", free_port());
    let mut send = psikit();
    send.current_dir(dir.path())
        .args(["psi", "send", "--key", "email", "-i"])
        .arg(&s_in)
        .args(["--listen", &addr, "--accept-timeout-secs", "60"])
        .args(["--bucket-items", BUCKET_ITEMS])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let s = send.spawn().expect("send");
    let r = receiver(&addr, true).spawn().expect("receive");
    let said = finish(r, "receiver");
    finish(s, "sender");
    assert!(said.contains("bucket(s) of"), "{said}");
    let text = std::fs::read_to_string(&out).expect("output");
    assert_eq!(text.lines().collect::<Vec<_>>(), truth(&r_ids, &s_ids));
    assert_eq!(default_job_dirs(dir.path()), Vec::<String>::new());
}
