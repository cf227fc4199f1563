//! Cluster jobs over loopback in one process: each party's driver in a
//! thread of its own, the listening party's workers and the connecting
//! party's bucket tasks in threads beside it. The output equals the truth
//! (as a one-machine job's does), whatever the parts and worker counts,
//! and a driver that stops after some buckets resumes to the same output.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use psikit_io::{Column, KeySpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::balanced::{Protocol, Role, Settings};
use crate::common::connect::{runtime, Peer, ServerAddr};
use crate::common::NoProgress;
use crate::error::Error;

fn spec() -> KeySpec {
    KeySpec::new(vec![Column::parse("id").expect("column")])
}

/// `n` random ids written as `parts` CSV files (`id,row` rows, `row`
/// counting over the whole input): the input's own files in `files`, or
/// with `None` the workers' copies inside the job in `job_dir`. Returns
/// the ids and the parts' paths.
fn write_parts(
    job_dir: &Path,
    files: Option<&Path>,
    seed: u64,
    n: usize,
    parts: u64,
) -> (Vec<u64>, Vec<PathBuf>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ids: Vec<u64> = (0..n).map(|_| rng.gen_range(0..4 * n as u64)).collect();
    let per = n.div_ceil(parts as usize);
    let mut paths = Vec::new();
    for p in 0..parts {
        let path = match files {
            Some(dir) => dir.join(format!("input-{seed}-{p}.csv")),
            None => part_rows_path(job_dir, p),
        };
        std::fs::create_dir_all(path.parent().expect("parent")).expect("rows dir");
        let mut text = String::from("id,row\n");
        let first = p as usize * per;
        for (i, id) in ids.iter().enumerate().skip(first).take(per) {
            text.push_str(&format!("user{id},{i}\n"));
        }
        std::fs::write(&path, text).expect("part");
        paths.push(path);
    }
    (ids, paths)
}

fn sorted_rows(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("output");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,row"), "the header comes first");
    let mut rows: Vec<String> = lines.map(str::to_owned).collect();
    rows.sort();
    rows
}

fn truth(mine: &[u64], theirs: &[u64]) -> Vec<String> {
    let held: HashSet<u64> = theirs.iter().copied().collect();
    let mut rows: Vec<String> = mine
        .iter()
        .enumerate()
        .filter(|(_, id)| held.contains(id))
        .map(|(i, id)| format!("user{id},{i}"))
        .collect();
    rows.sort();
    rows
}

fn options(settings: &Settings, dir: &Path, name: &str) -> JobOptions {
    JobOptions {
        max_bucket_items: Some(300),
        retry_for: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(60),
        output: Some(dir.join(format!("{name}.out.csv"))),
        ..JobOptions::new(JobProtocol::Balanced(settings.clone()), dir.join(name))
    }
}

/// The listening party: its driver steps while `workers` worker threads
/// serve the buckets its relay hands them.
fn listening_party(
    opts: &JobOptions,
    parts: &[PathBuf],
    workers: u32,
    addr: mpsc::Sender<String>,
) -> JobOutcome {
    let rt = runtime().expect("runtime");
    rt.block_on(async {
        let peer = Peer::Listen {
            addr: "127.0.0.1:0".into(),
            tls: None,
            limits: Default::default(),
            accept_timeout: None,
        };
        let announce = |a: &str| addr.send(a.to_owned()).expect("announce");
        let job = ClusterJob::open(
            Role::Sender,
            opts.clone(),
            spec(),
            &peer,
            "127.0.0.1:0",
            workers,
            announce,
        )
        .await
        .expect("open");
        record_parts(&job, parts);
        let (relay, ticket) = job.relay().expect("a relay");
        let mut serving: Vec<tokio::task::JoinHandle<Result<u64, Error>>> = Vec::new();
        loop {
            match job.step(&NoProgress).await.expect("step") {
                Step::Done(outcome) => {
                    for w in serving {
                        w.await.expect("worker").expect("served");
                    }
                    return *outcome;
                }
                Step::Todo(_) if serving.is_empty() => {
                    for _ in 0..workers {
                        let worker = BucketWorker::open(
                            &opts.job_dir,
                            Role::Sender,
                            opts.protocol.clone(),
                            Default::default(),
                        )
                        .expect("worker");
                        let relay = relay.clone();
                        serving.push(tokio::spawn(
                            async move { worker.serve(&relay, ticket).await },
                        ));
                    }
                }
                Step::Todo(_) => {}
            }
        }
    })
}

fn record_parts(job: &ClusterJob, parts: &[PathBuf]) {
    if job.input().expect("input").is_none() {
        let summaries: Vec<(PathBuf, InputSummary)> = parts
            .iter()
            .enumerate()
            .map(|(p, path)| {
                let s = spool_part(job.dir(), p as u64, path, &spec()).expect("spool");
                (path.clone(), s)
            })
            .collect();
        job.set_parts(&summaries).expect("parts");
    } else {
        job.check_parts().expect("the same input");
    }
}

