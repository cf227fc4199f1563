//! The one chooser of a balanced PSI: front ends (the CLI's `psikit psi`
//! and `psikit rr16`, its benchmarks and demo, Python's `psikit.psi`) map
//! their arguments to [`Settings`] and call [`run`] (or [`run_blocking`],
//! [`run_on`] over a channel of their own, [`stepper`] at the message
//! level); this file alone turns a [`Protocol`] into its family, and every
//! family's outcome into one [`Outcome`]. A family left out of the build
//! (cargo features `vole`, `rr16`) is refused with a clear error. Above
//! the families (it calls them); their shared terms are
//! `common::two_party`.

use psikit_transport::{Channel, Limits, Stepper};

use crate::common::connect::{block_on, Peer};
use crate::common::statistical;
pub use crate::common::two_party::Protocol;
use crate::common::two_party::{finish, open, receiver_on, sender_on};
use crate::common::{NoProgress, Progress};
use crate::error::Error;

/// Which side a party plays: the sender contributes its set, the receiver
/// learns which of its keys the sender holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

/// How one party runs a balanced PSI. Both parties must choose the same
/// protocol, `malicious`, `reveal` and key encoding (their hellos compare
/// them); `max_peer_items` is this side's own limit.
#[derive(Clone, Debug)]
pub struct Settings {
    pub protocol: Protocol,
    /// Malicious security (else semi-honest).
    pub malicious: bool,
    /// VOLE-PSI's low-communication mode (semi-honest; see
    /// [`crate::vole_psi::VoleConfig::low_comm`]).
    pub low_comm: bool,
    /// The receiver reveals the intersection to the sender.
    pub reveal: bool,
    /// Largest peer set accepted (bounds the memory a peer can make us
    /// use).
    pub max_peer_items: u64,
    /// How this party encodes its keys (`psikit_io::KeySpec::key_format`);
    /// empty to skip the comparison.
    pub key_format: String,
    /// Statistical security σ of this run (`common::statistical`, default
    /// 40): summary lengths, structure failure bounds and RR16's
    /// cut-and-choose. Both parties must use the same; a bucketed job sets
    /// it from its bucket count.
    pub statistical_bits: u32,
}

impl Settings {
    /// Semi-honest, nothing revealed, no key encoding stated, and the
    /// family's own largest peer set.
    pub fn new(protocol: Protocol) -> Self {
        let max_peer_items = match protocol {
            Protocol::Vole => 1 << 26,
            Protocol::Rr16 => 1 << 24,
        };
        Self {
            protocol,
            malicious: false,
            low_comm: false,
            reveal: false,
            max_peer_items,
            key_format: String::new(),
            statistical_bits: statistical::STATISTICAL_BITS,
        }
    }

    /// Refuses a mode no protocol runs: the low-communication mode is
    /// VOLE-PSI's, and semi-honest. Runs check it before they connect.
    pub fn check(&self) -> Result<(), Error> {
        let why = match (self.low_comm, self.protocol, self.malicious) {
            (true, Protocol::Rr16, _) => "--low-comm is a mode of VOLE-PSI; RR16 has none",
            (true, _, true) => "--low-comm is semi-honest only: drop --malicious or --low-comm",
            _ => return Ok(()),
        };
        Err(Error::Config(why.into()))
    }
}

/// What a party of a balanced PSI learned, and what it cost.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub protocol: Protocol,
    /// For each of this party's keys, whether the other party holds it,
    /// when this party learns it: the receiver always, the sender only with
    /// `reveal` (and then only as honestly as the receiver reports it).
    pub matches: Option<Vec<bool>>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Where the time went, in the family's own phases.
    pub phases: Phases,
}

/// A run's phases, as its family measures them.
#[derive(Clone, Debug)]
pub enum Phases {
    #[cfg(feature = "vole")]
    Vole(crate::vole_psi::Phases),
    #[cfg(feature = "rr16")]
    Rr16 {
        params: crate::rr16::Rr16Params,
        phases: crate::rr16::Phases,
    },
}

/// One party's run over an open channel (the benchmarks time it from the
/// established connection).
pub async fn run_on(
    ch: &mut Channel,
    role: Role,
    keys: &[Vec<u8>],
    settings: &Settings,
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    settings.check()?;
    match settings.protocol {
        #[cfg(feature = "vole")]
        Protocol::Vole => vole::run_on(ch, role, keys, settings, progress).await,
        #[cfg(feature = "rr16")]
        Protocol::Rr16 => rr16::run_on(ch, role, keys, settings, progress).await,
        #[allow(unreachable_patterns)]
        other => Err(other.not_built()),
    }
}

