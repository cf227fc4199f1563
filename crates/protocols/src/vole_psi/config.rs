//! What both VOLE-PSI roles agree on and share: the configuration and its
//! checks, the session id, the summary exchange, the phases and stage
//! names.

use std::time::Duration;

use psikit_ot::{ExtConfig, Security, SessionId};

use super::messages;

use psikit_structures::okvs::OkvsParams;

use crate::common::statistical;
use crate::common::summaries::{summary_bits, Exchange};
use crate::common::two_party::{Mode, Terms};
use crate::error::Error;

/// The run's stages as both roles tell their `Progress`: the silent VOLE,
/// the OKVS (the receiver encodes, both decode), the summary values.
pub(super) const STAGE_VOLE: &str = "silent VOLE";
pub(super) const STAGE_OKVS: &str = "OKVS";
pub(super) const STAGE_SUMMARIES: &str = "comparing summaries";

/// Protocol id of VOLE-PSI's own messages.
pub const PROTOCOL_ID: u8 = super::messages::PROTOCOL_ID;

/// How to run the protocol. Both parties must agree on `reveal_to_sender`.
#[derive(Debug, Clone)]
pub struct VoleConfig {
    /// Malicious security (KOS base correlations, the silent VOLE's
    /// consistency check, the offset coin toss and binding hash); both
    /// parties must agree.
    pub malicious: bool,
    /// The low-communication mode (semi-honest only; both parties must
    /// agree): RR22's subfield-VOLE variant. The OKVS values and the
    /// VOLE's `C` lie in the elements of GF(2^128) of degree below
    /// [`value_bits`](Self::value_bits) `= σ + log2 n_s` bits instead of
    /// the whole field, so the masked table the receiver sends (the
    /// largest message) takes that many bits an entry instead of 128.
    pub low_comm: bool,
    /// Whether the receiver sends the intersection to the sender.
    pub reveal_to_sender: bool,
    /// Largest peer set accepted (bounds memory a peer can make us use).
    pub max_set_size: u64,
    /// Threads for the parallel parts; `None` uses rayon's global pool.
    pub threads: Option<usize>,
    /// How this party encodes its keys (`psikit_io::KeySpec::key_format`),
    /// compared with the peer's at the start; empty to skip the check.
    pub key_format: String,
    /// Statistical security σ of this run (`common::statistical`): the
    /// summary values' length and the OKVS's failure bound. Both parties
    /// must use the same; a bucketed job sets it from its bucket count.
    pub statistical_bits: u32,
}

impl Default for VoleConfig {
    fn default() -> Self {
        Self {
            malicious: false,
            low_comm: false,
            reveal_to_sender: false,
            max_set_size: 1 << 26,
            threads: None,
            key_format: String::new(),
            statistical_bits: statistical::STATISTICAL_BITS,
        }
    }
}

/// Largest set either party may bring: keeps summary values within one
/// 128-bit OPRF output at σ = 40 (`40 + 44 + 44` bits; [`exchange`]
/// refuses a larger σ with sets too large for it).
pub const MAX_SET_SIZE: u64 = 1 << 44;

impl VoleConfig {
    pub(super) fn check(&self) -> Result<(), Error> {
        statistical::check(self.statistical_bits)?;
        if self.malicious && self.low_comm {
            return Err(Error::Config(
                "--low-comm is semi-honest only: drop --malicious or --low-comm".into(),
            ));
        }
        if self.max_set_size > MAX_SET_SIZE {
            return Err(Error::Config(format!(
                "VOLE-PSI sets are limited to 2^44 items, not {}",
                self.max_set_size
            )));
        }
        Ok(())
    }

    /// The OKVS parameters for the receiver's `n` items (both parties
    /// choose them, each from the hello).
    pub(super) fn okvs_params(&self, n: u64) -> Result<OkvsParams, Error> {
        Ok(OkvsParams::with_security(
            n as usize,
            self.statistical_bits,
        )?)
    }

