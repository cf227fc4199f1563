//! A sharded HE database through real processes: `psikit he db build
//! --shards`, one `psikit serve` per shard and one router, queried by `psikit
//! he query`, gives the unsharded database's answer.

use std::path::Path;

mod common;
use common::{psikit, run_ok, serve};

fn build(dir: &Path, state: &str, extra: &[&str]) -> String {
    run_ok(
        psikit()
            .args([
                "he",
                "db",
                "build",
                "--key",
                "email",
                "--label",
                "tier",
                "--client-items",
                "256",
            ])
            .arg("--csv")
            .arg(dir.join("server.csv"))
            .arg("--state")
            .arg(dir.join(state))
            .args(extra),
    )
}

/// The matched rows `psikit he query` writes, in order.
fn query(addr: &str, dir: &Path) -> Vec<String> {
    let out = dir.join("matches.csv");
    run_ok(
        psikit()
            .args(["he", "query", "--server", addr, "--key", "email"])
            .arg("--csv")
            .arg(dir.join("client.csv"))
            .arg("--out")
            .arg(&out),
    );
    let text = std::fs::read_to_string(&out).expect("read the matches");
    text.lines().map(str::to_string).collect()
}

#[test]
fn a_sharded_database_served_by_processes_answers_as_the_whole() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut server = String::from("email,tier\n");
    for i in 0..6000 {
        server.push_str(&format!("user{i}@x.org,tier {}\n", i % 4));
    }
    std::fs::write(d.path().join("server.csv"), server).expect("write");
    let mut client = String::from("email\n");
    for i in (0..300).map(|i| i * 41) {
        client.push_str(&format!("user{i}@x.org\n"));
    }
    std::fs::write(d.path().join("client.csv"), client).expect("write");

    build(d.path(), "whole", &[]);
    let whole = serve(&["--he-state", &d.path().join("whole").to_string_lossy()]);
    let want = query(&whole.addr, d.path());
    assert_eq!(want.len(), 1 + 147, "a header and the 147 keys below 6000");

    let out = build(d.path(), "sharded", &["--shards", "4"]);
    assert!(out.contains("6000 items in 4 shards"), "{out}");
    let sharded = d.path().join("sharded");
    let shards: Vec<_> = (0..4)
        .map(|i| {
            serve(&[
                "--he-state",
                &sharded.join(format!("shard-{i}")).to_string_lossy(),
            ])
        })
        .collect();
    let mut args = vec![
        "--he-router".to_string(),
        sharded.join("router").to_string_lossy().into_owned(),
    ];
    for s in &shards {
        args.extend(["--he-shard".to_string(), s.addr.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let router = serve(&args);
    assert_eq!(query(&router.addr, d.path()), want);

    // An update through the router's OPRF: the router switches to it once
    // every shard has it.
    std::fs::write(
        d.path().join("add.csv"),
        "email,tier\nuser41@x.org,tier 9\n",
    )
    .expect("write");
    std::fs::write(d.path().join("remove.csv"), "email\nuser0@x.org\n").expect("write");
    let out = run_ok(
        psikit()
            .args(["he", "db", "update", "--key", "email", "--label", "tier"])
            .arg("--state")
            .arg(&sharded)
            .arg("--add")
            .arg(d.path().join("add.csv"))
            .arg("--remove")
            .arg(d.path().join("remove.csv")),
    );
    assert!(out.contains("epoch 1"), "{out}");
    let mut updated = want.clone();
    updated.retain(|l| l != "user0@x.org,tier 0");
    for l in updated.iter_mut().filter(|l| l.starts_with("user41@")) {
        *l = "user41@x.org,tier 9".into();
    }
    let mut got = query(&router.addr, d.path());
    for _ in 0..100 {
        if got == updated {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        got = query(&router.addr, d.path());
    }
    assert_eq!(got, updated);

    // A shard asked directly refuses to evaluate the OPRF: it has no key.
    let err = psikit()
        .args(["he", "query", "--server", &shards[0].addr, "--key", "email"])
        .arg("--csv")
        .arg(d.path().join("client.csv"))
        .arg("--out")
        .arg(d.path().join("direct.csv"))
        .output()
        .expect("run psikit");
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("query the shards' router"));
}
