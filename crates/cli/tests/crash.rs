//! Kills state-changing commands at pseudo-random moments and checks that
//! each state afterwards is the old one or the new one, never a mix and
//! never unreadable: set-ups, updates and builds write their files
//! atomically under the state directory's lock (docs/reliability.md).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{psikit, run_ok};

/// `n` rows `email[,label]` for ids `first..first + n`.
fn rows(path: &Path, first: usize, n: usize, labels: bool) {
    let mut text = String::from(if labels { "email,label\n" } else { "email\n" });
    for id in first..first + n {
        text.push_str(&format!("user{id}@example.com"));
        if labels {
            text.push_str(&format!(",label{}", id % 10_000));
        }
        text.push('\n');
    }
    std::fs::write(path, text).expect("write csv");
}

/// Delays spread over `0..span` (a fixed sequence, so failures reproduce).
fn delays(runs: u64, span: Duration) -> impl Iterator<Item = Duration> {
    (0..runs).map(move |k| span.mul_f64((k * 7919 % runs) as f64 / runs as f64))
}

/// Starts `cmd`, kills it after `delay` unless it finished; whether it
/// finished.
fn kill_after(cmd: &mut Command, delay: Duration) -> bool {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    while t.elapsed() < delay {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    let status = child.wait().expect("wait");
    status.success()
}

/// The item count an `info` command reports on its line starting with
/// `prefix` ("filter: N items" or "database: N items").
fn count(info: &str, prefix: &str) -> usize {
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} line in {info:?}"))
}

/// Time of one run of `cmd` (to spread the kills over it).
fn timed(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    run_ok(cmd);
    t.elapsed()
}

#[test]
fn killed_filter_updates_leave_the_old_or_the_new_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    rows(&d.join("base.csv"), 0, 20_000, false);
    let state = d.join("state");
    let update = |add: &Path| {
        let mut cmd = psikit();
        cmd.args(["filter", "update", "--key", "email", "--add"])
            .arg(add)
            .arg("--state")
            .arg(&state);
        cmd
    };
    run_ok(
        psikit()
            .args(["filter", "setup", "--key", "email", "--input"])
            .arg(d.join("base.csv"))
            .arg("--state")
            .arg(&state),
    );
    rows(&d.join("warm.csv"), 1_000_000, 2000, false);
    let span = timed(&mut update(&d.join("warm.csv"))).mul_f64(1.3);
    let mut have = 22_000;
    for (run, delay) in delays(16, span).enumerate() {
        let add = d.join(format!("add{run}.csv"));
        rows(&add, 2_000_000 + run * 2000, 2000, false);
        kill_after(&mut update(&add), delay);
        let info = run_ok(psikit().args(["filter", "info", "--state"]).arg(&state));
        let now = count(&info, "filter: ");
        assert!(
            now == have || now == have + 2000,
            "run {run}: {now} items after an update of {have} killed at {delay:?}"
        );
        have = now;
    }
}

#[test]
fn killed_he_builds_and_updates_leave_the_old_or_the_new_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let params = d.join("params.json");
    std::fs::write(
        &params,
        include_str!("../../protocols/src/he_psi/apsi-params/256K-1024.json"),
    )
    .expect("params");
    rows(&d.join("base.csv"), 0, 3000, true);
    let build = |state: &Path| {
        let mut cmd = psikit();
        cmd.args(["he", "db", "build", "--key", "email", "--label", "label"])
            .arg("--csv")
            .arg(d.join("base.csv"))
            .arg("--params")
            .arg(&params)
            .arg("--state")
            .arg(state);
        cmd
    };
    let info = |state: &Path| {
        psikit()
            .args(["he", "db", "info", "--state"])
            .arg(state)
            .output()
            .expect("run psikit")
    };
    // Builds killed at any moment: afterwards no state, or all of it.
    let span = timed(&mut build(&d.join("first"))).mul_f64(1.3);
    for (run, delay) in delays(8, span).enumerate() {
        let state = d.join(format!("build{run}"));
        kill_after(&mut build(&state), delay);
        let out = info(&state);
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(count(&text, "database: "), 3000, "run {run} at {delay:?}");
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains("digest") && !err.contains("corrupt"),
                "run {run} at {delay:?}: {err}"
            );
            // The next build is not blocked by the killed one.
            run_ok(&mut build(&state));
        }
    }
    // Updates killed at any moment: the old or the new database.
    let state = d.join("first");
    let update = |add: &Path| {
        let mut cmd = psikit();
        cmd.args(["he", "db", "update", "--key", "email", "--label", "label"])
            .arg("--add")
            .arg(add)
            .arg("--state")
            .arg(&state);
        cmd
    };
    rows(&d.join("warm.csv"), 1_000_000, 300, true);
    let span = timed(&mut update(&d.join("warm.csv"))).mul_f64(1.3);
    let mut have = 3300;
    for (run, delay) in delays(8, span).enumerate() {
        let add = d.join(format!("add{run}.csv"));
        rows(&add, 2_000_000 + run * 300, 300, true);
        kill_after(&mut update(&add), delay);
        let out = info(&state);
        assert!(
            out.status.success(),
            "run {run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let now = count(&String::from_utf8_lossy(&out.stdout), "database: ");
        assert!(
            now == have || now == have + 300,
            "run {run}: {now} items after an update of {have} killed at {delay:?}"
        );
        have = now;
    }
}
