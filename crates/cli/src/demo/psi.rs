//! VOLE-PSI's demo (`psikit psi`'s default protocol).

use std::path::Path;

use anyhow::Result;
use psikit_protocols::balanced::{Protocol, Settings};

use super::args::DemoArgs;
use super::two_party::Pair;

/// VOLE-PSI over loopback TCP on two generated files of the client's size,
/// semi-honest, malicious, then semi-honest with low communication, each
/// receiver's result checked and revealed to the sender; then the same
/// files as a bucketed job of 4 buckets or more, its output file checked.
pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== psi: balanced PSI, silent VOLE + OKVS (VOLE-PSI) ==");
    let pair = Pair::generate(a, dir)?;
    let modes = [
        ("semi-honest", false, false),
        ("malicious", true, false),
        ("low-communication", false, true),
    ];
    for (name, malicious, low_comm) in modes {
        let settings = Settings {
            malicious,
            low_comm,
            reveal: true,
            ..Settings::new(Protocol::Vole)
        };
        pair.run(name, &settings)?;
    }
    // The same files as the bucketed job `psikit psi` runs by default.
    pair.run_job(dir, &Settings::new(Protocol::Vole), 4)
}
