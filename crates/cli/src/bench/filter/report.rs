//! The filter benchmark's output: header and footer, the seven tables in
//! the order of the list, the targets summary and the JSON report,
//! all made of `RunResult`s, the figures each worker hands back.

use std::fmt::Write as _;
use std::time::Duration;

use super::args::Plan;
use super::settings::{EVAL_ITEMS, QUIET_CORES, REMOVED_RESIDUE};
use crate::bench::harness::{median_of, Metrics};
use crate::bench::table::{count, num, size, time, verdict, TextTable};
use crate::report;

/// The figures of one worker and what it measured.
#[derive(Debug)]
pub(super) struct RunResult {
    pub(super) server_log2: u32,
    pub(super) threads: usize,
    pub(super) primary: bool,
    pub(super) m: Metrics,
}

/// Issue target: server OPRF throughput per core.
const TARGET_OPRF_PER_CORE: f64 = 15_000.0;
/// Issue target: filter bits per item at most this times the formula's.
const TARGET_FILTER_RATIO: f64 = 1.10;
/// Issue target: a 1024-item query over loopback, in seconds.
const TARGET_QUERY_SECS: f64 = 0.150;
/// Client size the latency target is stated for.
const TARGET_QUERY_ITEMS: u64 = 1024;

/// What is measured and how, before the tables.
pub(super) fn print_header(plan: &Plan) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let sizes: Vec<String> = plan.server_log2.iter().map(|k| format!("2^{k}")).collect();
    let clients: Vec<String> = plan.client_sizes.iter().map(u64::to_string).collect();
    let threads: Vec<String> = plan.threads.iter().map(usize::to_string).collect();
    println!("psikit bench filter: unbalanced PSI, DH OPRF (RFC 9497 ristretto255-SHA512) + cuckoo filter");
    println!(
        "server sets {}; client sets {}; threads {}; {cpus} logical CPUs available",
        sizes.join(", "),
        clients.join(", "),
        threads.join(", ")
    );
    println!(
        "each (server size, threads) pair runs in its own process with RAYON_NUM_THREADS set; \
         server and client share that process and talk over loopback TCP"
    );
    println!(
        "figures are medians of up to {} runs; a measurement whose first run exceeds {:.0} s / {} runs once (see the runs columns)",
        plan.repeats, plan.budget_secs, plan.repeats
    );
    if plan.quiet_wait_secs > 0.0 {
        println!(
            "before each measurement, waited up to {:.0} s for other processes to use < {QUIET_CORES} cores",
            plan.quiet_wait_secs
        );
    }
    println!();
}

