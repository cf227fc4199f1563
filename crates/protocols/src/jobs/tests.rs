//! Jobs end to end over loopback TCP, each party in its own thread as the
//! CLI runs it: bucketed results equal the plaintext truth (and so a
//! one-shot run's), refusals name the difference, and a job stopped part
//! way resumes to the same output.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use psikit_io::{Column, KeySpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::balanced::{Protocol, Role, Settings};
use crate::common::connect::{Peer, ServerAddr};
use crate::common::{NoProgress, Progress};
use crate::error::Error;

/// A CSV of `n` rows `id,row` whose ids come from `0..universe` (so with
/// duplicates when `n` is near `universe`); returns its path and ids.
fn input(dir: &Path, name: &str, seed: u64, n: usize, universe: u64) -> (PathBuf, Vec<u64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ids: Vec<u64> = (0..n).map(|_| rng.gen_range(0..universe)).collect();
    let mut text = String::from("id,row\n");
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!("user{id},{i}\n"));
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write input");
    (path, ids)
}

/// The rows (as written by the job: `userN,i` lines) of `mine` whose id
/// `theirs` holds, in file order.
fn truth(mine: &[u64], theirs: &[u64]) -> Vec<String> {
    let held: HashSet<u64> = theirs.iter().copied().collect();
    mine.iter()
        .enumerate()
        .filter(|(_, id)| held.contains(id))
        .map(|(i, id)| format!("user{id},{i}"))
        .collect()
}

fn rows_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("output");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,row"), "the header comes first");
    lines.map(str::to_owned).collect()
}

fn spec() -> KeySpec {
    KeySpec::new(vec![Column::parse("id").expect("column")])
}

/// A party's options: `bucket_items` per bucket, quick retries.
fn options(settings: &Settings, dir: &Path, name: &str, bucket_items: u64) -> JobOptions {
    let protocol = JobProtocol::Balanced(settings.clone());
    options_for(protocol, dir, name, bucket_items)
}

fn options_for(protocol: JobProtocol, dir: &Path, name: &str, bucket_items: u64) -> JobOptions {
    JobOptions {
        max_bucket_items: Some(bucket_items),
        lanes: 1,
        retry_for: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(60),
        output: Some(dir.join(format!("{name}.out.csv"))),
        ..JobOptions::new(protocol, dir.join(format!("{name}.job")))
    }
}

type Both = (Result<JobOutcome, Error>, Result<JobOutcome, Error>);

/// Runs the sender (listening) and the receiver (connecting) in their own
/// threads.
fn run_pair(
    sender: (&Path, &JobOptions, &(dyn Progress + Sync)),
    receiver: (&Path, &JobOptions, &(dyn Progress + Sync)),
) -> Both {
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let listen = Peer::Listen {
            addr: "127.0.0.1:0".into(),
            tls: None,
            limits: Default::default(),
            accept_timeout: Some(Duration::from_secs(5)),
        };
        let job = |path: &Path, opts: &JobOptions| {
            let mut spec = spec();
            // Circuit PSI's sums take each row's number as its value.
            let columns = opts.protocol.kind().value_columns();
            spec.value_columns = (0..columns)
                .map(|_| Column::parse("row").expect("column"))
                .collect();
            JobInput {
                path: path.to_owned(),
                spec,
            }
        };
        let (s_in, r_in) = (job(sender.0, sender.1), job(receiver.0, receiver.1));
        let a = s.spawn(move || {
            run_blocking(
                &listen,
                Role::Sender,
                &s_in,
                sender.1,
                |addr| {
                    let _ = tx.send(addr.to_owned());
                },
                sender.2,
            )
        });
        let b = s.spawn(move || {
            let Ok(addr) = rx.recv_timeout(Duration::from_secs(30)) else {
                return Err(Error::Misuse("the sender never listened"));
            };
            let connect = Peer::Connect(ServerAddr::plain(addr));
            run_blocking(
                &connect,
                Role::Receiver,
                &r_in,
                receiver.1,
                |_| {},
                receiver.2,
            )
        });
        (
            a.join().expect("sender thread"),
            b.join().expect("receiver thread"),
        )
    })
}

