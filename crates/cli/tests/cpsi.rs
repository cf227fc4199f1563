//! `psikit cpsi` end to end: two processes over loopback TCP per
//! application, results against the plaintext computation of two small
//! files; bad input refused with a clear error.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{psikit, run_ok};

/// The receiver's file: values 10, 20, 30, 40 (bob and carol match).
const RECEIVER: &str =
    "id,email,spent\n1,BOB@x.org,10\n2,dave@x.org,20\n3,carol@x.org ,30\n4,erin@x.org,40\n";
/// The sender's file: alice, bob (twice: 5 + 6), carol.
const SENDER: &str = "email,spent\nalice@x.org,1\nbob@x.org,5\ncarol@x.org,7\nbob@x.org,6\n";

/// Runs `psikit cpsi <app> receive` (listening) and `send` (connecting)
/// with the extra arguments of each; returns both processes' outputs.
fn pair(dir: &Path, app: &str, receive: &[&str], send: &[&str]) -> (Output, Output) {
    std::fs::write(dir.join("r.csv"), RECEIVER).unwrap();
    std::fs::write(dir.join("s.csv"), SENDER).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let base = |cmd: &mut Command, role: &str, file: &str| {
        cmd.args([
            "cpsi",
            app,
            role,
            "--key",
            "email",
            "--normalize",
            "trim,lower",
        ])
        .arg("--input")
        .arg(dir.join(file));
    };
    let mut r = psikit();
    base(&mut r, "receive", "r.csv");
    let receiver = r
        .args(["--listen", &addr])
        .args(receive)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let sender = loop {
        let mut s = psikit();
        base(&mut s, "send", "s.csv");
        let out = s.args(["--connect", &addr]).args(send).output().unwrap();
        let refused = String::from_utf8_lossy(&out.stderr).contains("refused");
        if out.status.success() || !refused || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    (receiver.wait_with_output().unwrap(), sender)
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "psikit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cardinality_sum_and_threshold_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let both = ["--reveal-to", "both"];
    let (r, s) = pair(
        d,
        "cardinality",
        &both,
        &[&both[..], &["--ot", "silent"]].concat(),
    );
    assert!(stdout(&r).contains("intersection size: 2"));
    assert!(stdout(&s).contains("intersection size: 2"));

    // Two receiver columns, one sender column, the result as JSON.
    let (r, s) = pair(
        d,
        "sum",
        &["--value-columns", "spent,id", "--json", "--inner-product"],
        &["--value-column", "spent", "--inner-product"],
    );
    // The sender's bob rows add up: 5 + 6 + 7; the receiver's ids 1 + 3;
    // the inner product of the spent columns 11·10 + 7·30.
    let out = stdout(&r);
    let got: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(got["application"], "sum", "{out}");
    assert_eq!(got["intersection_size"], 2, "{out}");
    assert_eq!(got["sender_sums"], serde_json::json!([18]), "{out}");
    assert_eq!(got["receiver_sums"], serde_json::json!([40, 4]), "{out}");
    assert_eq!(got["inner_product"], 320, "{out}");
    assert!(got["bytes_sent"].as_u64() > Some(0), "{out}");
    assert!(stdout(&s).contains("the peer learned the result"));

    let min = ["--value-columns", "spent", "--min-intersection", "3"];
    let (r, s) = pair(d, "sum", &min, &min);
    for out in [stdout(&r), stdout(&s)] {
        assert!(out.contains("fewer than 3 items: no sum revealed"), "{out}");
    }

    for (t, want) in [("2", "yes"), ("3", "no")] {
        let args = ["--threshold", t, "--ot", "iknp", "--reveal-to", "sender"];
        let (r, s) = pair(d, "threshold", &args, &args);
        assert!(stdout(&r).contains("the peer learned the result"));
        let out = stdout(&s);
        assert!(
            out.contains(&format!("reaches the threshold: {want}")),
            "{out}"
        );
    }
}

#[test]
fn union_and_shares_write_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let union = d.join("union.csv");
    // One-shot, and as a job (the default).
    for extra in [&["--one-shot"][..], &[]] {
        let learner = [&["--output", union.to_str().unwrap()][..], extra].concat();
        let (r, s) = pair(d, "union", &learner, extra);
        stdout(&r);
        stdout(&s);
        let text = std::fs::read_to_string(&union).unwrap();
        let mut keys: Vec<&str> = text.lines().skip(1).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "alice@x.org",
                "bob@x.org",
                "carol@x.org",
                "dave@x.org",
                "erin@x.org"
            ]
        );
    }

    // The send party learns it instead.
    let (r, s) = pair(
        d,
        "union",
        &["--reveal-to", "sender"],
        &["--reveal-to", "sender", "--output", union.to_str().unwrap()],
    );
    stdout(&r);
    assert!(stdout(&s).contains("5 keys of the union written"));

    // The shares, one-shot (`bin,share,key`) and as a job (by default:
    // `bucket,bin,share,row`, the receiver's input row for its key).
    let (rs, ss) = (d.join("r-shares.csv"), d.join("s-shares.csv"));
    let rows = |p: &Path| -> Vec<Vec<String>> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect()
    };
    for (extra, header, share, who, want) in [
        (
            &["--one-shot"][..],
            "bin,share,key",
            1,
            2,
            ["bob@x.org", "carol@x.org"],
        ),
        (&[][..], "bucket,bin,share,row", 2, 3, ["1", "3"]),
    ] {
        let (r, s) = pair(
            d,
            "shares",
            &[&["--output", rs.to_str().unwrap()][..], extra].concat(),
            &[&["--output", ss.to_str().unwrap()][..], extra].concat(),
        );
        stdout(&r);
        stdout(&s);
        let (rr, sr) = (rows(&rs), rows(&ss));
        assert_eq!(rr[0].join(","), header);
        assert_eq!(rr.len(), sr.len());
        let mut members: Vec<&str> = rr[1..]
            .iter()
            .zip(&sr[1..])
            .filter(|(a, b)| a[share] != b[share])
            .map(|(a, _)| a[who].as_str())
            .collect();
        members.sort();
        assert_eq!(members, want);
    }
}