/// The connecting party's driver, running each step's buckets `tasks` at
/// a time; stops after `stop_after` buckets when given (a driver killed
/// mid-job), returning `None`.
fn connecting_party(
    opts: &JobOptions,
    addr: &str,
    parts: &[PathBuf],
    tasks: usize,
    stop_after: Option<usize>,
) -> Option<JobOutcome> {
    let rt = runtime().expect("runtime");
    rt.block_on(async {
        let server = ServerAddr::plain(addr);
        let peer = Peer::Connect(server.clone());
        let job = ClusterJob::open(Role::Receiver, opts.clone(), spec(), &peer, "", 1, |_| {})
            .await
            .expect("open");
        record_parts(&job, parts);
        loop {
            let todo = match job.step(&NoProgress).await.expect("step") {
                Step::Done(outcome) => return Some(*outcome),
                Step::Todo(todo) => todo,
            };
            let (token, peer_workers) = job.bucket_token().expect("a token");
            assert!(peer_workers >= 1);
            let worker = std::sync::Arc::new(
                BucketWorker::open(
                    &opts.job_dir,
                    Role::Receiver,
                    opts.protocol.clone(),
                    Default::default(),
                )
                .expect("worker"),
            );
            let take = stop_after.map_or(todo.len(), |n| n.min(todo.len()));
            // Runs of buckets, as many at once as both sides have workers.
            let per_run = take.div_ceil(tasks.min(peer_workers as usize)).max(1);
            let runs: Vec<_> = todo[..take]
                .chunks(per_run)
                .map(|run| {
                    let (worker, server, run) = (worker.clone(), server.clone(), run.to_vec());
                    tokio::spawn(async move {
                        let retry = Duration::from_secs(5);
                        let cost = worker.run_remote(&run, &server, token, retry).await;
                        (run, cost)
                    })
                })
                .collect();
            for r in runs {
                let (run, cost) = r.await.expect("task");
                assert!(cost.expect("run").bytes_sent > 0);
                // A run's task run again skips what it committed.
                let again = worker.run_remote(&run, &server, token, Duration::from_secs(5));
                assert_eq!(again.await.expect("again").bytes_sent, 0);
            }
            if stop_after.is_some() {
                return None;
            }
        }
    })
}

#[test]
fn a_cluster_job_equals_the_truth_and_resumes_after_its_driver_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        key_format: spec().key_format(),
        ..Settings::new(Protocol::Vole)
    };
    // Worker counts differ between the parties; parts differ too: the
    // sender's input is three files of its own, the receiver's two
    // workers' copies in its job directory.
    let s_opts = options(&settings, dir.path(), "s");
    let mut r_opts = options(&settings, dir.path(), "r");
    let (s_ids, s_parts) = write_parts(&s_opts.job_dir, Some(dir.path()), 1, 2000, 3);
    let (r_ids, r_parts) = write_parts(&r_opts.job_dir, None, 2, 900, 2);
    let (tx, rx) = mpsc::channel();
    let (s, r) = std::thread::scope(|scope| {
        let s = scope.spawn(|| listening_party(&s_opts, &s_parts, 2, tx));
        let addr = rx.recv_timeout(Duration::from_secs(30)).expect("listening");
        // The receiver's driver stops after two buckets, then resumes.
        let stopped = connecting_party(&r_opts, &addr, &r_parts, 3, Some(2));
        assert!(stopped.is_none());
        r_opts.resume = true;
        let r = connecting_party(&r_opts, &addr, &r_parts, 3, None).expect("resumed");
        (s.join().expect("sender"), r)
    });
    assert_eq!(s.job_id, r.job_id);
    assert!(r.shape.buckets > 2, "{:?}", r.shape);
    assert_eq!(r.input.rows, 900);
    let out = r_opts.output.as_ref().expect("output");
    assert_eq!(sorted_rows(out), truth(&r_ids, &s_ids));
    assert_eq!(r.matched_rows, Some(truth(&r_ids, &s_ids).len() as u64));
    assert!(s.matched_rows.is_none(), "the sender learns nothing");
    assert!(!s_opts.output.as_ref().expect("output").exists());
    assert!(
        s_parts.iter().all(|p| p.exists()),
        "the input's own files stay"
    );
    assert!(
        !r_opts.job_dir.join("rows").exists(),
        "the workers' copies go"
    );
}

#[test]
fn the_relay_refuses_a_stale_bucket_connection_and_a_foreign_worker() {
    use psikit_transport::net;

    use super::terms::{Attach, ClusterOpen, JobDone};

    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        key_format: spec().key_format(),
        ..Settings::new(Protocol::Vole)
    };
    let opts = options(&settings, dir.path(), "s");
    let rt = runtime().expect("runtime");
    rt.block_on(async {
        let peer = Peer::Listen {
            addr: "127.0.0.1:0".into(),
            tls: None,
            limits: Default::default(),
            accept_timeout: None,
        };
        let mut addr = String::new();
        let job = ClusterJob::open(Role::Sender, opts, spec(), &peer, "127.0.0.1:0", 1, |a| {
            addr = a.to_owned()
        })
        .await
        .expect("open");
        // No control connection yet, so no token is current: a bucket
        // connection is refused with a reason, never handed to a worker.
        let mut ch = net::connect(&addr, None, Default::default())
            .await
            .expect("dial");
        let open = ClusterOpen {
            token: [7; 16],
            bucket: Some(0),
        };
        ch.send_msg(&open).await.expect("send");
        let refused = ch.recv_msg::<JobDone>(()).await;
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("another control connection")),
            "{refused:?}"
        );
        // A worker without the driver's ticket is refused too.
        let (relay, ticket) = job.relay().expect("relay");
        let mut wrong = ticket;
        wrong[0] ^= 1;
        let mut ch = net::connect(&relay, None, Default::default())
            .await
            .expect("dial");
        ch.send_msg(&Attach { ticket: wrong }).await.expect("send");
        let refused = ch.recv_msg::<JobDone>(()).await;
        assert!(
            matches!(&refused, Err(e) if e.to_string().contains("ticket")),
            "{refused:?}"
        );
    });
}
