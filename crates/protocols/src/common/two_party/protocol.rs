//! Which balanced PSI a party runs: the words front ends accept for it
//! (`--protocol vole|rr16`, Python's `protocol=`), its human name for
//! messages, its id on the wire, and whether this build has it.

use std::fmt;
use std::str::FromStr;

use psikit_transport::{ids, ProtocolId};

use crate::error::Error;

/// A balanced two-party PSI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// VOLE-PSI (Raghuraman-Rindal): silent VOLE and an OKVS.
    Vole,
    /// RR16 (Rindal-Rosulek): OT extension and garbled Bloom filters.
    Rr16,
}

impl Protocol {
    /// Every balanced PSI, built or not, in the order front ends list them.
    pub const ALL: [Protocol; 2] = [Protocol::Vole, Protocol::Rr16];

    /// The word front ends accept (`vole`, `rr16`).
    pub fn word(self) -> &'static str {
        match self {
            Protocol::Vole => "vole",
            Protocol::Rr16 => "rr16",
        }
    }

    /// Its name in messages (`VOLE-PSI`, `RR16`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Vole => "VOLE-PSI",
            Protocol::Rr16 => "RR16",
        }
    }

    /// What it is, for a front end's help (one line, no final period).
    pub fn about(self) -> &'static str {
        match self {
            Protocol::Vole => "Silent VOLE and an OKVS (fastest, least traffic)",
            Protocol::Rr16 => "OT extension and garbled Bloom filters (Rindal-Rosulek)",
        }
    }

    /// The protocol byte of its frames.
    pub fn id(self) -> ProtocolId {
        match self {
            Protocol::Vole => ids::VOLE_PSI,
            Protocol::Rr16 => ids::RR16,
        }
    }

    /// The balanced PSI whose frames carry `id`, if any: how a hello under
    /// the other balanced id is told apart from garbage.
    pub fn of_id(id: ProtocolId) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.id() == id)
    }

    /// Whether this build has it (cargo features `vole`, `rr16`).
    pub fn built(self) -> bool {
        match self {
            Protocol::Vole => cfg!(feature = "vole"),
            Protocol::Rr16 => cfg!(feature = "rr16"),
        }
    }

    /// An error if this build left it out.
    pub fn require_built(self) -> Result<(), Error> {
        match self.built() {
            true => Ok(()),
            false => Err(self.not_built()),
        }
    }

    /// The error for a protocol this build left out.
    pub(crate) fn not_built(self) -> Error {
        Error::Config(format!(
            "this psikit was built without {} (cargo feature '{}')",
            self.name(),
            self.word()
        ))
    }
}

impl fmt::Display for Protocol {
    /// The word, so that `to_string` and [`FromStr`] round-trip.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

impl FromStr for Protocol {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Protocol::ALL
            .into_iter()
            .find(|p| p.word() == s)
            .ok_or_else(|| {
                Error::Config(format!(
                    "protocol must be \"vole\" or \"rr16\", got \"{}\"",
                    psikit_transport::shown(s)
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_ids_are_the_table_s() {
        for p in Protocol::ALL {
            assert_eq!(p.to_string().parse::<Protocol>().expect("parse"), p);
            assert_eq!(Protocol::of_id(p.id()), Some(p));
        }
        assert_eq!(Protocol::of_id(ids::CIRCUIT_PSI), None);
        let err = "kkrt".parse::<Protocol>().expect_err("unknown");
        assert!(err.to_string().contains("protocol must be"), "{err}");
    }
}