#[test]
fn bad_input_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("bad.csv"), "email,spent\na@x,12\nb@x,lots\n").unwrap();
    let err = |args: &[&str]| {
        let out = psikit().args(args).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let input = d.join("bad.csv");
    let receive = |app: &str, extra: &[&str]| {
        let mut args = vec!["cpsi", app, "receive", "--key", "email", "--listen"];
        args.extend(["127.0.0.1:0", "--input", input.to_str().unwrap()]);
        err(&[&args, extra].concat())
    };
    let e = receive("sum", &["--value-columns", "spent"]);
    assert!(
        e.contains("row 2") && e.contains("not an unsigned integer"),
        "{e}"
    );
    let e = receive("threshold", &[]);
    assert!(e.contains("--threshold"), "{e}");
    let e = receive("sum", &["--value-columns", "nope,spent"]);
    assert!(e.contains("nope"), "{e}");
    let e = receive("union", &["--reveal-to", "both"]);
    assert!(e.contains("learned by one party"), "{e}");
    let e = receive("cardinality", &["--min-intersection", "2"]);
    assert!(
        e.contains("--min-intersection belongs to the sum application"),
        "{e}"
    );
}

#[test]
fn parties_running_different_applications_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (r, s) = pair(
        dir.path(),
        "threshold",
        &["--threshold", "1"],
        &["--threshold", "2"],
    );
    assert!(!r.status.success() || !s.status.success());
    let both = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stderr),
        String::from_utf8_lossy(&s.stderr)
    );
    assert!(both.contains("the peer runs"), "{both}");
}

/// The benchmark runs both parties as worker processes, checks each run's
/// output against the known truth and prints its tables.
#[test]
fn bench_cpsi_runs_two_worker_processes() {
    let out = run_ok(psikit().args([
        "bench",
        "cpsi",
        "--log2",
        "8",
        "--threads",
        "1",
        "--runs",
        "1",
        "--apps",
        "shares,sum,union",
    ]));
    for row in [
        "| silent | auto | shares",
        "| iknp   | off  | sum",
        "| silent | off  | union",
    ] {
        assert!(out.contains(row), "{row}: {out}");
    }
    assert!(out.contains("targets need --log2 20"), "{out}");
}

#[test]
fn cardinality_with_the_kk13_cgs_equality() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--reveal-to", "both", "--ot", "kk13"];
    let (r, s) = pair(dir.path(), "cardinality", &args, &args);
    assert!(stdout(&r).contains("intersection size: 2"));
    assert!(stdout(&s).contains("intersection size: 2"));
}