/// [`run_pair`] without progress, both parties succeeding.
fn run_both(
    sender: (&Path, &JobOptions),
    receiver: (&Path, &JobOptions),
) -> (JobOutcome, JobOutcome) {
    let (s, r) = run_pair(
        (sender.0, sender.1, &NoProgress),
        (receiver.0, receiver.1, &NoProgress),
    );
    (s.expect("sender"), r.expect("receiver"))
}

/// The receiver of a finished job resumed (as if stopped while writing
/// its output) after the sender has gone: it ends after a short wait,
/// from its journal alone, running nothing.
fn resume_alone(path: &Path, opts: &JobOptions) -> JobOutcome {
    let opts = JobOptions {
        resume: true,
        retry_for: Duration::from_millis(500),
        ..opts.clone()
    };
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = nobody.local_addr().expect("addr").to_string();
    drop(nobody);
    let mut spec = spec();
    spec.value_columns = (0..opts.protocol.kind().value_columns())
        .map(|_| Column::parse("row").expect("column"))
        .collect();
    let input = JobInput {
        path: path.to_owned(),
        spec,
    };
    let connect = Peer::Connect(ServerAddr::plain(addr));
    let out = run_blocking(&connect, Role::Receiver, &input, &opts, |_| {}, &NoProgress)
        .expect("a side holding everything ends alone");
    assert!(!out.end_confirmed);
    assert_eq!(out.buckets_run, 0);
    out
}

#[test]
fn bucketed_runs_equal_the_truth_for_every_protocol_and_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 1, 3000, 6000);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 2, 1200, 6000);
    // Five rows among 16 buckets: most of the receiver's buckets are empty.
    let (few_path, few_ids) = input(dir.path(), "few.csv", 2, 5, 6000);
    let receivers = [(&r_path, &r_ids), (&few_path, &few_ids)];
    // Protocol, malicious, reveal, bucket items, receiver, lanes (the
    // receiver offers one more: the smaller count runs).
    let cases: Vec<(Settings, u64, usize, u8)> = [
        (Protocol::Vole, false, false, 400, 0, 1),
        (Protocol::Vole, false, true, 1 << 20, 0, 1),
        (Protocol::Vole, true, true, 900, 0, 2),
        (Protocol::Vole, false, false, 300, 1, 3),
        (Protocol::Vole, false, false, 200, 0, 4),
        (Protocol::Rr16, true, false, 1000, 0, 2),
    ]
    .into_iter()
    .filter(|c| c.0.built())
    .map(|(protocol, malicious, reveal, items, receiver, lanes)| {
        let settings = Settings {
            malicious,
            reveal,
            key_format: spec().key_format(),
            ..Settings::new(protocol)
        };
        (settings, items, receiver, lanes)
    })
    .collect();
    for (i, (settings, items, receiver, lanes)) in cases.iter().enumerate() {
        let (r_path, r_ids) = receivers[*receiver];
        let mut s_opts = options(settings, dir.path(), &format!("s{i}"), *items);
        let mut r_opts = options(settings, dir.path(), &format!("r{i}"), *items);
        (s_opts.lanes, r_opts.lanes) = (*lanes, lanes + 1);
        let (s, r) = run_both((&s_path, &s_opts), (r_path, &r_opts));
        assert_eq!(s.job_id, r.job_id);
        assert_eq!(s.shape, r.shape);
        assert!(s.shape.buckets > 1 || *items == 1 << 20, "{:?}", s.shape);
        assert_eq!(s.buckets_run, s.shape.buckets);
        let ran: Vec<u64> = s.bucket_bytes.iter().map(|&(b, _)| b).collect();
        assert_eq!(ran, (0..s.shape.buckets).collect::<Vec<_>>());
        // Padding: every VOLE-PSI bucket costs the same bytes, whatever
        // its fill. (With --reveal the receiver also sends each bucket's
        // matches, which the sender learns anyway; RR16's cut-and-choose
        // opens a random number of OTs, independent of the sets.)
        if settings.protocol == Protocol::Vole && !settings.reveal {
            let first = s.bucket_bytes[0].1;
            assert!(
                s.bucket_bytes.iter().all(|&(_, b)| b == first),
                "{:?}",
                s.bucket_bytes
            );
        }
        assert_eq!(s.bucket_bytes, r.bucket_bytes);
        let want = truth(r_ids, &s_ids);
        assert_eq!(r.matched_rows, Some(want.len() as u64));
        assert_eq!(rows_of(r_opts.output.as_ref().expect("output")), want);
        match settings.reveal {
            true => assert_eq!(
                rows_of(s_opts.output.as_ref().expect("output")),
                truth(&s_ids, r_ids)
            ),
            false => assert_eq!(s.matched_rows, None),
        }
    }
}

