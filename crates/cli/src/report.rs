//! Formatting of sizes, durations and rates for humans, peak memory, and
//! where a command's summary goes (`--json`).

use std::time::Duration;

/// Where a command's lines for people go: stdout, or stderr when stdout
/// carries the command's `--json` object (one per run, made with serde).
#[derive(Clone, Copy, Debug, Default)]
pub struct Say {
    json: bool,
}

impl Say {
    pub fn new(json: bool) -> Self {
        Self { json }
    }

    /// A line for people.
    pub fn line(self, line: impl std::fmt::Display) {
        match self.json {
            true => eprintln!("{line}"),
            false => println!("{line}"),
        }
    }

    /// The run's result as one JSON object on stdout, with `--json`.
    pub fn result(self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string(value)?);
        }
        Ok(())
    }
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// `2^-x` written for humans, e.g. "2^-30.0".
pub fn prob(p: f64) -> String {
    if p <= 0.0 {
        "0".into()
    } else {
        format!("2^{:.1}", p.log2())
    }
}

/// A probability given as its log2, e.g. "2^-41.3" ("0" for log2 0 = -inf).
pub fn log2_prob(log2: f64) -> String {
    if log2 == f64::NEG_INFINITY {
        "0".into()
    } else {
        format!("2^{log2:.1}")
    }
}

/// Peak resident memory of this process (Linux `VmHWM`), if known.
pub fn peak_memory() -> Option<u64> {
    peak_memory_of("self")
}

/// Peak resident memory of process `pid` (`"self"` or a number), if known.
pub fn peak_memory_of(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 20), "3.00 MiB");
        assert_eq!(secs(Duration::from_millis(1500)), "1.50 s");
        assert_eq!(secs(Duration::from_micros(2500)), "2.5 ms");
        assert_eq!(prob(2f64.powi(-30)), "2^-30.0");
        assert_eq!(log2_prob(-41.25), "2^-41.2");
        assert_eq!(log2_prob(f64::NEG_INFINITY), "0");
    }
}
