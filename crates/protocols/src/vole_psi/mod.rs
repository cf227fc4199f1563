//! Balanced PSI from silent VOLE and an OKVS: the VOLE-based OPRF of
//! Raghuraman and Rindal ("Blazing Fast PSI from Improved OKVS and
//! Subfield VOLE", CCS 2022, "RR22"; the design of Rindal-Schoppmann 2021),
//! with psikit's own silent VOLE and random-band OKVS.
//!
//! # Protocol
//! The receiver with set `Y` hashes each item to a key `k_y` and encodes
//! the pairs `(k_y, h(k_y))` into an OKVS table `P` of `m` entries. A silent
//! VOLE of length `m` gives the receiver `A` and a pseudorandom `C`, the
//! sender `Δ` and `B`, with `A + B = C·Δ`. The receiver sends `P + C`
//! (uniform, since `C` is); the sender computes `K = B + Δ·(P + C) = A +
//! Δ·P`. The OPRF is then
//!
//! * at the sender, for any `x`: `F(x) = H(Decode(K, k_x) + Δ·h(k_x))`;
//! * at the receiver, for its own `y`: `F(y) = H(Decode(A, k_y))`,
//!
//! equal because `Decode(P, k_y) = h(k_y)`. The sender sends its values
//! `F(x)`, truncated and sorted; the receiver looks its own up
//! (`common::summaries`). `h` and `H` are the tweakable correlation-robust
//! hash of fixed-key AES under two different tweaks (`oprf::okvs_values`,
//! `oprf::output_hash`), so that they are separate functions (volePSI uses
//! one hash for both).
//!
//! # Malicious mode ([`VoleConfig::malicious`])
//! As RR22's malicious variant and its reference implementation (volePSI's
//! `RsOprf`):
//! * the silent VOLE is malicious (KOS base correlations and the trees'
//!   consistency check, `psikit_ot::silent::check`);
//! * an offset `w = w_s + w_r` is tossed: the sender commits to `w_s`
//!   before the VOLE, the receiver sends `w_r` once its VOLE is done, and
//!   the sender opens `w_s` after the masked table. The sender cannot fit
//!   its VOLE to `w`, nor the receiver bias it;
//! * outputs are bound to their item: `F(x) = H(AES_{u+w}(k_x) ⊕ k_x)`
//!   with `u` the decoded value, so that every value the sender sends is a
//!   hash query at an item it fixed, which is how the simulator extracts
//!   a malicious sender's set (RR22 model the hashes as random oracles).
//!
//! It costs 128 base correlations, one round trip and under 200 bytes more
//! than semi-honest, plus one AES key schedule per item on each side.
//!
//! # Security model
//! * Semi-honest by default: secure if both parties follow the protocol.
//! * Malicious mode: secure against a malicious sender or receiver in the
//!   random-oracle model, with the leakage the silent-OT papers allow (a
//!   cheating sender learns whether a guess about the receiver's noise was
//!   right, and is caught otherwise; a cheating receiver in the base
//!   correlations learns bits of `Δ` only by guessing them, as in KOS). A
//!   caught cheater makes the other party abort with an error naming the
//!   check. As in every PSI, a malicious party may use any set as its
//!   input, and the sizes bound it only loosely: a malicious **receiver**
//!   can program the OKVS at up to its table length `m ≈ 1.2·n_r` keys
//!   (more than the `n_r` it announced), so it may learn the membership of
//!   that many candidate items (as in RR22).
//! * 128-bit computational security: silent VOLE under dual LPN with
//!   regular **field** noise, which needs `t ≥ -128 / log2(1 - δ)` noise
//!   trees (848 at the code's distance estimate `δ = 0.1`), more than
//!   twice the `t ≥ -128 / log2(1 - 2δ)` of binary noise (the rule and its
//!   argument: `psikit_ot::silent::params`, after Boyle et al., CCS 2019,
//!   and RRT23's code); fixed-key AES as a random permutation (Guo et al.,
//!   S&P 2020). 40-bit statistical: the OKVS fails to encode with
//!   probability below `2^-40` (the run then stops with an error and can
//!   be repeated), and an item outside the intersection matches with
//!   probability below `2^-40` over the whole run (summary values are
//!   `40 + log2 n_s + log2 n_r` bits).
//!
//! # Leakage
//! Both parties learn each other's set size. Only the receiver learns the
//! intersection. With [`VoleConfig::reveal_to_sender`], the receiver then
//! sends the matched values and the sender learns the intersection too;
//! that output is only as honest as the receiver (it can omit matches or
//! name any of the sender's items), exactly as for RR16.

