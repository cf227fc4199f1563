//! The consistency check of a malicious silent extension (the check of
//! Weng-Yang-Katz-Wang, "Ferret", CCS 2020 / Boyle et al. CCS 2019, as
//! libOTe's silent VOLE runs it): a random linear combination of the
//! punctured vectors before compression.
//!
//! Honestly, the receiver's leaves are `w = v + e·Δ` with `e` sparse and
//! known to it. For public random weights `χ` (from a challenge the
//! receiver reveals only after the sender has sent its trees),
//! `Σ χ_i·w_i = Σ χ_i·v_i + c'·Δ` with `c' = Σ χ_i·e_i`. The receiver fixes
//! `c'` in advance (it chose `e` and the challenge) and takes one more
//! share of `c'·Δ` from [`CHECK_OTS`] base correlations, exactly as the
//! trees' noise shares are made: it holds `T' = Q' + c'·Δ`, the sender
//! `Q'`. Then `y = Σ χ_i·v_i + Q'` at the sender equals `Σ χ_i·w_i + T'`
//! at the receiver. The sender sends a hash of `y`; a sender whose trees
//! were inconsistent makes the two differ unless it guessed the receiver's
//! punctured positions right (the selective-failure leakage these papers
//! allow: a failed guess aborts). The hash hides `y`, which a receiver
//! that lied about `c'` could otherwise use to solve for `Δ`.

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::aes_hash::Prg;
use crate::gf128::{self, Wide};

/// Base correlations carrying the receiver's share of `c'·Δ`.
pub const CHECK_OTS: usize = 128;

/// Weights per parallel chunk.
const CHUNK: usize = 1 << 12;

/// `χ_i`: block `i` of the AES-CTR stream keyed by the challenge.
pub fn weight(challenge: u128, i: u64) -> u128 {
    let mut out = [0u128];
    Prg::new(challenge).fill(i, &mut out);
    out[0]
}

/// `Σ_j χ_{first + j}·v_j`, unreduced.
pub fn weighted_sum(challenge: u128, first: u64, v: &[u128]) -> Wide {
    let prg = Prg::new(challenge);
    v.par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut chi = vec![0u128; chunk.len()];
            prg.fill(first + (c * CHUNK) as u64, &mut chi);
            gf128::inner_product(&chi, chunk)
        })
        .reduce(|| (0, 0), gf128::add_wide)
}

/// What the sender sends and the receiver compares: a hash of `y`.
pub fn digest(y: u128) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"psikit-silent-check-v1")
        .chain_update(y.to_le_bytes())
        .finalize()
        .into()
}
