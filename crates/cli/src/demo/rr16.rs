//! RR16's demo: both modes between two listening/connecting parties.

use std::path::Path;

use anyhow::Result;
use psikit_protocols::balanced::{Protocol, Settings};

use super::args::DemoArgs;
use super::two_party::Pair;

/// Both RR16 modes over loopback TCP on two generated files of the
/// client's size, the receiver's result checked and revealed to the sender.
pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== rr16: malicious-secure PSI, OT extension + garbled Bloom filter ==");
    let pair = Pair::generate(a, dir)?;
    for malicious in [true, false] {
        let settings = Settings {
            malicious,
            reveal: true,
            ..Settings::new(Protocol::Rr16)
        };
        let mode = if malicious {
            "malicious"
        } else {
            "semi-honest"
        };
        pair.run(mode, &settings)?;
    }
    Ok(())
}