pub mod facade;
pub(crate) mod messages;
pub(crate) mod oprf;
mod receiver;
mod sender;

pub use receiver::{run_receiver, ReceiverOutcome};
pub use sender::{run_sender, SenderOutcome};

use std::time::Duration;

use psikit_ot::{ExtConfig, Security, SessionId};

use crate::common::summaries::{summary_len, Exchange};
use crate::common::two_party::{Mode, Terms};
use crate::Error;

/// The run's stages as both roles tell their `Progress`: the silent VOLE,
/// the OKVS (the receiver encodes, both decode), the summary values.
const STAGE_VOLE: &str = "silent VOLE";
const STAGE_OKVS: &str = "OKVS";
const STAGE_SUMMARIES: &str = "comparing summaries";

/// Protocol id of VOLE-PSI's own messages.
pub const PROTOCOL_ID: u8 = messages::PROTOCOL_ID;

/// How to run the protocol. Both parties must agree on `reveal_to_sender`.
#[derive(Debug, Clone)]
pub struct VoleConfig {
    /// Malicious security (KOS base correlations, the silent VOLE's
    /// consistency check, the offset coin toss and binding hash); both
    /// parties must agree.
    pub malicious: bool,
    /// Whether the receiver sends the intersection to the sender.
    pub reveal_to_sender: bool,
    /// Largest peer set accepted (bounds memory a peer can make us use).
    pub max_set_size: u64,
    /// Threads for the parallel parts; `None` uses rayon's global pool.
    pub threads: Option<usize>,
    /// How this party encodes its keys (`psikit_io::KeySpec::key_format`),
    /// compared with the peer's at the start; empty to skip the check.
    pub key_format: String,
}

impl Default for VoleConfig {
    fn default() -> Self {
        Self {
            malicious: false,
            reveal_to_sender: false,
            max_set_size: 1 << 26,
            threads: None,
            key_format: String::new(),
        }
    }
}

/// Largest set either party may bring: keeps summary values within one
/// 128-bit OPRF output (`40 + 44 + 44` bits).
pub const MAX_SET_SIZE: u64 = 1 << 44;

impl VoleConfig {
    fn check(&self) -> Result<(), Error> {
        if self.max_set_size > MAX_SET_SIZE {
            return Err(Error::Config(format!(
                "VOLE-PSI sets are limited to 2^44 items, not {}",
                self.max_set_size
            )));
        }
        Ok(())
    }

    /// What this party states in its hello.
    fn terms(&self, set_size: u64) -> Terms<'_> {
        Terms {
            mode: Mode {
                malicious: self.malicious,
                reveal: self.reveal_to_sender,
            },
            key_format: &self.key_format,
            set_size,
            max_peer_size: self.max_set_size,
        }
    }

    fn security(&self) -> Security {
        match self.malicious {
            true => Security::Malicious,
            false => Security::SemiHonest,
        }
    }

    fn ext_config(&self) -> Result<ExtConfig, Error> {
        match self.threads {
            None => Ok(ExtConfig::default()),
            Some(t) => ExtConfig::with_threads(t).map_err(|e| Error::Config(e.to_string())),
        }
    }
}

/// The OT layer's session id: the receiver's fresh OKVS seed and both
/// set sizes.
fn session_id(seed: &[u8; 16], sender_size: u64, receiver_size: u64) -> SessionId {
    SessionId::new(
        &[
            &seed[..],
            &sender_size.to_be_bytes(),
            &receiver_size.to_be_bytes(),
        ]
        .concat(),
    )
}

/// How the summary values of a run travel.
fn exchange(sender_size: u64, receiver_size: u64) -> Exchange {
    Exchange {
        protocol: PROTOCOL_ID,
        summaries: messages::KIND_SUMMARIES,
        reveal: messages::KIND_REVEAL,
        len: summary_len(sender_size, receiver_size),
    }
}

/// Which mode ran, and where a party's time and traffic went.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    /// Whether the run was in malicious mode.
    pub malicious: bool,
    /// The silent VOLE: base OTs and one extension.
    pub vole: Duration,
    /// Correlations the VOLE made (the OKVS table length).
    pub vole_len: usize,
    /// Bytes both ways up to the end of the VOLE (the hellos and the seed
    /// are 60 bytes of it).
    pub vole_bytes: u64,
    /// The receiver's OKVS encoding (zero at the sender).
    pub okvs_encode: Duration,
    /// Decoding the OKVS at this party's items.
    pub okvs_decode: Duration,
    /// Everything after the VOLE, the OKVS decode included (the hellos,
    /// item hashing and the receiver's OKVS encode come before the VOLE).
    pub online: Duration,
}

#[cfg(test)]
mod tests;
