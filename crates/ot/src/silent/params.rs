//! The silent generators' parameters, and the rule that keeps them at
//! 128-bit security.
//!
//! Dual LPN with regular noise: the receiver's noise vector `e` of length
//! `N` has one nonzero entry in each of `t` equal blocks (one per GGM
//! tree), and the outputs are `E(e)` for the Expand-Convolute code `E`
//! ([`super::code`], `N = 2k`). Against linear tests (the attack family
//! that dominates at these sizes), a code whose dual has minimum distance
//! `δN` gives `(1 - 2δ)^t` advantage for regular noise, so
//! `t ≥ -128 / log2(1 - 2δ)` gives 128 bits.
//!
//! `δ` for Expand-Convolute is an estimate of its (pseudo-)minimum
//! distance ratio: RRT23 (CRYPTO 2023, ePrint 2023/882) measure the
//! distance of their codes empirically, and libOTe, maintained by two of
//! its authors, has configured the weight-7, window-24 instance psikit uses
//! with `δ = 0.1` (its first release of the code) and later `δ = 0.15`.
//! psikit takes the lower, more conservative `δ = 0.1`: `t ≥ 397.6`, so at
//! least [`MIN_TREES`] = 400 trees. (Weight 21 with its estimate `δ = 0.2`
//! would need only 176 trees, but three times the expander's random reads,
//! the encoder's main cost; more trees cost only a few more base OTs.)
//! [`SilentParams::for_count`] never goes below [`MIN_TREES`], and
//! [`SilentParams::check`] refuses any shape that does, so no caller (nor a
//! peer proposing sizes) can weaken it. Silver codes are broken (RRT23) and
//! are not offered.

use crate::OtError;

use super::code::{ExConvCode, WEIGHT};

/// Target computational security in bits.
pub const SECURITY_BITS: f64 = 128.0;
/// Estimated minimum-distance ratio of the weight-7 Expand-Convolute code.
pub const MIN_DIST_RATIO: f64 = 0.1;
/// The fewest trees (noise weight) giving [`SECURITY_BITS`]: 400.
pub const MIN_TREES: usize = 400;
/// Fewest correlations generated at once (smaller requests are cut from
/// this many): below it the trees would be too small to be worth it.
pub const MIN_COUNT: usize = 1 << 12;
/// Most correlations generated at once: `2^30` (16 GiB of blocks).
pub const MAX_COUNT: usize = 1 << 30;

/// Most correlations made by one extension; larger requests run as several
/// extensions of about equal size ([`parts`]). Per extension the encoder's
/// random reads stay near the last-level cache up to about this size; a
/// single extension of 2^24 took three times as long per correlation
/// (reads from DRAM), while each extra part costs its trees and base OTs
/// (about 1.7 MB of traffic for a VOLE part). 2^21 keeps VOLE-PSI at 2^20
/// items (1.29 M correlations) in one part: two parts cost it 12 bits per
/// item of traffic.
pub const MAX_PART: usize = 1 << 21;

/// How an extension of `count` correlations is split: `ceil(count /
/// MAX_PART)` parts of sizes differing by at most one.
pub fn parts(count: usize) -> Vec<usize> {
    let n = count.div_ceil(MAX_PART).max(1);
    (0..n)
        .map(|i| count / n + usize::from(i < count % n))
        .collect()
}

/// One silent extension's shape: `trees` GGM trees of `2^depth` leaves
/// give `N = trees · 2^depth` noisy entries, encoded to `N / 2` outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SilentParams {
    /// Correlations asked for (the outputs are cut to this many).
    pub count: usize,
    /// Noise weight `t`: one tree, one noisy position each.
    pub trees: usize,
    /// Levels per tree.
    pub depth: usize,
}

impl SilentParams {
    /// The shape for `count` correlations: the deepest trees such that at
    /// least [`MIN_TREES`] of them cover `2·count` leaves, then as many
    /// trees as that takes (more trees only add noise, hence security).
    pub fn for_count(count: usize) -> Result<Self, OtError> {
        if count == 0 || count > MAX_COUNT {
            return Err(OtError::InvalidArgument(format!(
                "silent OT makes 1 to {MAX_COUNT} correlations at once, not {count}"
            )));
        }
        let leaves = 2 * count.max(MIN_COUNT);
        let depth = (leaves / MIN_TREES).ilog2() as usize;
        let trees = leaves.div_ceil(1 << depth);
        let params = Self {
            count,
            trees,
            depth,
        };
        params.check()?;
        Ok(params)
    }

    /// Refuses shapes below 128-bit security or too small for the code.
    pub fn check(&self) -> Result<(), OtError> {
        let bits = self.security_bits();
        if self.trees < MIN_TREES || bits < SECURITY_BITS {
            return Err(OtError::InvalidArgument(format!(
                "silent OT with {} trees gives {bits:.0}-bit security; at least {MIN_TREES} are needed for {SECURITY_BITS}",
                self.trees
            )));
        }
        if self.depth == 0 || self.depth > 30 || self.n() / 2 < self.count.max(WEIGHT) {
            return Err(OtError::InvalidArgument(format!(
                "silent OT trees of depth {} cannot hold {} correlations",
                self.depth, self.count
            )));
        }
        Ok(())
    }

    /// Noisy entries `N`.
    pub fn n(&self) -> usize {
        self.trees << self.depth
    }

    /// The code compressing the `N` entries.
    pub fn code(&self) -> ExConvCode {
        ExConvCode::new(self.n() / 2)
    }

    /// Security against linear tests, in bits: `-t·log2(1 - 2δ)`.
    pub fn security_bits(&self) -> f64 {
        -(self.trees as f64) * (1.0 - 2.0 * MIN_DIST_RATIO).log2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_trees_is_the_smallest_weight_for_128_bits() {
        let needed = SECURITY_BITS / -(1.0 - 2.0 * MIN_DIST_RATIO).log2();
        assert_eq!(MIN_TREES, (needed.ceil() as usize).div_ceil(8) * 8);
    }

    #[test]
    fn every_size_meets_the_bar_and_covers_its_outputs() {
        for count in [1, 100, 4096, 5000, 1 << 16, 1_362_000, 1 << 20, 1 << 24] {
            let p = SilentParams::for_count(count).expect("params");
            assert!(p.security_bits() >= SECURITY_BITS, "{p:?}");
            assert!(p.trees >= MIN_TREES && p.n() / 2 >= count, "{p:?}");
            // Not much more than asked: at most one tree's worth over.
            assert!(p.n() <= 2 * count.max(MIN_COUNT) + (1 << p.depth), "{p:?}");
        }
    }

    #[test]
    fn large_requests_split_into_even_parts() {
        assert_eq!(parts(5), vec![5]);
        assert_eq!(parts(MAX_PART), vec![MAX_PART]);
        let p = parts(MAX_PART + 3);
        assert_eq!(p.iter().sum::<usize>(), MAX_PART + 3);
        assert_eq!(p.len(), 2);
        assert!(p[0] - p[1] <= 1);
        assert_eq!(parts(16 * MAX_PART).len(), 16);
    }

    #[test]
    fn weak_or_impossible_shapes_are_refused() {
        let ok = SilentParams::for_count(1 << 16).expect("params");
        let weak = SilentParams { trees: 399, ..ok };
        assert!(weak.check().is_err());
        let shallow = SilentParams { depth: 1, ..ok };
        assert!(shallow.check().is_err());
        assert!(SilentParams::for_count(0).is_err());
        assert!(SilentParams::for_count(MAX_COUNT + 1).is_err());
    }
}