/// Stops its party (as Ctrl-C or a kill would) once `after` buckets are
/// committed, or once all are if there are fewer.
struct StopAfter {
    after: u64,
    /// The job's buckets, once the bucket stage began.
    total: AtomicU64,
    done: AtomicU64,
}

impl StopAfter {
    fn new(after: u64) -> Self {
        Self {
            after,
            total: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }
}

impl Progress for StopAfter {
    fn stage(&self, what: &str, total: Option<u64>) {
        if what == "buckets" {
            self.done.store(0, Ordering::SeqCst);
            self.total.store(total.unwrap_or(0), Ordering::SeqCst);
        }
    }
    fn advance(&self, done: u64) {
        self.done.store(done, Ordering::SeqCst);
    }
    fn cancelled(&self) -> bool {
        let total = self.total.load(Ordering::SeqCst);
        total > 0 && self.done.load(Ordering::SeqCst) >= self.after.min(total)
    }
}

#[test]
fn a_stopped_job_resumes_to_the_same_output_and_other_inputs_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 3, 2500, 5000);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 4, 2000, 5000);
    let settings = Settings::new(Protocol::Vole);
    let mut s_opts = options(&settings, dir.path(), "s", 300);
    let mut r_opts = options(&settings, dir.path(), "r", 300);
    let stop = StopAfter::new(3);
    let (s, r) = run_pair((&s_path, &s_opts, &NoProgress), (&r_path, &r_opts, &stop));
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(s.is_err(), "the sender gives up once its retries run out");

    // Without --resume the job directory is refused.
    let (s, _) = run_pair(
        (&s_path, &s_opts, &NoProgress),
        (&r_path, &r_opts, &NoProgress),
    );
    assert!(s.expect_err("refused").to_string().contains("--resume"));

    s_opts.resume = true;
    r_opts.resume = true;
    let (s, _) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
    // The receiver stopped once 3 buckets were committed (on both sides:
    // each commits a bucket when its run ends): exactly those are skipped.
    assert_eq!(s.buckets_run, s.shape.buckets - 3, "{:?}", s.shape);
    assert_eq!(
        rows_of(r_opts.output.as_ref().expect("output")),
        truth(&r_ids, &s_ids)
    );

    // A job directory that met another input refuses it.
    let (other, _) = input(dir.path(), "r.csv", 5, 2000, 5000);
    let (_, r) = run_pair(
        (&s_path, &s_opts, &NoProgress),
        (&other, &r_opts, &NoProgress),
    );
    assert!(r
        .expect_err("refused")
        .to_string()
        .contains("changed since the job began"));
}

#[test]
fn a_job_on_lanes_stops_and_resumes_on_other_lanes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 13, 2500, 5000);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 14, 2000, 5000);
    let settings = Settings::new(Protocol::Vole);
    let mut s_opts = options(&settings, dir.path(), "s", 250);
    let mut r_opts = options(&settings, dir.path(), "r", 250);
    (s_opts.lanes, r_opts.lanes) = (3, 3);
    let stop = StopAfter::new(4);
    let (s, r) = run_pair((&s_path, &s_opts, &NoProgress), (&r_path, &r_opts, &stop));
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(s.is_err());

    (s_opts.resume, r_opts.resume) = (true, true);
    (s_opts.lanes, r_opts.lanes) = (2, 4);
    let (s, _) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
    // The receiver committed 4 buckets; the sender those and perhaps
    // another lane's last: no more than the 4 are skipped.
    assert!(s.shape.buckets >= 8, "{:?}", s.shape);
    assert_eq!(s.buckets_run, s.shape.buckets - 4, "{:?}", s.bucket_bytes);
    assert_eq!(
        rows_of(r_opts.output.as_ref().expect("output")),
        truth(&r_ids, &s_ids)
    );
}

