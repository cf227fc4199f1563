//! OKVS timings: table rate, encode and decode time per item at 1 and 2
//! threads (a rayon pool each), median of 3 runs, as wall time and as CPU
//! time summed over the process's threads (Linux `schedstat`; on a shared
//! machine the CPU time is the steadier figure).
//!
//! `cargo run --release -p psikit-structures --example okvs_bench` runs
//! n = 2^16 and 2^20; pass log2 sizes to choose, e.g. `-- 24` for 2^24.

use psikit_structures::okvs::{Okvs, OkvsParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

const RUNS: usize = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let logs: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let logs = if logs.is_empty() { vec![16, 20] } else { logs };
    println!("| n | rate | bound (log2) | threads | params (ms) | encode ns/item, wall (CPU) | decode ns/item, wall (CPU) |");
    println!("|---|---|---|---|---|---|---|");
    for log in logs {
        bench(1usize << log)?;
    }
    Ok(())
}

fn bench(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut rng = StdRng::seed_from_u64(n as u64);
    let keys: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
    let values: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
    let started = Instant::now();
    let params = OkvsParams::new(n)?;
    let params_time = started.elapsed();
    let okvs = Okvs::new(params.clone(), rng.gen());
    let mut out = vec![0u128; n];
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let (mut encode, mut decode) = (Timings::default(), Timings::default());
        for _ in 0..RUNS {
            let started = encode.start();
            let table = pool.install(|| okvs.encode(&keys, &values, &mut rng))?;
            encode.stop(started);
            let started = decode.start();
            pool.install(|| okvs.decode(&table, &keys, &mut out))?;
            decode.stop(started);
            assert!(out == values, "decode mismatch");
        }
        println!(
            "| 2^{} | {:.3} | {:.1} | {threads} | {:.1} | {} | {} |",
            n.trailing_zeros(),
            params.rate(),
            params.failure_bound_log2(),
            params_time.as_secs_f64() * 1e3,
            encode.per_item(n),
            decode.per_item(n),
        );
    }
    Ok(())
}

/// Wall and CPU times of the runs of one operation.
#[derive(Default)]
struct Timings {
    wall: Vec<Duration>,
    cpu: Vec<u64>,
}

impl Timings {
    fn start(&self) -> (Instant, u64) {
        (Instant::now(), cpu_ns())
    }

    fn stop(&mut self, (wall, cpu): (Instant, u64)) {
        self.wall.push(wall.elapsed());
        self.cpu.push(cpu_ns().saturating_sub(cpu));
    }

    /// Medians per item: "wall (cpu)" in nanoseconds.
    fn per_item(&mut self, n: usize) -> String {
        self.wall.sort();
        self.cpu.sort();
        let wall = self.wall[self.wall.len() / 2].as_nanos() as f64 / n as f64;
        let cpu = self.cpu[self.cpu.len() / 2] as f64 / n as f64;
        format!("{wall:.1} ({cpu:.1})")
    }
}

/// CPU nanoseconds run so far by all threads of this process (0 where
/// `/proc` has no schedstat).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}