/// How to go further than the default sizes, with a time estimate.
pub(super) fn print_footer(runs: &[RunResult], elapsed: Duration) {
    println!("total benchmark time: {}", report::secs(elapsed));
    let best = runs
        .iter()
        .filter_map(|r| Some((r.threads, oprf_rate(&r.m)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    println!("larger sizes, e.g. 2^24 (one size, most threads, fewer repeats):");
    println!("  psikit bench filter --server-log2 24 --client-sizes 1,1024 --threads 2 --repeats 1 --fp-lookups-log2 24");
    if let Some((threads, rate)) = best {
        let setup = (1u64 << 24) as f64 / rate;
        println!(
            "  (its setup alone takes about {:.0} min at the {threads}-thread rate measured here; \
             memory grows about linearly with the set)",
            setup / 60.0
        );
    }
}

/// Every table, in the order of the list.
pub(super) fn render_all(plan: &Plan, runs: &[RunResult]) -> String {
    let primaries: Vec<&RunResult> = runs.iter().filter(|r| r.primary).collect();
    let sections = [
        ("1. Server setup", setup_table(runs)),
        ("2. Filter size", filter_table(&primaries)),
        (
            "3. Sync transfer: full filter and 1% deltas",
            sync_table(&primaries),
        ),
        (
            "4. False positives: random 16-byte tags looked up in the filter",
            fp_table(&primaries),
        ),
        (
            "5. Client online latency over loopback TCP",
            query_table(plan, runs),
        ),
        (
            "6. Server CPU per query item (ServerKey::blind_evaluate_batch)",
            eval_table(runs),
        ),
        (
            "7. Peak memory (VmHWM of the worker process)",
            memory_table(runs),
        ),
    ];
    let mut out = String::new();
    for (title, body) in sections {
        let _ = writeln!(out, "## {title}\n\n{body}");
    }
    out.push_str(&targets_summary(runs));
    out
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

/// OPRF items per second of a run (all its threads together).
fn oprf_rate(m: &Metrics) -> Option<f64> {
    Some(m.get("oprf.sample_items")? / m.get("oprf.sample.secs")?)
}

/// OPRF items per CPU-second of this process (item generation included,
/// under 1% of it).
fn oprf_cpu_rate(m: &Metrics) -> Option<f64> {
    let items = m.get("oprf.sample_items")? * m.get("oprf.runs")?;
    Some(items / m.get("oprf.cpu_secs")?)
}

/// Average cores other processes used during a measurement, as a cell.
fn others(v: Option<f64>) -> String {
    num(v, 2)
}

/// Table 1: OPRF and filter build time, throughput per core.
fn setup_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "OPRF, all items",
        "OPRF items/s",
        "items/s/core",
        "target ≥ 15,000/core",
        "items per CPU-s",
        "others (cores)",
        "runs",
        "filter build",
        "runs",
    ]);
    for r in runs {
        let rate = oprf_rate(&r.m);
        let per_core = rate.map(|v| v / r.threads as f64);
        let mut oprf = time(r.m.get("oprf.secs"));
        if r.m.get("oprf.extrapolated") == Some(1.0) {
            let sample = r.m.get("oprf.sample_items").unwrap_or(0.0) as u64;
            let _ = write!(oprf, " (est. from 2^{} sample)", sample.max(1).ilog2());
        }
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            oprf,
            count(rate),
            count(per_core),
            verdict(per_core.map(|v| v >= TARGET_OPRF_PER_CORE)),
            count(oprf_cpu_rate(&r.m)),
            others(r.m.get("oprf.other_cores")),
            count(r.m.get("oprf.runs")),
            time(r.m.get("build.secs")),
            count(r.m.get("build.runs")),
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\nitems/s/core = wall-clock rate / threads; items per CPU-s = items / CPU time of the \
         process, which other processes cannot inflate; others = average cores busy with other \
         processes of this machine during the OPRF timing (2 cores in all). Filter build is \
         single-threaded (dedup + cuckoo inserts).\n",
    );
    out
}

/// Table 2: filter size against the cuckoo-filter formula.
fn filter_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "filter (table)",
        "bytes/item",
        "bits/item",
        "load",
        "fingerprint",
        "formula @0.95",
        "ratio",
        "target ≤ 1.10",
        "formula @load",
        "ratio",
    ]);
    for r in runs {
        let m = &r.m;
        let ratio = |f: Option<f64>| Some(m.get("filter.bits_per_item")? / f?);
        let at95 = m.get("filter.formula_095");
        let at_load = m.get("filter.formula_load");
        t.row(vec![
            format!("2^{}", r.server_log2),
            size(m.get("filter.table_bytes")),
            num(m.get("filter.bits_per_item").map(|b| b / 8.0), 2),
            num(m.get("filter.bits_per_item"), 2),
            num(m.get("filter.load"), 3),
            format!(
                "{} bits x {}",
                num(m.get("filter.fingerprint_bits"), 0),
                num(m.get("filter.bucket_size"), 0)
            ),
            num(at95, 2),
            num(ratio(at95), 3),
            verdict(ratio(at95).map(|x| x <= TARGET_FILTER_RATIO)),
            num(at_load, 2),
            num(ratio(at_load), 3),
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\nformula: (log2(1/eps) + log2(2b)) / alpha bits per item, eps = 2^-30, b = 4; \
         the filter is built at load 0.90 to leave room for insertions.\n",
    );
    out
}

/// One delta column pair: size and percentage of the full filter.
fn delta_cells(m: &Metrics, which: &str) -> [String; 2] {
    let body = m.get(&format!("delta.{which}.body"));
    let full = m.get("sync.full_body");
    let mut bytes = size(body);
    if m.get(&format!("delta.{which}.is_delta")) == Some(0.0) {
        bytes.push_str(" (sent as full)");
    }
    let pct = body.zip(full).map(|(b, f)| 100.0 * b / f);
    [bytes, pct.map_or("-".into(), |p| format!("{p:.2}%"))]
}

/// Table 3: full filter download and the three 1% deltas.
fn sync_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "full filter",
        "on the wire",
        "download",
        "-1% +1% delta",
        "of full",
        "+1% only",
        "of full",
        "-1% only",
        "of full",
        "changed slots (-1% +1%)",
        "update time",
    ]);
    for r in runs {
        let m = &r.m;
        let [both, both_pct] = delta_cells(m, "both");
        let [ins, ins_pct] = delta_cells(m, "insert");
        let [del, del_pct] = delta_cells(m, "delete");
        t.row(vec![
            format!("2^{}", r.server_log2),
            size(m.get("sync.full_body")),
            size(m.get("sync.full_wire")),
            time(m.get("sync.full_secs")),
            both,
            both_pct,
            ins,
            ins_pct,
            del,
            del_pct,
            count(m.get("delta.both.changed_slots")),
            time(m.get("delta.both.update_secs")),
        ]);
    }
    let mut out = t.render();
    if let Some(r) = runs.first() {
        let _ = writeln!(
            out,
            "\n1% = ids ≡ {REMOVED_RESIDUE} mod 100 removed ({} items at 2^{}) and as many new ids inserted; \
             each delta is measured from the same base filter by a client that then checks the server's digest.",
            count(r.m.get("delta.removed")),
            r.server_log2
        );
    }
    out
}

