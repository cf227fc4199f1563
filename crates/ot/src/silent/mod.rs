//! Silent OT and VOLE: correlations from a few base OTs, with
//! communication sublinear in their number (dual-LPN pseudorandom
//! correlation generators with regular noise; Boyle et al., CCS 2019;
//! the VOLE form of Weng et al. / libOTe's silent VOLE).
//!
//! | module | what |
//! |---|---|
//! | [`params`] | the shape of an extension and the rule keeping it at 128-bit security |
//! | [`code`] | the Expand-Convolute code (RRT23) compressing the noise |
//! | [`ggm`] | GGM trees as punctured PRFs |
//! | [`check`] | the malicious consistency check of the trees |
//! | [`sender`], [`receiver`] | the two roles over a `Channel` |
//!
//! # Outputs
//! The sender holds a global `Δ ∈ GF(2^128)` (its IKNP base-OT choice, so
//! it lasts for the session). Per extension of `count`:
//!
//! * **correlated OT** ([`SilentSender::cot`]): sender `q`, receiver
//!   choice bits `b` and `t` with `t_i = q_i ⊕ b_i·Δ`;
//! * **VOLE over GF(2^128)** ([`SilentSender::vole`]): sender `B`,
//!   receiver `A` and `C` with `A_i + B_i = C_i·Δ`, `C` pseudorandom
//!   (volePSI's convention `a + b = c·d`).
//!
//! # Protocol of one extension
//! 1. IKNP correlated OTs: `t·depth` for the trees (their random-OT
//!    messages; the receiver's random choice bits, negated, spell each
//!    tree's punctured position `α_i`), plus, for VOLE, 128 per tree whose
//!    choice bits are the bits of the receiver's noise value `β_i`, packed
//!    into a share of `β_i·Δ` (`Σ_j t_j·X^j = Σ_j q_j·X^j + β_i·Δ`). For
//!    correlated OT, `β_i = 1` and the sender's share is `Δ` itself.
//! 2. The sender expands `t` GGM trees from random roots and sends
//!    [`crate::messages::SilentTrees`]: per level the left and right sums
//!    masked with the level's two random-OT messages, and per tree its
//!    share of `β_i·Δ` plus the sum of its leaves.
//! 3. The receiver rebuilds every leaf but `α_i` and sets that one so that
//!    `w = v + e·Δ`, where `v` are the sender's leaves and `e` holds `β_i`
//!    at `α_i`.
//! 4. Both apply the Expand-Convolute code `E`: the sender outputs `E(v)`,
//!    the receiver `E(w)` and `E(e)`; the relations hold by linearity, and
//!    `E(e)` is pseudorandom by dual LPN ([`params`]).
//!
//! All base correlations of an extension come from one IKNP (or KOS)
//! extension, whatever the number of parts ([`params::parts`]).
//!
//! # Security
//! 128-bit computational under dual LPN with regular noise at the
//! parameters of [`params`], enforced in code, with either security:
//!
//! * [`Security::SemiHonest`](crate::ext::Security): IKNP base correlations;
//! * [`Security::Malicious`](crate::ext::Security): KOS base correlations
//!   (unconfirmed: a failed check reaches the receiver as an error frame
//!   in place of the trees) and the consistency check of the trees
//!   ([`check`]): after the trees, the receiver sends a challenge and the
//!   sender answers with a hash the receiver compares (one more round
//!   trip, 48 bytes and 128 base correlations per extension). A cheating
//!   sender is caught unless it guessed the receiver's choices on the
//!   correlations it tampered with, and a wrong guess aborts: the
//!   selective-failure leakage of Boyle et al. (CCS 2019) and Ferret (CCS
//!   2020), under which LPN with regular noise is assumed to stay hard. A
//!   malicious receiver chooses its own noise, which VOLE allows (its
//!   outputs are its choice), and cannot learn more of `Δ` than KOS's
//!   inherent leakage.
//!
//! The receiver runs an extension in three steps ([`Pending`]) so that a
//! protocol can compute while the sender expands and sends its trees.

mod both;
pub mod check;
pub mod code;
pub mod ggm;
pub mod params;
pub mod receiver;
pub mod sender;

pub use both::Times;
pub use params::{Noise, SilentParams};
pub use receiver::{Pending, Prepared, SilentReceiver, SmallVoleOutput, VoleOutput};
pub use sender::{PreparedVole, SilentSender};

use zeroize::{Zeroize, Zeroizing};

/// Gives an extension's output back the room it does not use, for a
/// protocol that holds it for long (VOLE-PSI holds its VOLE through the
/// OKVS phase, where both parties' memory peaks).
///
/// A single part's output is its code buffer cut to the count, which
/// keeps the buffer's capacity: the code's whole length, about twice the
/// count. The spare room is zeroed first (it held encoded leaves), then
/// released; glibc shrinks a block in place, so no copy of the outputs
/// is left behind. Not done for every extension: outputs used at once
/// gain nothing, and shrinking them all slowed circuit PSI's many small
/// extensions (its triples at 2^20: 0.98 -> 1.3 s).
pub fn compact<T: Zeroize + Copy>(out: &mut Zeroizing<Vec<T>>) {
    out.spare_capacity_mut().zeroize();
    out.shrink_to_fit();
}

#[cfg(test)]
mod tests;
