//! Throughput of psikit's OT extension: two parties in one process, over
//! loopback TCP and in memory.
//!
//! ```sh
//! cargo run --release -p psikit-ot --example ot_bench
//! cargo run --release -p psikit-ot --example ot_bench -- --log-n 20 --reps 5 --threads 1
//! ```
//!
//! Options (comma-separated lists): `--log-n 20,24`, `--threads 1,2` (rayon
//! threads per party), `--transport tcp,mem`, `--security iknp,kos`,
//! `--hash lazy,eager`, `--reps 3`, `--calls 1` (extensions of `2^log-n`
//! OTs each on the same two instances, as RR16 runs one per chunk; rates
//! and CPU figures are per OT over all of them).
//!
//! For each case it prints medians over the repetitions of:
//! * `OT/s`: random OTs per second of the extension (both parties done),
//!   excluding base OTs; `per core` divides by the threads of one party
//!   (each party has its own threads, so a 1-thread run uses one core per
//!   side);
//! * `incl. base`: the same including the 128 base OTs (setup);
//! * `bits/OT`: bytes sent in both directions during the extension, × 8 / n;
//! * `S ns`, `R ns`, `io ns`: CPU time per OT during the extension of the
//!   sender's pool threads, the receiver's pool threads, and every other
//!   thread (tokio workers moving bytes, the main thread), from
//!   `/proc/self/task/*/schedstat`. Unlike the wall-clock rates these hardly
//!   depend on other load on the machine: `1e9 / max(S ns, R ns)` is about
//!   the rate with one otherwise idle core per side;
//! * `lazy` returns the correlated rows (hash on demand, `extend`); `eager`
//!   hashes every random-OT message on both sides during the extension
//!   (`extend_random`).

use std::time::{Duration, Instant};

use psikit_ot::{ChoiceBits, ExtConfig, OtExtReceiver, OtExtSender, Security, SessionId};
use psikit_transport::net::{connect, Listener};
use psikit_transport::{Channel, Limits};
use rand::rngs::StdRng;
use rand::SeedableRng;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Transport {
    Tcp,
    Mem,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    transport: Transport,
    security: Security,
    log_n: u32,
    threads: usize,
    eager: bool,
    calls: usize,
}

/// One measured run.
struct Sample {
    setup: Duration,
    extend: Duration,
    ext_bytes: u64,
    setup_bytes: u64,
    /// CPU ns during the extension: sender pool, receiver pool, rest.
    ext_cpu_ns: [u64; 3],
}

/// CPU time (ns) consumed so far by the live threads of this process:
/// `[sender pool, receiver pool, everything else]`, told apart by thread
/// name (Linux `/proc/self/task/*/{comm,schedstat}`; zeros elsewhere).
fn cpu_by_role() -> [u64; 3] {
    let mut out = [0u64; 3];
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let Some(ns) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        else {
            continue;
        };
        let role = if comm.starts_with("ot-send") {
            0
        } else if comm.starts_with("ot-recv") {
            1
        } else {
            2
        };
        out[role] += ns;
    }
    out
}

/// A party's configuration with its own named pool of `threads` threads.
fn config(threads: usize, name: &'static str) -> ExtConfig {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .expect("pool");
    ExtConfig {
        pool: Some(std::sync::Arc::new(pool)),
        ..ExtConfig::default()
    }
}

/// Connected channels for one run.
async fn channels(transport: Transport) -> (Channel, Channel) {
    let limits = Limits {
        read_timeout: Duration::from_secs(600),
        write_timeout: Duration::from_secs(600),
        ..Limits::default()
    };
    match transport {
        Transport::Mem => Channel::memory_pair(limits),
        Transport::Tcp => {
            let listener = Listener::bind("127.0.0.1:0", None, limits)
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr").to_string();
            let accept = tokio::spawn(async move {
                listener
                    .accept()
                    .await
                    .expect("accept")
                    .handshake()
                    .await
                    .expect("handshake")
            });
            let client = connect(&addr, None, limits).await.expect("connect");
            (accept.await.expect("accept task"), client)
        }
    }
}

