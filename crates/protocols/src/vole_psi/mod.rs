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
//! (uniform, since `C` is), a frame of OKVS bins at a time; the sender
//! computes `K = B + Δ·(P + C) = A + Δ·P` and decodes each frame's bins as
//! it arrives. The OPRF is then
//!
//! * at the sender, for any `x`: `F(x) = H(Decode(K, k_x) + Δ·h(k_x))`;
//! * at the receiver, for its own `y`: `F(y) = H(Decode(A, k_y))`,
//!
//! equal because `Decode(P, k_y) = h(k_y)`. The sender sends its values
//! `F(x)`, truncated, as a sorted set; the receiver looks its own up
//! (`common::summaries`).
//!
//! # Low-communication mode ([`VoleConfig::low_comm`])
//! RR22's subfield-VOLE variant, semi-honest: `h` and the VOLE's `C` take
//! `ℓ = σ + log2 n_s` bits (the subspace of GF(2^128) of degree below
//! `ℓ`; the OKVS is GF(2)-linear, so a subspace is all it needs), and the
//! receiver sends `ℓ` bits per entry instead of 128. `Δ` stays a full
//! field element. The extra failure, an item of the sender's outside `Y`
//! with `Decode(P, k_x) = h(k_x)`, has probability `n_s·2^-ℓ = 2^-σ`
//! ([`VoleConfig`]'s `value_bits`). `h` and `H` are the tweakable correlation-robust
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

mod config;
pub mod facade;
pub(crate) mod messages;
pub(crate) mod oprf;
mod receiver;
mod sender;

pub use config::{Phases, VoleConfig, MAX_SET_SIZE, PROTOCOL_ID};
pub use receiver::{run_receiver, ReceiverOutcome};
pub use sender::{run_sender, SenderOutcome};

#[cfg(test)]
mod tests;
