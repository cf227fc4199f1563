//! CPU accounting shared by the benchmarks: this process's CPU time, and
//! what other processes of the (shared) machine used meanwhile, from /proc.

use std::time::Instant;

use super::harness::Metrics;

/// Clock ticks per second of /proc CPU times (Linux USER_HZ).
const CLOCK_TICKS: f64 = 100.0;

/// CPU seconds used so far by this process (all threads) and by the whole
/// machine, from /proc. The machine shares its two cores with other work,
/// so every timing is reported with how much of the CPU others took.
#[derive(Clone, Copy)]
pub(super) struct CpuSnapshot {
    own: f64,
    busy: f64,
    steal: f64,
    at: Instant,
}

/// CPU use between two snapshots.
#[derive(Clone, Copy, Default)]
pub(super) struct CpuUse {
    /// CPU seconds of this process.
    pub(super) own: f64,
    /// Average cores busy with other processes of this machine; `None` for
    /// windows too short for /proc's 10 ms ticks to tell.
    pub(super) others: Option<f64>,
    /// Average cores taken by the hypervisor (steal time).
    pub(super) steal: Option<f64>,
}

/// Shortest window whose load from other processes is reported.
const MIN_LOAD_WINDOW_SECS: f64 = 1.0;

impl CpuSnapshot {
    /// Reads /proc; `None` where it is not available.
    pub(super) fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the parenthesised command name; utime and stime are
        // fields 14 and 15 of the line, i.e. 12th and 13th after it.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
        let own = (ticks(11)? + ticks(12)?) / CLOCK_TICKS;
        let all = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<f64> = all
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal ...
        let busy = [0, 1, 2, 5, 6]
            .iter()
            .filter_map(|&i| cpu.get(i))
            .sum::<f64>();
        Some(Self {
            own,
            busy: busy / CLOCK_TICKS,
            steal: cpu.get(7).copied().unwrap_or(0.0) / CLOCK_TICKS,
            at: Instant::now(),
        })
    }

    /// CPU use since this snapshot (zeros if /proc is unavailable).
    pub(super) fn since(&self) -> CpuUse {
        let Some(now) = Self::now() else {
            return CpuUse::default();
        };
        let wall = now.at.duration_since(self.at).as_secs_f64();
        let own = now.own - self.own;
        let long = wall >= MIN_LOAD_WINDOW_SECS;
        CpuUse {
            own,
            others: long.then(|| ((now.busy - self.busy - own) / wall).max(0.0)),
            steal: long.then(|| (now.steal - self.steal) / wall),
        }
    }
}

/// Records CPU use since `start` under `<prefix>.cpu_secs`,
/// `<prefix>.other_cores` and `<prefix>.steal_cores`.
pub(super) fn record_cpu(m: &mut Metrics, prefix: &str, start: Option<CpuSnapshot>) {
    let Some(start) = start else { return };
    let used = start.since();
    m.set(format!("{prefix}.cpu_secs"), used.own);
    if let (Some(others), Some(steal)) = (used.others, used.steal) {
        m.set(format!("{prefix}.other_cores"), others);
        m.set(format!("{prefix}.steal_cores"), steal);
    }
}