/// Table 4: measured against expected false positives.
fn fp_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "filter fpr",
        "bits/item",
        "lookups",
        "measured FP",
        "expected FP",
        "measured rate",
        "expected rate",
        "consistency",
        "time",
    ]);
    for r in runs {
        for which in ["default", "weak"] {
            let g = |k: &str| r.m.get(&format!("fp.{which}.{k}"));
            let (lookups, measured, expected) = (g("lookups"), g("measured"), g("expected"));
            t.row(vec![
                format!("2^{}", r.server_log2),
                format!("2^-{}", num(g("fpr_log2"), 0)),
                num(g("bits_per_item"), 2),
                lookups.map_or("-".into(), |l| format!("2^{}", l.log2().round())),
                count(measured),
                small_num(expected),
                rate_pow2(measured.zip(lookups).map(|(x, l)| x / l)),
                rate_pow2(expected.zip(lookups).map(|(x, l)| x / l)),
                consistency(measured, expected),
                time(g("secs")),
            ]);
        }
    }
    let mut out = t.render();
    out.push_str(
        "\nexpected = lookups x estimated_fpr() = lookups x (1 - (1 - 2^-f)^(2 b load)); \
         consistency: z = (measured - expected) / sqrt(expected) when at least 5 are expected \
         (|z| < 2 is consistent), else the Poisson probability of a count at least (or at most) \
         the measured one; random tags are exactly what OPRF outputs of non-members look like.\n",
    );
    out
}

/// A non-negative number with two decimals, or two significant digits
/// when it is below 0.01.
fn small_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x > 0.0 && x < 0.01 => format!("{x:.1e}"),
        other => num(other, 2),
    }
}

/// How well a measured count fits a Poisson expectation: a z-score when
/// the expectation is large enough for the normal approximation, else
/// the probability of a count at least as large.
fn consistency(measured: Option<f64>, expected: Option<f64>) -> String {
    match (measured, expected) {
        (Some(x), Some(e)) if e >= 5.0 => format!("z = {:.2}", (x - e) / e.sqrt()),
        (Some(x), Some(e)) if x >= e => {
            format!("P(≥{x:.0}) = {:.0}%", 100.0 * poisson_tail(x, e))
        }
        (Some(x), Some(e)) => {
            let at_most = 1.0 - poisson_tail(x + 1.0, e);
            format!("P(≤{x:.0}) = {:.0}%", 100.0 * at_most)
        }
        _ => "-".into(),
    }
}