/// Sets up both parties and extends `2^log_n` random OTs `case.calls`
/// times.
async fn run_once(case: Case, seed: u64) -> Sample {
    let n = 1usize << case.log_n;
    let calls = case.calls;
    let (mut cs, mut cr) = channels(case.transport).await;
    let scfg = config(case.threads, "ot-send");
    let rcfg = config(case.threads, "ot-recv");
    let choices = ChoiceBits::random(n, &mut StdRng::seed_from_u64(seed));
    let sid = SessionId::new(&seed.to_be_bytes());
    let security = case.security;

    let t0 = Instant::now();
    let sender = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed ^ 1);
        let s = OtExtSender::setup(&mut cs, &sid, security, scfg, &mut rng)
            .await
            .expect("sender setup");
        (s, cs)
    });
    let mut rng = StdRng::seed_from_u64(seed ^ 2);
    let mut r = OtExtReceiver::setup(&mut cr, &sid, security, rcfg, &mut rng)
        .await
        .expect("receiver setup");
    let (mut s, mut cs) = sender.await.expect("sender task");
    let setup = t0.elapsed();
    let setup_bytes = cs.bytes_sent() + cr.bytes_sent();

    // Lazy: correlated rows, messages hashed when asked for. Eager:
    // `extend_random`, which hashes every message during the extension.
    let cpu1 = cpu_by_role();
    let t1 = Instant::now();
    let eager = case.eager;
    let sender = tokio::spawn(async move {
        let mut ots = None;
        for _ in 0..calls {
            // The previous call's output is dropped first, as in RR16.
            drop(ots.take());
            ots = Some(if eager {
                Err(s.extend_random(&mut cs, n).await.expect("sender extend"))
            } else {
                Ok(s.extend(&mut cs, n).await.expect("sender extend"))
            });
        }
        (ots.expect("at least one call"), cs, s) // keep the sender (and its pool threads) alive
    });
    let mut rots = None;
    for _ in 0..calls {
        drop(rots.take());
        rots = Some(if eager {
            Err(r
                .extend_random(&mut cr, &choices)
                .await
                .expect("receiver extend"))
        } else {
            Ok(r.extend(&mut cr, &choices).await.expect("receiver extend"))
        });
    }
    let rots = rots.expect("at least one call");
    let (sots, cs, _sender) = sender.await.expect("sender task");
    let extend = t1.elapsed();
    let cpu2 = cpu_by_role();
    let ext_cpu_ns = std::array::from_fn(|k| cpu2[k].saturating_sub(cpu1[k]));
    let ext_bytes = cs.bytes_sent() + cr.bytes_sent() - setup_bytes;

    // Spot-check correctness outside the timed region.
    for i in [0, n / 3, n - 1] {
        let b = choices.get(i);
        let (sm, rm) = match (&sots, &rots) {
            (Ok(s), Ok(r)) => (s.message(i, b), r.message(i)),
            (Err(s), Err(r)) => (s.message(i, b), r.message(i)),
            _ => unreachable!("both sides use the same mode"),
        };
        assert_eq!(sm, rm);
    }
    Sample {
        setup,
        extend,
        ext_bytes,
        setup_bytes,
        ext_cpu_ns,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let k = v.len();
    if k % 2 == 1 {
        v[k / 2]
    } else {
        (v[k / 2 - 1] + v[k / 2]) / 2.0
    }
}

/// Parses `--name a,b` into a list, or returns the default.
fn list_arg(args: &[String], name: &str, default: &str) -> Vec<String> {
    let v = args
        .iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |s| s.as_str());
    v.split(',').map(|s| s.trim().to_string()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let log_ns: Vec<u32> = list_arg(&args, "--log-n", "20,24")
        .iter()
        .map(|s| s.parse().expect("--log-n"))
        .collect();
    let threads: Vec<usize> = list_arg(&args, "--threads", "1,2")
        .iter()
        .map(|s| s.parse().expect("--threads"))
        .collect();
    let transports: Vec<Transport> = list_arg(&args, "--transport", "tcp,mem")
        .iter()
        .map(|s| {
            if s == "tcp" {
                Transport::Tcp
            } else {
                Transport::Mem
            }
        })
        .collect();
    let securities: Vec<Security> = list_arg(&args, "--security", "iknp,kos")
        .iter()
        .map(|s| {
            if s == "kos" {
                Security::Malicious
            } else {
                Security::SemiHonest
            }
        })
        .collect();
    let hashes: Vec<bool> = list_arg(&args, "--hash", "lazy,eager")
        .iter()
        .map(|s| s == "eager")
        .collect();
    let reps: usize = list_arg(&args, "--reps", "3")[0].parse().expect("--reps");
    let calls: usize = list_arg(&args, "--calls", "1")[0].parse().expect("--calls");
    assert!(calls > 0, "--calls must be at least 1");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "# psikit-ot OT extension benchmark; {} CPUs; medians of {reps} runs; threads = rayon threads per party",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("{}", header());
    for &transport in &transports {
        for &security in &securities {
            for &log_n in &log_ns {
                for &thr in &threads {
                    for &eager in &hashes {
                        let case = Case {
                            transport,
                            security,
                            log_n,
                            threads: thr,
                            eager,
                            calls,
                        };
                        let samples: Vec<Sample> = (0..reps)
                            .map(|k| rt.block_on(run_once(case, 1000 + k as u64)))
                            .collect();
                        report(case, &samples);
                    }
                }
            }
        }
    }
}

/// The column titles.
fn header() -> String {
    format!(
        "{:<4} {:<5} {:>5} {:>3} {:<6} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7} {:>7} {:>8} {:>10}",
        "net",
        "proto",
        "n",
        "thr",
        "hash",
        "OT/s",
        "per core",
        "incl.base",
        "bits/OT",
        "S ns",
        "R ns",
        "io ns",
        "base ms",
        "base bytes"
    )
}

/// Prints the medians of one case.
fn report(case: Case, samples: &[Sample]) {
    let n = (1u64 << case.log_n) as f64 * case.calls as f64;
    let med = |f: &dyn Fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    let rate = med(&|s| n / s.extend.as_secs_f64());
    let rate_all = med(&|s| n / (s.extend + s.setup).as_secs_f64());
    let bits = med(&|s| s.ext_bytes as f64 * 8.0 / n);
    let cpu: Vec<f64> = (0..3)
        .map(|k| med(&|s| s.ext_cpu_ns[k] as f64 / n))
        .collect();
    let setup_ms = med(&|s| s.setup.as_secs_f64() * 1e3);
    let net = if case.transport == Transport::Tcp {
        "tcp"
    } else {
        "mem"
    };
    let proto = if case.security == Security::Malicious {
        "KOS"
    } else {
        "IKNP"
    };
    let hash = if case.eager { "eager" } else { "lazy" };
    println!(
        "{:<4} {:<5} {:>5} {:>3} {:<6} {:>10.3e} {:>10.3e} {:>10.3e} {:>8.2} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>10}",
        net,
        proto,
        format!("2^{}", case.log_n),
        case.threads,
        hash,
        rate,
        rate / case.threads as f64,
        rate_all,
        bits,
        cpu[0],
        cpu[1],
        cpu[2],
        setup_ms,
        samples[0].setup_bytes,
    );
}