#[test]
fn mismatched_terms_are_refused_on_both_sides() {
    if !(Protocol::Vole.built() && Protocol::Rr16.built()) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, _) = input(dir.path(), "s.csv", 6, 100, 1000);
    let (r_path, _) = input(dir.path(), "r.csv", 7, 100, 1000);
    let s_opts = options(&Settings::new(Protocol::Rr16), dir.path(), "s", 1000);
    let r_opts = options(&Settings::new(Protocol::Vole), dir.path(), "r", 1000);
    let (s, r) = run_pair(
        (&s_path, &s_opts, &NoProgress),
        (&r_path, &r_opts, &NoProgress),
    );
    assert_eq!(
        s.expect_err("refused").to_string(),
        "the peer runs VOLE-PSI, this side RR16"
    );
    assert_eq!(
        r.expect_err("refused").to_string(),
        "the peer runs RR16, this side VOLE-PSI"
    );
}

#[test]
fn a_job_and_a_one_shot_run_refuse_each_other_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, _) = input(dir.path(), "s.csv", 8, 50, 1000);
    let settings = Settings::new(Protocol::Vole);
    let s_opts = options(&settings, dir.path(), "s", 1000);
    let (tx, rx) = mpsc::channel();
    let (s, r) = std::thread::scope(|sc| {
        let (s_path, s_opts) = (&s_path, &s_opts);
        let a = sc.spawn(move || {
            let listen = Peer::Listen {
                addr: "127.0.0.1:0".into(),
                tls: None,
                limits: Default::default(),
                accept_timeout: Some(Duration::from_secs(5)),
            };
            let job = JobInput {
                path: s_path.clone(),
                spec: spec(),
            };
            let announce = |addr: &str| drop(tx.send(addr.to_owned()));
            run_blocking(&listen, Role::Sender, &job, s_opts, announce, &NoProgress)
        });
        let settings = &settings;
        let b = sc.spawn(move || {
            let addr = rx.recv_timeout(Duration::from_secs(30)).expect("listening");
            let peer = Peer::Connect(ServerAddr::plain(addr));
            let keys = vec![b"a".to_vec()];
            crate::balanced::run_blocking(
                &peer,
                Role::Receiver,
                &keys,
                settings,
                |_| {},
                &NoProgress,
            )
        });
        (a.join().expect("sender"), b.join().expect("receiver"))
    });
    let want = ": run both as jobs (the CLI's default, job_dir= in Python) or both with --one-shot";
    assert_eq!(
        s.expect_err("refused").to_string(),
        format!("the peer runs a one-shot run (--one-shot), this side a bucketed job{want}")
    );
    assert_eq!(
        r.expect_err("refused").to_string(),
        format!("the peer runs a bucketed job, this side a one-shot run (--one-shot){want}")
    );
}

#[test]
fn a_side_holding_every_bucket_ends_when_the_last_exchange_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 6, 1500, 3000);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 7, 1200, 3000);
    let settings = Settings::new(Protocol::Vole);
    let mut s_opts = options(&settings, dir.path(), "s", 300);
    let mut r_opts = options(&settings, dir.path(), "r", 300);
    // The receiver vanishes right after committing its last bucket, before
    // the end is exchanged; the sender (whose part of each bucket ends
    // first) holds every bucket and ends after its short wait.
    let stop = StopAfter::new(u64::MAX);
    let (s, r) = run_pair((&s_path, &s_opts, &NoProgress), (&r_path, &r_opts, &stop));
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    let s = s.expect("the complete side ends");
    assert!(!s.end_confirmed);
    assert_eq!(s.buckets_run, s.shape.buckets);

    // Resumed, both journals are whole: nothing is run again.
    s_opts.resume = true;
    r_opts.resume = true;
    let (s, r) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
    assert!(s.end_confirmed && r.end_confirmed);
    assert_eq!((s.buckets_run, r.buckets_run), (0, 0));
    let output = r_opts.output.as_ref().expect("output");
    assert_eq!(rows_of(output), truth(&r_ids, &s_ids));

    std::fs::remove_file(output).expect("remove the output");
    resume_alone(&r_path, &r_opts);
    assert_eq!(rows_of(output), truth(&r_ids, &s_ids));
}