/// One party's run with its distinct `keys` against `peer`. A listening
/// party calls `listening` with its address before it waits; `progress`
/// is told the run's stages.
pub async fn run(
    peer: &Peer,
    role: Role,
    keys: &[Vec<u8>],
    settings: &Settings,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    settings.protocol.require_built()?;
    settings.check()?;
    let mut ch = open(peer, listening, progress).await?;
    let result = run_on(&mut ch, role, keys, settings, progress).await;
    finish(ch, result).await
}

/// [`run`], blocking.
pub fn run_blocking(
    peer: &Peer,
    role: Role,
    keys: &[Vec<u8>],
    settings: &Settings,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    block_on(run(peer, role, keys, settings, listening, progress))?
}

/// One party's run as a sans-IO state machine: push the peer's bytes in,
/// take this party's out, [`Stepper::advance`] until `Ready`. Frames up to
/// `limits.max_frame_bytes` are accepted.
pub fn stepper(
    role: Role,
    keys: Vec<Vec<u8>>,
    settings: Settings,
    limits: Limits,
) -> Stepper<Result<Outcome, Error>> {
    Stepper::new(limits, move |mut ch| async move {
        run_on(&mut ch, role, &keys, &settings, &NoProgress).await
    })
}

/// The sender's view of the receiver's revealed indices (sorted, distinct,
/// each an index of the sender's keys) as a mask over its `n` keys.
fn revealed_mask(revealed: Option<Vec<usize>>, n: usize) -> Option<Vec<bool>> {
    revealed.map(|indices| {
        let mut mask = vec![false; n];
        for i in indices {
            if let Some(m) = mask.get_mut(i) {
                *m = true;
            }
        }
        mask
    })
}

#[cfg(feature = "vole")]
mod vole {
    use super::*;
    use crate::vole_psi::{facade::VolePsi, VoleConfig};

    pub(super) async fn run_on(
        ch: &mut Channel,
        role: Role,
        keys: &[Vec<u8>],
        s: &Settings,
        progress: &dyn Progress,
    ) -> Result<Outcome, Error> {
        let cfg = VoleConfig {
            malicious: s.malicious,
            low_comm: s.low_comm,
            reveal_to_sender: s.reveal,
            max_set_size: s.max_peer_items,
            key_format: s.key_format.clone(),
            statistical_bits: s.statistical_bits,
            ..VoleConfig::default()
        };
        Ok(match role {
            Role::Sender => {
                let o = sender_on::<VolePsi>(ch, keys, &cfg, progress).await?;
                Outcome {
                    protocol: Protocol::Vole,
                    matches: revealed_mask(o.revealed, keys.len()),
                    bytes_sent: o.bytes_sent,
                    bytes_received: o.bytes_received,
                    phases: Phases::Vole(o.phases),
                }
            }
            Role::Receiver => {
                let o = receiver_on::<VolePsi>(ch, keys, &cfg, progress).await?;
                Outcome {
                    protocol: Protocol::Vole,
                    matches: Some(o.matches),
                    bytes_sent: o.bytes_sent,
                    bytes_received: o.bytes_received,
                    phases: Phases::Vole(o.phases),
                }
            }
        })
    }
}

#[cfg(feature = "rr16")]
mod rr16 {
    use super::*;
    use crate::rr16::{facade::Rr16, Rr16Config, Search};

    pub(super) async fn run_on(
        ch: &mut Channel,
        role: Role,
        keys: &[Vec<u8>],
        s: &Settings,
        progress: &dyn Progress,
    ) -> Result<Outcome, Error> {
        let cfg = Rr16Config {
            malicious: s.malicious,
            reveal_to_sender: s.reveal,
            max_set_size: s.max_peer_items,
            key_format: s.key_format.clone(),
            search: Search {
                lambda: f64::from(s.statistical_bits),
                ..Search::default()
            },
            ..Rr16Config::default()
        };
        Ok(match role {
            Role::Sender => {
                let o = sender_on::<Rr16>(ch, keys, &cfg, progress).await?;
                Outcome {
                    protocol: Protocol::Rr16,
                    matches: revealed_mask(o.revealed, keys.len()),
                    bytes_sent: o.bytes_sent,
                    bytes_received: o.bytes_received,
                    phases: Phases::Rr16 {
                        params: o.params,
                        phases: o.phases,
                    },
                }
            }
            Role::Receiver => {
                let o = receiver_on::<Rr16>(ch, keys, &cfg, progress).await?;
                Outcome {
                    protocol: Protocol::Rr16,
                    matches: Some(o.matches),
                    bytes_sent: o.bytes_sent,
                    bytes_received: o.bytes_received,
                    phases: Phases::Rr16 {
                        params: o.params,
                        phases: o.phases,
                    },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