/// P(X ≥ k) for X ~ Poisson(lambda), for small k.
fn poisson_tail(k: f64, lambda: f64) -> f64 {
    let mut term = (-lambda).exp();
    let mut below = 0.0;
    for i in 0..k.max(0.0) as u64 {
        below += term;
        term *= lambda / (i + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// A probability as a power of two ("0" when zero).
fn rate_pow2(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p <= 0.0 => "0".into(),
        Some(p) => format!("2^{:.2}", p.log2()),
    }
}

/// Table 5: query latency split into its phases, and bytes each way.
fn query_table(plan: &Plan, runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "client items",
        "blind",
        "round trip",
        "finalize",
        "total",
        "target 1024 < 150 ms",
        "sent",
        "received",
        "runs",
        "others (cores)",
    ]);
    for r in runs {
        for &y in &plan.client_sizes {
            let g = |k: &str| r.m.get(&format!("query.{y}.{k}"));
            let target =
                (y == TARGET_QUERY_ITEMS).then(|| g("total").map(|s| s < TARGET_QUERY_SECS));
            t.row(vec![
                format!("2^{}", r.server_log2),
                r.threads.to_string(),
                y.to_string(),
                time(g("blind")),
                time(g("round_trip")),
                time(g("finalize")),
                time(g("total")),
                target.map_or(String::new(), verdict),
                size(g("sent")),
                size(g("received")),
                count(g("runs")),
                others(g("other_cores")),
            ]);
        }
    }
    let mut out = t.render();
    let small = median_of(runs.iter().filter_map(|r| r.m.get("loopback.small_rtt")));
    let big = median_of(runs.iter().filter_map(|r| r.m.get("loopback.32k_rtt")));
    let _ = writeln!(
        out,
        "\nthe run with the median total is shown; round trip = send, server evaluation, receive. \
         Loopback baseline (echo of one frame): {} for 1 byte, {} for 32 KiB (a 1024-item request).",
        time(small),
        time(big)
    );
    out
}

/// Table 6: server evaluation cost per blinded element.
fn eval_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "wall time per item",
        "CPU time per item (x threads)",
        "items/s",
        "runs",
    ]);
    for r in runs {
        let per = r.m.get("eval.secs_per_item");
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            num(per.map(|s| s * 1e6), 1) + " µs",
            num(per.map(|s| s * 1e6 * r.threads as f64), 1) + " µs",
            count(per.map(|s| 1.0 / s)),
            count(r.m.get("eval.runs")),
        ]);
    }
    let mut out = t.render();
    let _ = writeln!(
        out,
        "\nbatches of {EVAL_ITEMS} blinded elements; the cost does not depend on the server set size."
    );
    out
}

/// Table 7: peak memory after each phase.
fn memory_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "after setup",
        "after client sync",
        "after queries",
        "at the end",
    ]);
    for r in runs {
        let end = if r.primary {
            size(r.m.get("mem.final"))
        } else {
            "(no update phase)".into()
        };
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            size(r.m.get("mem.after_setup")),
            size(r.m.get("mem.after_sync")),
            size(r.m.get("mem.after_queries")),
            end,
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\none process per row, so each row is that size alone; it holds the server state (tags, filter, \
         serialized filter), the client's filter copy, and benchmark scratch (generated items, a spare \
         copy of the tags while repeated builds are timed). \"At the end\" adds the false-positive \
         filter and two more client copies used for the delta measurements.\n",
    );
    out
}

/// One line per target: worst measured value and whether it is met.
fn targets_summary(runs: &[RunResult]) -> String {
    format!(
        "## Targets\n\n{}\n{}\n{}\n\naverage cores used by other processes during each worker: {}\n\n",
        oprf_target_line(runs),
        filter_target_line(runs),
        query_target_line(runs),
        load_summary(runs)
    )
}

