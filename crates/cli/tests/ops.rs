//! `psikit serve` as operators run it: the admin listener's health,
//! readiness and metrics, JSON logs without set contents, and the drain
//! on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{psikit, run_ok};

const SERVER_CSV: &str = "email,name\nalice@example.com,Alice Smith\nbob@example.com,Bob Jones\ncarol@example.com,Carol King\n";
const CLIENT_CSV: &str =
    "id,email\n1,alice@example.com\n2,dave@example.com\n3,carol@example.com\n4,erin@example.com\n";
/// What the sets hold: no log line may contain any of it.
const SECRETS: [&str; 8] = [
    "alice", "bob", "carol", "dave", "erin", "Smith", "Jones", "King",
];

/// A `psikit serve` with an admin listener and JSON logs, killed on drop.
struct Ops {
    child: Child,
    addr: String,
    admin: String,
    log: PathBuf,
}

impl Drop for Ops {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ops {
    fn start(dir: &Path, args: &[&str]) -> Ops {
        let log = dir.join(format!("serve-{}.log", args.len()));
        let mut child = psikit()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(["--reload-secs", "1", "--log-format", "json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start psikit serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (mut addr, mut admin) = (String::new(), String::new());
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read stdout");
            let word = |prefix: &str| {
                (line.split_whitespace()).find_map(|w| w.strip_prefix(prefix).map(str::to_string))
            };
            if let Some(a) = word("http://") {
                admin = a;
                break;
            }
            if let Some(port) = word("127.0.0.1:") {
                addr = format!("127.0.0.1:{port}");
            }
        }
        assert!(
            !addr.is_empty() && !admin.is_empty(),
            "no addresses announced"
        );
        Ops {
            child,
            addr,
            admin,
            log,
        }
    }

    /// `GET path` on the admin listener: status and body.
    fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(&self.admin).expect("connect to admin");
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read");
        let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok());
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
        (status.expect("a status"), body.unwrap_or_default())
    }

    /// The value of the metric sample `name{labels}` (0 when absent).
    fn metric(&self, sample: &str) -> f64 {
        let (status, text) = self.get("/metrics");
        assert_eq!(status, 200);
        (text.lines())
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until `/readyz` answers `want`.
    fn await_ready(&self, want: u16) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body) = self.get("/readyz");
            if status == want {
                return body;
            }
            assert!(Instant::now() < deadline, "/readyz stayed {status}: {body}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-s", name, &pid]).status();
        assert!(sent.expect("run kill").success());
    }
}

fn filter_state(d: &Path) -> PathBuf {
    std::fs::write(d.join("server.csv"), SERVER_CSV).unwrap();
    std::fs::write(d.join("client.csv"), CLIENT_CSV).unwrap();
    let state = d.join("filter-state");
    run_ok(
        psikit()
            .args(["filter", "setup", "--key", "email", "--input"])
            .arg(d.join("server.csv"))
            .arg("--state")
            .arg(&state),
    );
    state
}

fn filter_query(addr: &str, d: &Path, n: usize) -> Command {
    let mut cmd = psikit();
    cmd.args([
        "filter", "query", "--server", addr, "--key", "email", "--input",
    ])
    .arg(d.join("client.csv"))
    .arg("--cache")
    .arg(d.join("client.cache"))
    .arg("--output")
    .arg(d.join(format!("filter-{n}.csv")));
    cmd
}

fn matched(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read the output");
    text.lines().skip(1).map(str::to_string).collect()
}

