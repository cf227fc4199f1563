//! Drives the `psikit` binary as a user would: CSV files in, a running
//! server, matched rows out.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{psikit, run_ok, Server};

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn serve(state: &Path) -> Server {
    serve_with("--filter-state", state)
}

/// Starts `psikit serve` with one state directory (`flag` says which
/// protocol).
fn serve_with(flag: &str, state: &Path) -> Server {
    let state = state.to_string_lossy();
    common::serve(&["--reload-secs", "1", flag, &state])
}

/// `psikit filter setup` of `input`'s `email` column, trimmed and
/// lower-cased, into `state`; what it printed.
fn filter_setup(input: &Path, state: &Path) -> String {
    run_ok(
        psikit()
            .args([
                "filter",
                "setup",
                "--key",
                "email",
                "--normalize",
                "trim,lower",
            ])
            .arg("--input")
            .arg(input)
            .arg("--state")
            .arg(state),
    )
}

fn query(addr: &str, dir: &Path, input: &str) -> (String, BTreeSet<String>) {
    let out = dir.join("matches.csv");
    let stdout = run_ok(
        psikit()
            .args([
                "filter",
                "query",
                "--server",
                addr,
                "--key",
                "email",
                "--normalize",
                "trim,lower",
            ])
            .arg("--input")
            .arg(dir.join(input))
            .arg("--cache")
            .arg(dir.join("client.cache"))
            .arg("--output")
            .arg(&out),
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,email"));
    (stdout, lines.map(str::to_string).collect())
}

#[test]
fn setup_serve_query_update_requery() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        &d.join("server.csv"),
        "email,name\nAlice@Example.com ,A\nbob@example.com,B\ncarol@example.com,C\nbob@example.com,B2\n émile@exämple.com,E\n",
    );
    write(
        &d.join("client.csv"),
        "id,email\n1,alice@example.com\n2,dave@example.com\n3,ÉMILE@EXÄMPLE.COM\n4,carol@example.com\n5,alice@example.com\n",
    );
    write(&d.join("add.csv"), "email\ndave@example.com\n");
    write(
        &d.join("remove.csv"),
        "email\ncarol@example.com\nnobody@example.com\n",
    );
    let state = d.join("state");

    let setup = filter_setup(&d.join("server.csv"), &state);
    assert!(setup.contains("removed 1 duplicate items"), "{setup}");
    assert!(setup.contains("filter: 4 items"), "{setup}");

    let server = serve(&state);
    let (stdout, rows) = query(&server.addr, d, "client.csv");
    assert!(stdout.contains("downloaded the full filter"), "{stdout}");
    let expected: BTreeSet<String> = [
        "1,alice@example.com",
        "3,ÉMILE@EXÄMPLE.COM",
        "4,carol@example.com",
        "5,alice@example.com",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(rows, expected);

    let update = run_ok(
        psikit()
            .args([
                "filter",
                "update",
                "--key",
                "email",
                "--normalize",
                "trim,lower",
                "--state",
            ])
            .arg(&state)
            .arg("--add")
            .arg(d.join("add.csv"))
            .arg("--remove")
            .arg(d.join("remove.csv")),
    );
    assert!(
        update.contains("added 1 (0 already present), removed 1 (1 not found)"),
        "{update}"
    );

    // The server reloads the new epoch within its reload interval.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (stdout, rows) = query(&server.addr, d, "client.csv");
        if stdout.contains("epoch 1") {
            assert!(stdout.contains("applied a delta"), "{stdout}");
            let expected: BTreeSet<String> = [
                "1,alice@example.com",
                "2,dave@example.com",
                "3,ÉMILE@EXÄMPLE.COM",
                "5,alice@example.com",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            assert_eq!(rows, expected);
            break;
        }
        assert!(Instant::now() < deadline, "server never reloaded: {stdout}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_damaged_filter_cache_is_replaced_not_a_dead_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("server.csv"), "email\na@x\nb@x\nc@x\n");
    write(&d.join("client.csv"), "id,email\n1,a@x\n2,z@x\n3,c@x\n");
    let state = d.join("state");
    filter_setup(&d.join("server.csv"), &state);
    let server = serve(&state);
    let want: BTreeSet<String> = ["1,a@x".to_string(), "3,c@x".to_string()].into();
    assert_eq!(query(&server.addr, d, "client.csv").1, want);
    let cache = d.join("client.cache");
    let good = std::fs::read(&cache).unwrap();
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let damaged: [&[u8]; 4] = [&[], &good[..good.len() / 2], b"garbage", &flipped];
    for bytes in damaged {
        std::fs::write(&cache, bytes).unwrap();
        let out = psikit()
            .args([
                "filter",
                "query",
                "--server",
                &server.addr,
                "--key",
                "email",
                "--normalize",
                "trim,lower",
            ])
            .arg("--input")
            .arg(d.join("client.csv"))
            .arg("--cache")
            .arg(&cache)
            .arg("--output")
            .arg(d.join("matches.csv"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("ignoring the damaged filter cache"), "{err}");
        let text = std::fs::read_to_string(d.join("matches.csv")).unwrap();
        let got: BTreeSet<String> = text.lines().skip(1).map(str::to_string).collect();
        assert_eq!(got, want);
        assert_eq!(
            std::fs::read(&cache).unwrap(),
            good,
            "the cache was rewritten"
        );
    }
}

fn run_err(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run psikit");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line expected: {err}");
    assert!(err.starts_with("psikit: error: "), "{err}");
    out
}

#[test]
fn errors_are_one_clear_line_and_exit_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run_err(
        psikit()
            .args([
                "filter",
                "setup",
                "--key",
                "email",
                "--input",
                "/nonexistent.csv",
                "--state",
            ])
            .arg(d.join("s")),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.csv"));

    write(&d.join("x.csv"), "mail\na@b\n");
    let out = run_err(
        psikit()
            .args(["filter", "setup", "--key", "email", "--input"])
            .arg(d.join("x.csv"))
            .arg("--state")
            .arg(d.join("s")),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mail"),
        "lists available columns"
    );

    // An existing state is never overwritten unforced, and a forced set-up
    // that fails leaves it alone.
    let setup = |key: &str, force: bool| {
        let mut cmd = psikit();
        cmd.args(["filter", "setup", "--key", key, "--input"])
            .arg(d.join("x.csv"))
            .arg("--state")
            .arg(d.join("kept"));
        if force {
            cmd.arg("--force");
        }
        cmd
    };
    run_ok(&mut setup("mail", false));
    let out = run_err(&mut setup("mail", false));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    run_err(&mut setup("nope", true));
    assert!(std::fs::read_dir(d.join("kept")).unwrap().next().is_some());
    run_ok(&mut setup("mail", true));

    // Nobody listens on this port.
    let out = run_err(
        psikit()
            .args(["filter", "sync", "--server", "127.0.0.1:1", "--cache"])
            .arg(d.join("c")),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"));
}

/// RR16 as two processes over TCP: the receiver listens, the sender
/// connects, the result is revealed to the sender.
/// Runs `command send` and `command receive` (e.g. `["psi"]` or
/// `["psi", "--protocol", "rr16"]`) as two processes over loopback TCP,
/// with the result revealed to the sender, and checks both outputs.
/// Runs a two-party command's receiver and sender over TCP on the same
/// small sets, checks both outputs and returns the receiver's stdout.
fn two_processes_over_tcp(command: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        &d.join("a.csv"),
        "email\nalice@x.org\nbob@x.org\ncarol@x.org\n",
    );
    write(
        &d.join("b.csv"),
        "id,email\n1,BOB@x.org\n2,dave@x.org\n3,carol@x.org \n",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let receiver = psikit()
        .arg(command[0])
        .arg("receive")
        .args(&command[1..])
        .args([
            "--reveal",
            "--key",
            "email",
            "--normalize",
            "trim,lower",
            "--listen",
            &addr,
        ])
        .arg("--input")
        .arg(d.join("b.csv"))
        .arg("--output")
        .arg(d.join("b-out.csv"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Retry until the receiver listens.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = psikit()
            .arg(command[0])
            .arg("send")
            .args(&command[1..])
            .args([
                "--reveal",
                "--key",
                "email",
                "--normalize",
                "trim,lower",
                "--connect",
                &addr,
            ])
            .arg("--input")
            .arg(d.join("a.csv"))
            .arg("--output")
            .arg(d.join("a-out.csv"))
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = receiver.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.join("b-out.csv")).unwrap(),
        "id,email\n1,BOB@x.org\n3,carol@x.org \n"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("a-out.csv")).unwrap(),
        "email\nbob@x.org\ncarol@x.org\n"
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn rr16_two_processes_over_tcp() {
    two_processes_over_tcp(&["rr16"]);
}

#[test]
fn psi_two_processes_over_tcp_with_vole_and_rr16() {
    // The summary names the mode that ran.
    let out = two_processes_over_tcp(&["psi"]);
    assert!(out.contains("VOLE-PSI (semi-honest"), "{out}");
    let out = two_processes_over_tcp(&["psi", "--malicious"]);
    assert!(out.contains("VOLE-PSI (malicious"), "{out}");
    two_processes_over_tcp(&["psi", "--protocol", "rr16", "--malicious"]);
}

#[test]
fn psi_prints_its_outcome_as_one_json_object() {
    let out = two_processes_over_tcp(&["psi", "--json"]);
    let got: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(got["command"], "vole receive", "{out}");
    assert_eq!(
        (got["rows"].as_u64(), got["matched_rows"].as_u64()),
        (Some(3), Some(2)),
        "{out}"
    );
    assert!(
        got["job"]["id"].as_str().is_some_and(|id| id.len() == 32),
        "{out}"
    );
    let out = two_processes_over_tcp(&["psi", "--json", "--one-shot"]);
    let got: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(
        (got["items"].as_u64(), got["matched_items"].as_u64()),
        (Some(3), Some(2)),
        "{out}"
    );
    assert!(
        got["job"].is_null() && got["bytes_received"].as_u64() > Some(0),
        "{out}"
    );
}

#[test]
fn a_listener_gives_up_after_its_accept_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("r.csv");
    write(&input, "email\na@x\n");
    let t = std::time::Instant::now();
    let out = psikit()
        .args(["rr16", "receive", "--listen", "127.0.0.1:0"])
        .args(["--accept-timeout-secs", "1", "--key", "email", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("m.csv"))
        .output()
        .expect("run psikit");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("psikit: error: "), "{err}");
    assert!(last.contains("waiting for the peer to connect"), "{err}");
    assert!(t.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn bench_rr16_runs_two_worker_processes() {
    let out = run_ok(psikit().args([
        "bench",
        "rr16",
        "--log2",
        "6",
        "--threads",
        "1",
        "--runs",
        "1",
    ]));
    assert!(out.contains("| malicious   | 2^6"), "{out}");
    assert!(out.contains("| semi-honest | 2^6"), "{out}");
    assert!(out.contains("targets need --log2 20"), "{out}");
}

/// `psikit bench ... --json`: one JSON object with the run's tables.
#[test]
fn bench_json_is_one_object_with_the_tables() {
    let args = [
        "bench",
        "rr16",
        "--log2",
        "6",
        "--threads",
        "1",
        "--runs",
        "1",
        "--json",
    ];
    let out = run_ok(psikit().args(args));
    assert_eq!(out.lines().count(), 1, "{out}");
    let got: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(got["benchmark"], "psikit bench rr16");
    let first = &got["tables"][0];
    let n = first["rows"].as_array().map_or(0, Vec::len);
    assert!(n >= 2, "a row per mode: {out}");
    let columns = first["columns"].as_array().expect("columns");
    assert!(
        first["rows"][0]
            .as_object()
            .is_some_and(|r| r.len() == columns.len()),
        "{out}"
    );
}

/// The VOLE-PSI benchmark runs both parties as worker processes, checks
/// each run against the known intersection, and prints its tables.
#[test]
fn bench_job_runs_a_bucketed_job_in_two_worker_processes() {
    let out = run_ok(psikit().args([
        "bench",
        "job",
        "--log2",
        "12",
        "--runs",
        "1",
        "--bucket-items",
        "1500",
    ]));
    // The receiver's worker fails the run unless it matched exactly n/2.
    assert!(
        out.contains("| 2^12 | 1             | 1     | receiver |"),
        "{out}"
    );
    assert!(
        out.contains("| 2^12 | 1             | 1     | 4       |"),
        "{out}"
    );
    assert!(out.contains("| 2,048            |"), "{out}");
    // Circuit PSI's sum on the buckets: the receiver's worker checks the
    // opened count and both sums.
    let out = run_ok(psikit().args([
        "bench",
        "job",
        "--cpsi",
        "sum",
        "--log2",
        "11",
        "--runs",
        "1",
        "--bucket-items",
        "700",
    ]));
    assert!(out.contains("circuit PSI sum"), "{out}");
    assert!(
        out.contains("| 2^11 | 1             | 1     | 4       |"),
        "{out}"
    );
}

#[test]
fn bench_psi_runs_two_worker_processes() {
    let out = run_ok(psikit().args([
        "bench",
        "psi",
        "--log2",
        "6",
        "--threads",
        "1",
        "--runs",
        "1",
        "--with-rr16",
    ]));
    assert!(out.contains("| Vole     | semi-honest | 2^6"), "{out}");
    assert!(out.contains("| Vole     | malicious   | 2^6"), "{out}");
    assert!(out.contains("| Rr16     | semi-honest | 2^6"), "{out}");
    assert!(out.contains("VOLE-PSI parts"), "{out}");
    assert!(out.contains("targets need --log2 20"), "{out}");
}

/// A filter state remembers how its keys were encoded: an update or a
/// query that encodes them otherwise is refused in one line naming the fix.
#[test]
fn filter_updates_and_queries_with_another_key_encoding_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        &d.join("server.csv"),
        "email
a@x
b@x
",
    );
    write(
        &d.join("client.csv"),
        "email
a@x
",
    );
    let state = d.join("state");
    filter_setup(&d.join("server.csv"), &state);
    let out = run_err(
        psikit()
            .args(["filter", "update", "--key", "email", "--add"])
            .arg(d.join("client.csv"))
            .arg("--state")
            .arg(&state),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--normalize"));
    let server = serve(&state);
    let out = run_err(
        psikit()
            .args([
                "filter",
                "query",
                "--server",
                &server.addr,
                "--key",
                "email",
                "--input",
            ])
            .arg(d.join("client.csv"))
            .arg("--cache")
            .arg(d.join("cache"))
            .arg("--output")
            .arg(d.join("out.csv")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("normalize=trim,lower") && err.contains("--normalize"),
        "{err}"
    );
}

/// An HE database remembers how its keys were encoded, as a filter state
/// does: another encoding is refused by `he db update` and `he query`.
#[test]
fn he_updates_and_queries_with_another_key_encoding_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        &d.join("server.csv"),
        "email
a@x
b@x
",
    );
    write(
        &d.join("client.csv"),
        "email
a@x
",
    );
    let params = he_params_file();
    let server_csv = d.join("server.csv");
    he_db(
        d,
        &[
            "build",
            "--csv",
            server_csv.to_str().unwrap(),
            "--params",
            params.to_str().unwrap(),
        ],
    );
    let out = run_err(
        psikit()
            .args(["he", "db", "update", "--key", "email", "--add"])
            .arg(d.join("client.csv"))
            .arg("--state")
            .arg(d.join("he-state")),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--normalize"));
    let server = serve_with("--he-state", &d.join("he-state"));
    let out = run_err(
        psikit()
            .args(["he", "query", "--server", &server.addr, "--key", "email"])
            .arg("--csv")
            .arg(d.join("client.csv"))
            .arg("--out")
            .arg(d.join("out.csv")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("normalize=trim,lower") && err.contains("--normalize"),
        "{err}"
    );
}

/// The load benchmark: legitimate clients of both services and hostile
/// ones against one server; it fails if any legitimate client does.
#[test]
fn bench_load_serves_every_client_among_hostile_ones() {
    let out = run_ok(psikit().args([
        "bench",
        "load",
        "--clients",
        "8",
        "--hostile",
        "4",
        "--server-items",
        "1024",
        "--client-items",
        "16",
    ]));
    assert!(out.contains("| filter  | 4       | 0"), "{out}");
    assert!(out.contains("| HE      | 4       | 0"), "{out}");
}

/// The APSI parameter file the HE tests use (small and quick).
fn he_params_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocols/src/he_psi/apsi-params/256K-1024.json")
}

/// Runs `psikit he query` on `client.csv` in `dir` with `extra` flags;
/// returns its stdout and the output CSV's lines.
fn he_query(addr: &str, dir: &Path, extra: &[&str]) -> (String, Vec<String>) {
    let out = dir.join("he-matches.csv");
    let stdout = run_ok(
        psikit()
            .args([
                "he",
                "query",
                "--server",
                addr,
                "--key",
                "email",
                "--normalize",
                "trim,lower",
            ])
            .arg("--csv")
            .arg(dir.join("client.csv"))
            .arg("--out")
            .arg(&out)
            .args(extra),
    );
    let text = std::fs::read_to_string(&out).unwrap();
    (stdout, text.lines().map(str::to_string).collect())
}

fn he_db(d: &Path, args: &[&str]) -> String {
    run_ok(
        psikit()
            .args(["he", "db"])
            .args(args)
            .args(["--key", "email", "--normalize", "trim,lower", "--state"])
            .arg(d.join("he-state")),
    )
}

#[test]
fn he_build_serve_query_update_requery_with_labels() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        &d.join("server.csv"),
        "email,name,tier\nalice@example.com,Alice Smith,gold\nBob@Example.com,\"Bob, Jr.\",silver\ncarol@example.com,Carol,\"say \"\"hi\"\"\"\nbob@example.com,Bobby,bronze\n",
    );
    write(
        &d.join("client.csv"),
        "id,email\n1,ALICE@example.com\n2,erin@example.com\n3,bob@example.com\n4,carol@example.com\n5,alice@example.com\n",
    );
    write(
        &d.join("add.csv"),
        "email,name,tier\nerin@example.com,Erin,platinum\nalice@example.com,Alice S.,gold\n",
    );
    write(
        &d.join("remove.csv"),
        "email\ncarol@example.com\nnobody@x\n",
    );
    let params = he_params_file();
    let server_csv = d.join("server.csv");
    let build = he_db(
        d,
        &[
            "build",
            "--label",
            "name,tier",
            "--csv",
            server_csv.to_str().unwrap(),
            "--params",
            params.to_str().unwrap(),
        ],
    );
    assert!(build.contains("3 items, 1 duplicate rows"), "{build}");
    assert!(build.contains("labels up to 18 bytes"), "{build}");
    assert!(build.contains("false-positive probability"), "{build}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = std::fs::metadata(d.join("he-state/oprf.key")).unwrap();
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
    }

    let server = serve_with("--he-state", &d.join("he-state"));
    let (stdout, lines) = he_query(&server.addr, d, &[]);
    assert!(stdout.contains("3 of 4 distinct items matched"), "{stdout}");
    assert!(
        stdout.contains("sent ") && stdout.contains("(server evaluation "),
        "{stdout}"
    );
    assert_eq!(
        lines,
        [
            "id,email,name,tier",
            "1,ALICE@example.com,Alice Smith,gold",
            "3,bob@example.com,Bobby,bronze",
            "4,carol@example.com,Carol,\"say \"\"hi\"\"\"",
            "5,alice@example.com,Alice Smith,gold",
        ]
    );

    let add = d.join("add.csv");
    let remove = d.join("remove.csv");
    let update = he_db(
        d,
        &[
            "update",
            "--label",
            "name,tier",
            "--add",
            add.to_str().unwrap(),
            "--remove",
            remove.to_str().unwrap(),
        ],
    );
    assert!(update.contains("removed 1 items (1 not found)"), "{update}");
    assert!(
        update.contains("added 1 items, gave 1 present items a new label"),
        "{update}"
    );
    let expected = [
        "id,email,name,tier",
        "1,ALICE@example.com,Alice S.,gold",
        "2,erin@example.com,Erin,platinum",
        "3,bob@example.com,Bobby,bronze",
        "5,alice@example.com,Alice S.,gold",
    ];
    // The server reloads the database within its reload interval.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, lines) = he_query(&server.addr, d, &[]);
        if lines == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "server never reloaded: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // Padding hides the query size and changes nothing else.
    let (stdout, lines) = he_query(&server.addr, d, &["--pad-to", "100"]);
    assert!(stdout.contains("query: 100 items"), "{stdout}");
    assert_eq!(lines, expected);
    let (_, lines) = he_query(&server.addr, d, &["--label-names", "name,tier"]);
    assert_eq!(lines[0], "id,email,name,tier");

    // A label longer than the database's room is refused, naming the row.
    write(
        &d.join("long.csv"),
        "email,name,tier\nf@x,Frank with a long label,x\n",
    );
    let out = run_err(
        psikit()
            .args([
                "he",
                "db",
                "update",
                "--key",
                "email",
                "--normalize",
                "trim,lower",
                "--label",
                "name,tier",
            ])
            .arg("--add")
            .arg(d.join("long.csv"))
            .arg("--state")
            .arg(d.join("he-state")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("row 1") && err.contains("at most 18"), "{err}");
    assert!(!err.contains("Frank"), "errors never echo data: {err}");
    let info = run_ok(
        psikit()
            .args(["he", "db", "info", "--state"])
            .arg(d.join("he-state")),
    );
    assert!(
        info.contains("database: 3 items, labels up to 18 bytes"),
        "{info}"
    );
}

#[test]
fn he_bad_params_file_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("s.csv"), "email\na@x\n");
    write(
        &d.join("p.json"),
        "{\"table_params\": {\"hash_func_count\": 3}}",
    );
    let out = run_err(
        psikit()
            .args(["he", "db", "build", "--key", "email", "--csv"])
            .arg(d.join("s.csv"))
            .arg("--params")
            .arg(d.join("p.json"))
            .arg("--state")
            .arg(d.join("st")),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p.json") && err.contains("table_size"),
        "{err}"
    );
    assert!(!d.join("st").join("he.db").exists());
    let out = run_err(
        psikit()
            .args(["he", "params", "--params"])
            .arg(d.join("p.json")),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("p.json"));
}

#[test]
fn demo_he_checks_matches_and_labels() {
    let out = run_ok(psikit().args(["demo", "he", "--he-server-items", "2048"]));
    assert!(out.contains("initial query: all 64 labels equal"), "{out}");
    assert!(out.contains("query after update: all"), "{out}");
    assert!(out.contains("demo passed"), "{out}");
}

/// `filter query --tag-cache`: the second query of the same items asks
/// the server for none of them (only the canary) and finds the same rows.
#[test]
fn a_tag_cache_answers_a_repeated_query() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(&d.join("server.csv"), "email\na@x\nb@x\nc@x\n");
    write(&d.join("client.csv"), "id,email\n1,a@x\n2,z@x\n3,c@x\n");
    let state = d.join("state");
    filter_setup(&d.join("server.csv"), &state);
    let server = serve(&state);
    let run = || {
        let stdout = run_ok(
            psikit()
                .args(["filter", "query", "--json", "--server", &server.addr])
                .args(["--key", "email", "--normalize", "trim,lower", "--input"])
                .arg(d.join("client.csv"))
                .arg("--cache")
                .arg(d.join("client.cache"))
                .arg("--tag-cache")
                .arg(d.join("client.tags"))
                .arg("--output")
                .arg(d.join("matches.csv")),
        );
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let rows = std::fs::read_to_string(d.join("matches.csv")).unwrap();
        (json["cached_items"].as_u64().unwrap(), rows)
    };
    let (cached, first) = run();
    assert_eq!(cached, 0);
    assert_eq!(first, "id,email\n1,a@x\n3,c@x\n");
    assert_eq!(run(), (3, first));
}