/// The OPRF target against the slowest run, on the wall clock and per
/// CPU-second.
fn oprf_target_line(runs: &[RunResult]) -> String {
    let worst_rate = runs
        .iter()
        .filter_map(|r| Some(oprf_rate(&r.m)? / r.threads as f64))
        .min_by(f64::total_cmp);
    let worst_cpu = runs
        .iter()
        .filter_map(|r| oprf_cpu_rate(&r.m))
        .min_by(f64::total_cmp);
    format!(
        "- OPRF ≥ 15,000 items/s per core: lowest {} items/s/core on the wall clock, {}; \
         lowest {} items per CPU-second, {}",
        count(worst_rate),
        verdict(worst_rate.map(|v| v >= TARGET_OPRF_PER_CORE)),
        count(worst_cpu),
        verdict(worst_cpu.map(|v| v >= TARGET_OPRF_PER_CORE))
    )
}

/// The filter-size target against the largest ratio measured.
fn filter_target_line(runs: &[RunResult]) -> String {
    let worst_ratio = runs
        .iter()
        .filter_map(|r| Some(r.m.get("filter.bits_per_item")? / r.m.get("filter.formula_095")?))
        .max_by(f64::total_cmp);
    format!(
        "- filter within 10% of the formula at load 0.95: highest ratio {}, {}",
        num(worst_ratio, 3),
        verdict(worst_ratio.map(|v| v <= TARGET_FILTER_RATIO))
    )
}

/// The query-latency target for every run that measured 1024 items.
fn query_target_line(runs: &[RunResult]) -> String {
    let key = format!("query.{TARGET_QUERY_ITEMS}.total");
    let query: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            let s = r.m.get(&key)?;
            let ok = verdict(Some(s < TARGET_QUERY_SECS));
            let (k, t) = (r.server_log2, r.threads);
            Some(format!("2^{k} x {t}t: {} {ok}", time(Some(s))))
        })
        .collect();
    let shown = if query.is_empty() {
        "not measured (no 1024-item client set)".to_string()
    } else {
        query.join("; ")
    };
    format!("- 1024-item query over loopback < 150 ms: {shown}")
}

/// Load from other processes during each worker, and any quiet waits.
fn load_summary(runs: &[RunResult]) -> String {
    let cells: Vec<String> = runs
        .iter()
        .map(|r| {
            let cores = r.m.get("worker.other_cores");
            let mut cell = format!("2^{} x {}t: {}", r.server_log2, r.threads, others(cores));
            if let Some(w) = r.m.get("worker.quiet_wait_secs").filter(|w| *w >= 1.0) {
                let _ = write!(cell, " (waited {w:.0} s for quiet)");
            }
            cell
        })
        .collect();
    cells.join("; ")
}

/// The figures as JSON: the plan plus every run's named figures (a figure
/// JSON cannot represent, such as NaN, is `null`).
pub(super) fn json_report(plan: &Plan, runs: &[RunResult], elapsed: Duration) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let runs: Vec<serde_json::Value> = (runs.iter())
        .map(|r| {
            let figures: serde_json::Map<String, serde_json::Value> = (r.m.0.iter())
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
            serde_json::json!({
                "server_log2": r.server_log2,
                "threads": r.threads,
                "primary": r.primary,
                "figures": figures,
            })
        })
        .collect();
    let report = serde_json::json!({
        "benchmark": "psikit bench filter",
        "available_parallelism": cpus,
        "server_log2": plan.server_log2,
        "client_sizes": plan.client_sizes,
        "threads": plan.threads,
        "repeats": plan.repeats,
        "budget_secs": plan.budget_secs,
        "fp_lookups_log2": plan.fp_lookups_log2,
        "total_secs": elapsed.as_secs_f64(),
        "runs": runs,
    });
    serde_json::to_string_pretty(&report).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn false_positive_consistency() {
        assert!((poisson_tail(1.0, 0.11) - (1.0 - (-0.11f64).exp())).abs() < 1e-12);
        assert_eq!(poisson_tail(0.0, 3.0), 1.0);
        assert_eq!(consistency(Some(110.0), Some(100.0)), "z = 1.00");
        assert_eq!(consistency(Some(0.0), Some(0.11)), "P(≤0) = 90%");
    }
}