#[test]
fn the_admin_listener_reports_health_readiness_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = filter_state(d);
    // Two queries of 4 items fit the budget; the third is refused.
    let server = Ops::start(
        d,
        &[
            "--query-budget",
            "8",
            "--filter-state",
            state.to_str().unwrap(),
        ],
    );
    assert_eq!(server.get("/healthz"), (200, "ok\n".into()));
    assert_eq!(server.get("/readyz").0, 200);
    assert_eq!(server.get("/nothing").0, 404);
    for n in 0..2 {
        run_ok(&mut filter_query(&server.addr, d, n));
        assert_eq!(
            matched(&d.join(format!("filter-{n}.csv"))),
            ["1,alice@example.com", "3,carol@example.com"]
        );
    }
    let refused = filter_query(&server.addr, d, 2).output().unwrap();
    assert!(!refused.status.success(), "the third query must be refused");

    let ok = r#"psikit_requests_total{protocol="filter",step="oprf",outcome="ok"}"#;
    assert_eq!(server.metric(ok), 2.0);
    let budget = r#"psikit_requests_total{protocol="filter",step="oprf",outcome="budget"}"#;
    assert_eq!(server.metric(budget), 1.0);
    assert_eq!(
        server.metric(r#"psikit_refused_total{reason="budget"}"#),
        1.0
    );
    assert_eq!(
        server.metric(r#"psikit_request_items_total{protocol="filter"}"#),
        12.0
    );
    assert_eq!(server.metric("psikit_connections_total"), 3.0);
    let syncs = r#"psikit_request_duration_seconds_count{protocol="filter",step="sync"}"#;
    assert_eq!(server.metric(syncs), 3.0);
    assert!(server.metric(r#"psikit_sent_bytes_total{protocol="filter"}"#) > 0.0);
    assert_eq!(server.metric(r#"psikit_ready{protocol="filter"}"#), 1.0);

    // A damaged state file: the server keeps serving its last state but
    // is not ready until the file is whole again.
    let file = state.join("filter.state");
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, b"damaged").unwrap();
    let why = server.await_ready(503);
    assert!(why.contains("filter: the last reload failed"), "{why}");
    assert_eq!(server.metric(r#"psikit_ready{protocol="filter"}"#), 0.0);
    let failed = r#"psikit_state_reloads_total{protocol="filter",outcome="failed"}"#;
    assert_eq!(server.metric(failed), 1.0);
    std::fs::write(&file, &whole).unwrap();
    server.await_ready(200);
    let reloaded = r#"psikit_state_reloads_total{protocol="filter",outcome="ok"}"#;
    assert_eq!(server.metric(reloaded), 1.0);

    // Every log line is a JSON object, and none holds the sets' contents.
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert_holds_no_secret(&log);
    let requests = (log.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["target"] == "psikit::request")
        .count();
    assert_eq!(requests, 6, "one event per request:\n{log}");
}

/// Every line of `log` is a JSON object holding no item or label of the
/// test sets.
fn assert_holds_no_secret(log: &str) {
    for line in log.lines() {
        let parsed = serde_json::from_str::<serde_json::Value>(line);
        assert!(parsed.is_ok(), "not a JSON log line: {line}");
        for secret in SECRETS {
            assert!(
                !line.contains(secret),
                "a log line holds {secret:?}: {line}"
            );
        }
    }
}

/// The APSI parameter file the HE tests use (small and quick).
fn he_params() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocols/src/he_psi/apsi-params/256K-1024.json")
}

fn he_state(d: &Path) -> PathBuf {
    let params = he_params();
    let state = d.join("he-state");
    run_ok(
        psikit()
            .args([
                "he", "db", "build", "--key", "email", "--label", "name", "--csv",
            ])
            .arg(d.join("server.csv"))
            .arg("--params")
            .arg(params)
            .arg("--state")
            .arg(&state),
    );
    state
}

fn he_query(addr: &str, d: &Path, n: usize) -> Command {
    let mut cmd = psikit();
    cmd.args(["he", "query", "--server", addr, "--key", "email", "--csv"])
        .arg(d.join("client.csv"))
        .arg("--out")
        .arg(d.join(format!("he-{n}.csv")));
    cmd
}

#[test]
fn sigterm_lets_the_queries_under_way_finish_and_refuses_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let filter = filter_state(d);
    let he = he_state(d);
    let server = Ops::start(
        d,
        &[
            "--filter-state",
            filter.to_str().unwrap(),
            "--he-state",
            he.to_str().unwrap(),
            "--shutdown-grace-secs",
            "120",
        ],
    );
    let clients: Vec<(PathBuf, Child)> = (0..16)
        .map(|n| {
            let (mut cmd, out) = match n % 2 {
                0 => (
                    filter_query(&server.addr, d, n),
                    d.join(format!("filter-{n}.csv")),
                ),
                _ => (he_query(&server.addr, d, n), d.join(format!("he-{n}.csv"))),
            };
            let child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    // Every client connected: then the signal.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.metric("psikit_connections_total") < 16.0 {
        assert!(Instant::now() < deadline, "the clients never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.signal("TERM");
    // New connections are refused while the queries finish.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&server.addr).is_ok() {
        assert!(Instant::now() < deadline, "still accepting after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (out, child) in clients {
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "a query under way failed: {stderr}");
        let rows = matched(&out);
        let want: &[&str] = match out.to_string_lossy().contains("he-") {
            true => &[
                "1,alice@example.com,Alice Smith",
                "3,carol@example.com,Carol King",
            ],
            false => &["1,alice@example.com", "3,carol@example.com"],
        };
        assert_eq!(rows, want);
    }
    let mut server = server;
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "a clean drain exits 0");
    // The signal came while connections were open (else this test would
    // not show a drain).
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert_holds_no_secret(&log);
    let draining = (log.lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["message"] == "draining")
        .expect("a draining event");
    assert!(draining["connections"].as_u64() > Some(0), "{draining}");
}

#[test]
fn a_second_signal_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let filter = filter_state(d);
    let mut server = Ops::start(d, &["--filter-state", filter.to_str().unwrap()]);
    // An idle client holds the drain open for a while.
    let _idle = TcpStream::connect(&server.addr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.metric("psikit_connections_open") < 1.0 {
        assert!(Instant::now() < deadline, "the client never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.signal("TERM");
    std::thread::sleep(Duration::from_millis(200));
    server.signal("TERM");
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "exited by the second signal");
}

/// `psikit serve ... --check`'s JSON.
fn checked(args: &[&str]) -> serde_json::Value {
    let out = run_ok(psikit().arg("serve").args(args).arg("--check"));
    serde_json::from_str(&out).expect("JSON")
}

#[test]
fn a_config_file_gives_the_server_its_flags_give() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let filter = filter_state(d);
    let config = d.join("serve.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\nfilter-state = {filter:?}\nmax-connections = 9\n\
         query-budget = 1000\nreload-secs = 1\nhe-no-cache = true\nlog-format = \"json\"\n\
         admin-listen = \"127.0.0.1:0\"\nshutdown-grace-secs = 5\n"
    );
    std::fs::write(&config, toml).unwrap();
    let config = config.to_str().unwrap();
    let from_file = checked(&["--config", config]);
    let filter = filter.to_str().unwrap();
    let flags = [
        "--listen",
        "127.0.0.1:0",
        "--filter-state",
        filter,
        "--max-connections",
        "9",
        "--query-budget",
        "1000",
        "--reload-secs",
        "1",
        "--he-no-cache",
        "--log-format",
        "json",
        "--admin-listen",
        "127.0.0.1:0",
        "--shutdown-grace-secs",
        "5",
    ];
    assert_eq!(from_file, checked(&flags));
    assert_eq!(from_file["settings"]["max_connections"], 9);
    assert_eq!(from_file["services"][0]["name"], "the filter protocol");
    // The command line wins over the file.
    let over = checked(&["--config", config, "--max-connections", "3"]);
    assert_eq!(over["settings"]["max_connections"], 3);

    // A server started from the file serves.
    let server = Ops::start(d, &["--config", config]);
    run_ok(&mut filter_query(&server.addr, d, 0));
    assert_eq!(
        matched(&d.join("filter-0.csv")),
        ["1,alice@example.com", "3,carol@example.com"]
    );

    // A typo is refused by name.
    std::fs::write(d.join("typo.toml"), "max-conections = 3\n").unwrap();
    let typo = psikit()
        .args(["serve", "--config"])
        .arg(d.join("typo.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(!typo.status.success());
    assert!(stderr.contains("unknown key `max-conections`"), "{stderr}");
}

/// Runs `cmd` with `--json`: its stdout is one JSON object.
fn json_of(cmd: &mut Command) -> serde_json::Value {
    let out = run_ok(cmd.arg("--json"));
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    serde_json::from_str(&out).expect("a JSON object")
}

#[test]
fn results_print_as_one_json_object() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let filter = filter_state(d);
    let he = he_state(d);
    let info = json_of(psikit().args(["filter", "info", "--state"]).arg(&filter));
    assert_eq!(
        (info["command"].as_str(), info["state"]["items"].as_u64()),
        (Some("filter info"), Some(3))
    );
    let server = Ops::start(
        d,
        &[
            "--filter-state",
            filter.to_str().unwrap(),
            "--he-state",
            he.to_str().unwrap(),
        ],
    );
    let q = json_of(&mut filter_query(&server.addr, d, 0));
    assert_eq!(q["command"], "filter query");
    assert_eq!(
        (q["items"].as_u64(), q["matched_items"].as_u64()),
        (Some(4), Some(2)),
        "{q}"
    );
    assert_eq!(q["syncs"][0]["kind"], "full", "{q}");
    let q = json_of(&mut he_query(&server.addr, d, 0));
    assert_eq!(q["command"], "he query");
    assert_eq!(
        (q["items"].as_u64(), q["matched_items"].as_u64()),
        (Some(4), Some(2)),
        "{q}"
    );
    assert!(q["server_eval_s"].as_f64() > Some(0.0), "{q}");
}
