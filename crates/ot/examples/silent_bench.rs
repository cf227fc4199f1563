//! Throughput of psikit's silent correlated OT: two parties in one
//! process over an in-memory channel, each with its own thread pool.
//!
//! ```sh
//! cargo run --release -p psikit-ot --example silent_bench
//! cargo run --release -p psikit-ot --example silent_bench -- --log-n 24 --threads 2 --reps 1
//! ```
//!
//! Options: `--log-n 16,20` (correlations per extension, as powers of
//! two), `--threads 1,2` (per party), `--reps 3`, `--vole` (VOLE over
//! GF(2^128) instead of correlated OT), `--malicious` (KOS base
//! correlations and the trees' consistency check). Prints medians of: the
//! base-OT set-up, one extension (both parties done), its kernels alone on
//! one party's pool (GGM expansion of the sender's trees, one
//! Expand-Convolute encoding of `N` blocks), correlations per second and
//! per core, and bits per correlation (both directions).

use std::time::{Duration, Instant};

use psikit_ot::silent::{code::ExConvCode, ggm, Noise, SilentParams, SilentReceiver, SilentSender};
use psikit_ot::{ExtConfig, Security, SessionId};
use psikit_transport::{Channel, Limits};
use rand::rngs::OsRng;

struct Sample {
    setup: Duration,
    extend: Duration,
    ggm: Duration,
    encode: Duration,
    bytes: u64,
}

fn list(args: &[String], flag: &str, default: &[usize]) -> Vec<usize> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn run(log_n: usize, threads: usize, vole: bool, security: Security) -> Sample {
    let count = 1usize << log_n;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (setup, extend, bytes) = runtime.block_on(async move {
        let (mut a, mut b) = Channel::memory_pair(Limits {
            max_frame_bytes: 64 << 20,
            ..Limits::default()
        });
        let sid = SessionId::new(b"silent bench");
        let start = Instant::now();
        let sender = tokio::spawn(async move {
            let cfg = ExtConfig::with_threads(threads).expect("pool");
            let mut s = SilentSender::setup(&mut a, &sid, security, cfg, &mut OsRng).await?;
            let set_up = start.elapsed();
            let out = match vole {
                true => s.vole(&mut a, count, 128, &mut OsRng).await?,
                false => s.cot(&mut a, count, &mut OsRng).await?,
            };
            Ok::<_, psikit_ot::OtError>((set_up, out.len()))
        });
        let cfg = ExtConfig::with_threads(threads).expect("pool");
        let mut r = SilentReceiver::setup(&mut b, &sid, security, cfg, &mut OsRng)
            .await
            .expect("setup");
        let setup_done = start.elapsed();
        let before = (b.bytes_sent(), b.bytes_received());
        let t = Instant::now();
        let got = match vole {
            true => r
                .vole(&mut b, count, 128, &mut OsRng)
                .await
                .expect("vole")
                .a
                .len(),
            false => r.cot(&mut b, count, &mut OsRng).await.expect("cot").t.len(),
        };
        let (sender_setup, made) = sender.await.expect("task").expect("sender");
        let extend = t.elapsed();
        assert_eq!(made, got);
        let bytes = b.bytes_sent() - before.0 + b.bytes_received() - before.1;
        (setup_done.max(sender_setup), extend, bytes)
    });
    let (ggm, encode) = kernels(count, threads, noise(vole));
    Sample {
        setup,
        extend,
        ggm,
        encode,
        bytes,
    }
}

/// The noise of the extensions measured.
fn noise(vole: bool) -> Noise {
    match vole {
        true => Noise::FIELD,
        false => Noise::Bit,
    }
}

/// The two kernels of one extension, alone, on a pool of `threads`.
fn kernels(count: usize, threads: usize, noise: Noise) -> (Duration, Duration) {
    let params = SilentParams::for_count(count, noise).expect("params");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    pool.install(|| {
        let roots: Vec<u128> = (1..=params.trees as u128).collect();
        let mut leaves = vec![0u128; params.n()];
        let t = Instant::now();
        let tweaks = ggm::Tweaks::new(&SessionId::new(b"silent bench"), 0, 0);
        ggm::sender_expand(&roots, params.depth, tweaks, &mut leaves);
        let ggm = t.elapsed();
        let code: ExConvCode = params.code();
        let t = Instant::now();
        code.dual_encode(&mut leaves);
        (ggm, t.elapsed())
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = list(&args, "--reps", &[3])[0].max(1);
    let vole = args.iter().any(|a| a == "--vole");
    let (security, model) = match args.iter().any(|a| a == "--malicious") {
        true => (Security::Malicious, "malicious"),
        false => (Security::SemiHonest, "semi-honest"),
    };
    let what = if vole {
        "VOLE over GF(2^128)"
    } else {
        "correlated OT"
    };
    println!("silent {what} ({model}), in-memory channel, medians of {reps}");
    println!(
        "{:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12} {:>9} {:>8} {:>8}",
        "log n",
        "threads",
        "setup",
        "extend",
        "ggm",
        "encode",
        "COT/s",
        "COT/s/core",
        "bits/COT",
        "trees",
        "depth"
    );
    for &log_n in &list(&args, "--log-n", &[16, 20]) {
        for &threads in &list(&args, "--threads", &[1, 2]) {
            let samples: Vec<Sample> = (0..reps)
                .map(|_| run(log_n, threads, vole, security))
                .collect();
            let p = SilentParams::for_count(1 << log_n, noise(vole)).expect("params");
            let ext = median(samples.iter().map(|s| s.extend).collect());
            let rate = (1u64 << log_n) as f64 / ext.as_secs_f64();
            let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
            println!(
                "{:>6} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12.3e} {:>12.3e} {:>9.3} {:>8} {:>8}",
                log_n,
                threads,
                ms(median(samples.iter().map(|s| s.setup).collect())),
                ms(ext),
                ms(median(samples.iter().map(|s| s.ggm).collect())),
                ms(median(samples.iter().map(|s| s.encode).collect())),
                rate,
                rate / threads as f64,
                samples[0].bytes as f64 * 8.0 / (1u64 << log_n) as f64,
                p.trees,
                p.depth,
            );
        }
    }
}
