//! Text tables and their cells (times, sizes, counts), as every benchmark
//! prints them.

use std::cell::RefCell;
use std::time::Instant;

use crate::report::{self, Say};

thread_local! {
    /// The tables rendered since [`collect`], for `--json`: every benchmark
    /// prints its figures through [`TextTable::render`], so collecting
    /// there gives each one its JSON without a second report.
    static COLLECTED: RefCell<Option<Vec<serde_json::Value>>> = const { RefCell::new(None) };
}

/// Starts collecting the tables rendered on this thread.
pub(super) fn collect() {
    COLLECTED.with(|c| *c.borrow_mut() = Some(Vec::new()));
}

/// The tables rendered since [`collect`]: each `{"columns", "rows"}`, a
/// row an object from column name to cell.
pub(super) fn collected() -> Vec<serde_json::Value> {
    COLLECTED.with(|c| c.borrow_mut().take().unwrap_or_default())
}

/// The end of a benchmark's run: its `report` and how long the run took
/// (from `started`) for people, and with `--json` the tables it rendered
/// as one object.
pub(super) fn finish(
    say: Say,
    benchmark: &str,
    report: String,
    started: Instant,
) -> anyhow::Result<()> {
    say.line(report);
    let took = started.elapsed().as_secs_f64();
    say.line(format!("(benchmark took {took:.0} s)"));
    say.result(&serde_json::json!({
        "benchmark": format!("psikit bench {benchmark}"),
        "tables": collected(),
    }))
}

/// A table printed as aligned Markdown (readable as text, pastable in docs).
pub(super) struct TextTable {
    rows: Vec<Vec<String>>,
}

impl TextTable {
    pub(super) fn new(head: &[&str]) -> Self {
        Self {
            rows: vec![head.iter().map(|h| h.to_string()).collect()],
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as `{"columns", "rows"}`, a row an object from column name
    /// to cell.
    fn to_json(&self) -> serde_json::Value {
        let head = &self.rows[0];
        let rows: Vec<serde_json::Map<String, serde_json::Value>> = (self.rows[1..].iter())
            .map(|r| {
                (head.iter().zip(r))
                    .map(|(h, cell)| (h.clone(), cell.clone().into()))
                    .collect()
            })
            .collect();
        serde_json::json!({"columns": head, "rows": rows})
    }

    /// Renders with every column padded to its widest cell (and records
    /// the table when collecting, see [`collect`]).
    pub(super) fn render(&self) -> String {
        COLLECTED.with(|c| {
            if let Some(tables) = c.borrow_mut().as_mut() {
                tables.push(self.to_json());
            }
        });
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = |c: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let pad = |r: &Vec<String>| {
            let cells = (0..cols).map(|c| {
                let s = r.get(c).map_or("", String::as_str);
                format!("{s:<w$}", w = widths[c])
            });
            line(cells.collect())
        };
        let mut out = pad(&self.rows[0]);
        out.push_str(&line(widths.iter().map(|&w| "-".repeat(w)).collect()));
        for r in &self.rows[1..] {
            out.push_str(&pad(r));
        }
        out
    }
}

/// A time for humans: µs below a millisecond, then ms, then s.
pub(super) fn time(secs: Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{s:.2} s"),
    }
}

/// A byte count for humans.
pub(super) fn size(bytes: Option<f64>) -> String {
    bytes.map_or("-".into(), |b| report::bytes(b.round() as u64))
}

/// An integer with thousands separators.
pub(super) fn count(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// A number with `digits` decimals.
pub(super) fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// "met" or "MISSED" for a target check.
pub(super) fn verdict(ok: Option<bool>) -> String {
    match ok {
        Some(true) => "met".into(),
        Some(false) => "MISSED".into(),
        None => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render() {
        assert_eq!(count(Some(1234567.0)), "1,234,567");
        let mut t = TextTable::new(&["x", "long header"]);
        t.row(vec!["1".into(), "2".into()]);
        assert_eq!(t.render().lines().count(), 3);
    }
}