#[cfg(feature = "cpsi")]
#[test]
fn circuit_psi_jobs_open_the_whole_result_once() {
    use crate::cpsi::{App, CpsiConfig, Output, Reveal, Sums};
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 11, 1500, 2500);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 12, 1100, 2500);
    // Distinct ids on each side, with the sum of their rows' numbers.
    let sums_of = |ids: &[u64]| {
        let mut m = std::collections::HashMap::new();
        for (i, id) in ids.iter().enumerate() {
            *m.entry(*id).or_insert(0u64) += i as u64;
        }
        m
    };
    let (s_sums, r_sums) = (sums_of(&s_ids), sums_of(&r_ids));
    let common: Vec<u64> = r_sums
        .keys()
        .filter(|id| s_sums.contains_key(id))
        .copied()
        .collect();
    let cardinality = common.len() as u64;
    let want = Sums {
        cardinality,
        sender_values: vec![common.iter().map(|id| s_sums[id]).sum()],
        receiver_values: vec![common.iter().map(|id| r_sums[id]).sum()],
        inner_product: None,
    };
    let run = |config: CpsiConfig, columns: u8, name: &str| {
        let protocol = |value_columns| JobProtocol::Circuit {
            config: config.clone(),
            value_columns,
        };
        let mut s_opts = options_for(protocol(columns), dir.path(), &format!("s-{name}"), 300);
        let mut r_opts = options_for(protocol(columns), dir.path(), &format!("r-{name}"), 300);
        // Two buckets at once: the shares still add up over the job.
        (s_opts.lanes, r_opts.lanes) = (2, 2);
        let (s, r) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
        assert!(s.shape.buckets >= 4, "{:?}", s.shape);
        assert_eq!(s.matched_rows, None);
        // Every bucket costs the same bytes, whatever its fill.
        assert!(
            r.bucket_bytes.windows(2).all(|w| w[0].1 == w[1].1),
            "{:?}",
            r.bucket_bytes
        );
        let r_alone = resume_alone(&r_path, &r_opts);
        assert_eq!(r_alone.circuit, r.circuit);
        (s.circuit.expect("sender"), r.circuit.expect("receiver"))
    };
    let mut cardinality_to_both = CpsiConfig::new(App::Cardinality);
    cardinality_to_both.reveal = Reveal::Both;
    let known = Output::Cardinality(Some(cardinality));
    assert_eq!(run(cardinality_to_both, 0, "card"), (known.clone(), known));
    let (s, r) = run(CpsiConfig::new(App::Sum), 1, "sum");
    assert_eq!((s, r), (Output::Sum(None), Output::Sum(Some(want))));
    let mut guarded = CpsiConfig::new(App::Sum);
    guarded.min_intersection = cardinality + 1;
    let withheld = Output::SumWithheld(cardinality + 1);
    assert_eq!(run(guarded, 1, "guard"), (withheld.clone(), withheld));
    for t in [cardinality, cardinality + 1] {
        let (_, r) = run(CpsiConfig::new(App::Threshold(t)), 0, &format!("t{t}"));
        assert_eq!(r, Output::Threshold(Some(cardinality >= t)), "t {t}");
    }
}

#[cfg(feature = "cpsi")]
#[test]
fn a_shares_job_writes_every_bucket_s_shares_of_the_whole_intersection() {
    use crate::cpsi::{App, CpsiConfig};
    use std::collections::HashMap;
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, s_ids) = input(dir.path(), "s.csv", 15, 1500, 2500);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 16, 1100, 2500);
    let protocol = |value_columns| JobProtocol::Circuit {
        config: CpsiConfig::new(App::Shares),
        value_columns,
    };
    let mut s_opts = options_for(protocol(1), dir.path(), "s-shares", 300);
    let mut r_opts = options_for(protocol(0), dir.path(), "r-shares", 300);
    (s_opts.lanes, r_opts.lanes) = (2, 2);
    let (s, r) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
    assert!(s.shape.buckets >= 4, "{:?}", s.shape);
    assert_eq!(s.written, r.written);
    let lines = |opts: &JobOptions| -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(opts.output.as_ref().expect("output")).expect("read");
        text.lines()
            .map(|l| l.split(',').map(str::to_owned).collect())
            .collect()
    };
    let (s_lines, r_lines) = (lines(&s_opts), lines(&r_opts));
    assert_eq!(s_lines[0].join(","), "bucket,bin,share,value_share_1");
    assert_eq!(r_lines[0].join(","), "bucket,bin,share,value_share_1,row");
    assert_eq!(s_lines.len() as u64, s.written.expect("bins") + 1);
    // The sender's value of an id: the sum of its rows' `row` column.
    let mut value: HashMap<u64, u64> = HashMap::new();
    for (i, id) in s_ids.iter().enumerate() {
        *value.entry(*id).or_default() += i as u64;
    }
    let (mut members, mut seen) = (0, HashSet::new());
    for (a, b) in s_lines[1..].iter().zip(&r_lines[1..]) {
        assert_eq!(a[..2], b[..2], "the same bucket and bin");
        let bit = |l: &[String]| l[2].parse::<u8>().expect("share");
        let word = |l: &[String]| l[3].parse::<u64>().expect("value share");
        let id = (!b[4].is_empty()).then(|| {
            let row: usize = b[4].parse().expect("row");
            r_ids[row - 1]
        });
        if let Some(id) = id {
            assert!(seen.insert(id), "id {id} in two bins");
        }
        let member = bit(a) ^ bit(b) == 1;
        assert_eq!(member, id.is_some_and(|id| value.contains_key(&id)));
        if let (true, Some(id)) = (member, id) {
            members += 1;
            assert_eq!(word(a).wrapping_add(word(b)), value[&id], "id {id}");
        }
    }
    let r_set: HashSet<u64> = r_ids.iter().copied().collect();
    assert_eq!(seen, r_set, "every receiver id has its bin");
    assert_eq!(
        members,
        r_set.iter().filter(|id| value.contains_key(id)).count()
    );
}

