//! What the CLI test files share: the binary under test and running it.

use std::process::Command;

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
