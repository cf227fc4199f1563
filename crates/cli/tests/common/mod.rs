//! What the CLI test files share: the binary under test, running it, and
//! `psikit serve` processes.
// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The `psikit` binary built for these tests.
pub fn psikit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_psikit"))
}

/// Runs `cmd`, which must succeed; returns its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run psikit");
    assert!(
        out.status.success(),
        "psikit failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running `psikit serve`, killed on drop.
pub struct Server {
    child: Child,
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `psikit serve --listen 127.0.0.1:0` with `args` and reads its
/// address from the first line it prints.
pub fn serve(args: &[&str]) -> Server {
    serve_on("127.0.0.1:0", args, None)
}

/// [`serve`] listening on `listen` (a server restarted on its old port),
/// its stderr written to `log` if given.
pub fn serve_on(listen: &str, args: &[&str], log: Option<&Path>) -> Server {
    let stderr = match log {
        Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log")),
        None => Stdio::null(),
    };
    let mut child = psikit()
        .args(["serve", "--listen", listen])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start psikit serve");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the address");
    // "psikit: serving the ... protocol on 127.0.0.1:PORT (...)"
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Server { child, addr }
}