#[cfg(feature = "cpsi")]
#[test]
fn a_union_job_writes_every_key_once_and_no_padding() {
    use crate::cpsi::{App, CpsiConfig, Reveal};
    let dir = tempfile::tempdir().expect("tempdir");
    // The learner (the sender) and the provider, with duplicates.
    let (s_path, s_ids) = input(dir.path(), "s.csv", 17, 1500, 2500);
    let (r_path, r_ids) = input(dir.path(), "r.csv", 18, 1100, 2500);
    let mut config = CpsiConfig::new(App::Union);
    config.reveal = Reveal::Sender;
    let protocol = JobProtocol::Circuit {
        config,
        value_columns: 0,
    };
    let mut s_opts = options_for(protocol.clone(), dir.path(), "s-union", 300);
    let mut r_opts = options_for(protocol, dir.path(), "r-union", 300);
    (s_opts.lanes, r_opts.lanes) = (2, 2);
    let (s, r) = run_both((&s_path, &s_opts), (&r_path, &r_opts));
    assert!(s.shape.buckets >= 4, "{:?}", s.shape);
    let want: HashSet<String> = s_ids
        .iter()
        .chain(&r_ids)
        .map(|id| format!("user{id}"))
        .collect();
    let text = std::fs::read_to_string(s_opts.output.as_ref().expect("output")).expect("union");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("key"));
    let keys: Vec<&str> = lines.collect();
    let got: HashSet<String> = keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(keys.len(), got.len(), "every key once");
    assert_eq!(got, want, "the union, and no padding");
    assert_eq!(s.written, Some(want.len() as u64));
    assert_eq!(r.written, None, "the provider learns nothing");
    assert!(!r_opts.output.as_ref().expect("path").exists());
}

#[cfg(feature = "cpsi")]
#[test]
fn a_circuit_job_refuses_a_peer_on_other_terms() {
    use crate::cpsi::{App, CpsiConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let (s_path, _) = input(dir.path(), "s.csv", 13, 500, 1000);
    let (r_path, _) = input(dir.path(), "r.csv", 14, 500, 1000);
    let circuit = |app| JobProtocol::Circuit {
        config: CpsiConfig::new(app),
        value_columns: 0,
    };
    let s_opts = options_for(circuit(App::Threshold(10)), dir.path(), "s", 300);
    let r_opts = options(&Settings::new(Protocol::Vole), dir.path(), "r", 300);
    let (s, r) = run_pair(
        (&s_path, &s_opts, &NoProgress),
        (&r_path, &r_opts, &NoProgress),
    );
    let (s, r) = (
        s.expect_err("refused").to_string(),
        r.expect_err("refused").to_string(),
    );
    assert!(
        s.contains(
            "the peer runs VOLE-PSI (semi-honest), this side circuit PSI threshold --threshold 10"
        ),
        "{s}"
    );
    assert!(r.contains("the peer runs circuit PSI threshold"), "{r}");
}