    /// Bits of the OKVS values and of the VOLE's `C` for a sender of
    /// `sender_size` items: 128, or in the low-communication mode `σ +
    /// log2 n_s` (the sizes' bit length). An item `x` of the sender's
    /// outside the receiver's set has `Decode(P, k_x) = h(k_x)` with
    /// probability `2^-bits` (`h(k_x)` is uniform among the `2^bits`
    /// values and independent of the table), and only then is its OPRF
    /// value one the receiver can compute; so no such item exists except
    /// with probability `n_s·2^-bits ≤ 2^-σ`. Otherwise the value is
    /// `H(Decode(A, k_x) + Δ·d)` for a nonzero `d`, hidden by `Δ`, as in the
    /// full field.
    pub(super) fn value_bits(&self, sender_size: u64) -> u32 {
        match self.low_comm {
            true => super::oprf::subfield_bits(sender_size, self.statistical_bits),
            false => 128,
        }
    }

    /// How the summary values of a run travel: one 128-bit OPRF output
    /// holds each, so `σ + log2 n_s + log2 n_r` must stay within 128 bits.
    pub(super) fn exchange(&self, sender_size: u64, receiver_size: u64) -> Result<Exchange, Error> {
        let bits = summary_bits(sender_size, receiver_size, self.statistical_bits);
        match bits <= 128 {
            true => Ok(Exchange {
                protocol: PROTOCOL_ID,
                summaries: messages::KIND_SUMMARIES,
                reveal: messages::KIND_REVEAL,
                bits,
            }),
            false => Err(Error::Config(format!(
                "{sender_size} and {receiver_size} items at σ = {} need summary values \
                 longer than the 128-bit OPRF output",
                self.statistical_bits
            ))),
        }
    }

    /// What this party states in its hello.
    pub(super) fn terms(&self, set_size: u64) -> Terms<'_> {
        Terms {
            mode: Mode {
                malicious: self.malicious,
                low_comm: self.low_comm,
                reveal: self.reveal_to_sender,
            },
            key_format: &self.key_format,
            set_size,
            max_peer_size: self.max_set_size,
        }
    }

    pub(super) fn security(&self) -> Security {
        match self.malicious {
            true => Security::Malicious,
            false => Security::SemiHonest,
        }
    }

    pub(super) fn ext_config(&self) -> Result<ExtConfig, Error> {
        match self.threads {
            None => Ok(ExtConfig::default()),
            Some(t) => ExtConfig::with_threads(t).map_err(|e| Error::Config(e.to_string())),
        }
    }
}

/// The OT layer's session id: the receiver's fresh OKVS seed and both
/// set sizes.
pub(super) fn session_id(seed: &[u8; 16], sender_size: u64, receiver_size: u64) -> SessionId {
    SessionId::new(
        &[
            &seed[..],
            &sender_size.to_be_bytes(),
            &receiver_size.to_be_bytes(),
        ]
        .concat(),
    )
}

/// Which mode ran, and where a party's time and traffic went.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    /// Whether the run was in malicious mode.
    pub malicious: bool,
    /// Whether it was in the low-communication mode.
    pub low_comm: bool,
    /// The silent VOLE: base OTs and one extension.
    pub vole: Duration,
    /// Where the VOLE's extension spent its time at this party (its
    /// base correlations, trees, code, and the rest: mostly waiting on the
    /// peer).
    pub vole_times: psikit_ot::silent::Times,
    /// Correlations the VOLE made (the OKVS table length).
    pub vole_len: usize,
    /// Bytes both ways up to the end of the VOLE (the hellos and the seed
    /// are 60 bytes of it).
    pub vole_bytes: u64,
    /// The receiver's OKVS encoding (zero at the sender).
    pub okvs_encode: Duration,
    /// Decoding the OKVS at this party's items.
    pub okvs_decode: Duration,
    /// The masked table from first frame to last: the receiver encoding,
    /// masking and sending it, the sender receiving and decoding it (and
    /// waiting for it).
    pub table: Duration,
    /// The summaries: output hashes, the exchange (waiting for the
    /// sender's values, at the receiver) and the lookups.
    pub summaries: Duration,
    /// Everything after the VOLE, the OKVS decode included (the hellos,
    /// item hashing and the receiver's OKVS encode come before the VOLE).
    pub online: Duration,
}
