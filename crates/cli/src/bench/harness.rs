//! What every benchmark shares: the named figures a worker process hands
//! back to its parent, medians, JSON numbers and the synthetic items.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};

use crate::report;

// ---------------------------------------------------------------------------
// Figures passed from workers to the parent
// ---------------------------------------------------------------------------

/// Named figures of one worker (seconds, bytes, counts), kept sorted.
#[derive(Default, Debug, Clone)]
pub(super) struct Metrics(pub(super) BTreeMap<String, f64>);

impl Metrics {
    pub(super) fn set(&mut self, key: impl Into<String>, value: f64) {
        self.0.insert(key.into(), value);
    }

    pub(super) fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    /// Records the process's peak memory so far, if the OS reports it.
    pub(super) fn set_peak_memory(&mut self, key: &str) {
        if let Some(bytes) = report::peak_memory() {
            self.set(key, bytes as f64);
        }
    }

    /// `name value` lines (f64 `Display` round-trips exactly).
    pub(super) fn encode(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    }

    /// Parses what [`Metrics::encode`] wrote.
    pub(super) fn decode(text: &str) -> Result<Self> {
        let mut m = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(' ')
                .with_context(|| format!("malformed figure line {line:?}"))?;
            let value: f64 = value
                .parse()
                .with_context(|| format!("malformed value of {key}"))?;
            m.set(key, value);
        }
        Ok(m)
    }
}

/// Median of some values, if any.
pub(super) fn median_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

// ---------------------------------------------------------------------------
// Synthetic data
// ---------------------------------------------------------------------------

/// The synthetic item with this id.
pub(super) fn item(id: u64) -> Vec<u8> {
    format!("user{id}@example.com").into_bytes()
}

/// Spreads `t < n` over `0..n` (`n` a power of two): an odd multiplier is a
/// bijection modulo `n`.
pub(super) fn scatter(t: u64, n: u64) -> u64 {
    t.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (n - 1)
}

/// Runs a benchmark worker (this executable's hidden `bench *-worker`
/// commands) to the end: its output, or its standard error as the error.
pub fn run_worker(cmd: &mut std::process::Command) -> Result<std::process::Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {}", cmd.get_program().to_string_lossy()))?;
    ensure!(
        out.status.success(),
        "worker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_round_trip() {
        let mut m = Metrics::default();
        m.set("a.b", 1.5);
        m.set("c", 1e-7);
        let back = Metrics::decode(&m.encode()).unwrap();
        assert_eq!(back.0, m.0);
        assert!(Metrics::decode("novalue").is_err());
    }
}
