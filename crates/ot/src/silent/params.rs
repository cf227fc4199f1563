//! The silent generators' parameters, and the rule that keeps them at
//! 128-bit security for the noise each one uses.
//!
//! Dual LPN with regular noise: the receiver's noise vector `e` of length
//! `N` has one nonzero entry in each of `t` equal blocks (one per GGM
//! tree), and the outputs are `E(e)` for the Expand-Convolute code `E`
//! ([`super::code`], `N = 2k`). Linear tests are the attack family that
//! dominates at these sizes; a code whose dual has minimum distance `δN`
//! touches, heuristically, a fraction `δ` of every block, and the rule
//! depends on what the nonzero entries hold ([`Noise`]):
//!
//! * **binary noise** (correlated OT, `β_i = 1`): each block's bit flips a
//!   test touching it with probability `δ`, so the bias is `(1 - 2δ)^t` and
//!   `t ≥ -128 / log2(1 - 2δ)` gives 128 bits (Boyle et al., CCS 2019,
//!   §5; the bound libOTe's `getRegNoiseWeight` uses);
//! * **field noise** (VOLE, `β_i` uniform in GF(2^128)*): the code is
//!   binary, so an adversary may test any one bit of the outputs; that bit
//!   of `E(e)` is `E` applied to bit `j` of the noise, a binary regular
//!   noise in which each block's point is present only when bit `j` of
//!   `β_i` is set, i.e. with probability 1/2. A block then biases the test
//!   by `1/2 + (1 - 2δ)/2 = 1 - δ`, so the bias is `(1 - δ)^t` and 128 bits
//!   need `t ≥ -128 / log2(1 - δ)`: more than twice the trees. (The same
//!   holds for GF(2^128)-linear tests: a field element hits a test's
//!   support with the same `1 - δ` bias per block.) **Subspace noise**
//!   (`β_i` uniform and nonzero among the elements of degree below
//!   `bits`, the relaxation of RR22's subfield VOLE that VOLE-PSI's
//!   low-communication mode uses) is held to the same rule: the outputs'
//!   bits past `bits` are zero and carry nothing, and each bit below is
//!   set in `β_i` with probability `2^(bits-1) / (2^bits - 1) ≥ 1/2`, so a
//!   block biases a test on it by `1 - 2pδ ≤ 1 - δ`.
//!
//! `δ` for Expand-Convolute is an estimate of its (pseudo-)minimum
//! distance ratio: RRT23 (CRYPTO 2023, ePrint 2023/882) measure the
//! distance of their codes empirically, and libOTe, maintained by two of
//! its authors, has configured the weight-7, window-24 instance psikit uses
//! with `δ = 0.1` (its first release of the code) and later `δ = 0.15`.
//! psikit takes the lower, more conservative `δ = 0.1`: `t ≥ 397.6` for
//! binary noise ([`Noise::Bit`], at least 400 trees) and `t ≥ 842.1` for
//! field noise ([`Noise::Field`], at least 848 trees). (Weight 21 with its
//! estimate `δ = 0.2` would need fewer trees, but three times the
//! expander's random reads, the encoder's main cost; more trees cost only
//! a few more base OTs.)
//! [`SilentParams::for_count`] never goes below its noise's
//! [`Noise::min_trees`], and [`SilentParams::check`] refuses any shape that
//! does, so no caller (nor a peer proposing sizes) can weaken it. Silver
//! codes are broken (RRT23) and are not offered.

use crate::error::OtError;

use super::code::{ExConvCode, WEIGHT};

/// Target computational security in bits.
pub const SECURITY_BITS: f64 = 128.0;
/// Estimated minimum-distance ratio of the weight-7 Expand-Convolute code.
pub const MIN_DIST_RATIO: f64 = 0.1;

/// What the receiver's noise carries, and so what an extension makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noise {
    /// `β_i = 1`: correlated OT.
    Bit,
    /// `β_i` uniform and nonzero among the elements of GF(2^128) of degree
    /// below `bits` (1 to 128; 128 is the whole field): VOLE whose
    /// receiver's `c` lies in that GF(2)-subspace ([`Noise::FIELD`] for
    /// plain VOLE).
    Field { bits: u8 },
}

impl Noise {
    /// Field noise over all of GF(2^128).
    pub const FIELD: Noise = Noise::Field { bits: 128 };

    /// Field noise of `bits` bits, if that is 1 to 128.
    pub fn field(bits: u32) -> Result<Self, OtError> {
        match u8::try_from(bits) {
            Ok(bits @ 1..=128) => Ok(Noise::Field { bits }),
            _ => Err(OtError::InvalidArgument(format!(
                "VOLE values of {bits} bits: 1 to 128 are possible"
            ))),
        }
    }

    /// The fewest trees (noise weight) giving [`SECURITY_BITS`]: 400 for
    /// binary noise, 848 for field noise of any width (the bound rounded
    /// up to a multiple of 8).
    pub const fn min_trees(self) -> usize {
        match self {
            Noise::Bit => 400,
            Noise::Field { .. } => 848,
        }
    }

    /// Bits of security against linear tests per tree: `-log2(1 - 2δ)`
    /// for binary noise, `-log2(1 - δ)` for field noise.
    pub fn bits_per_tree(self) -> f64 {
        let per_block_bias = match self {
            Noise::Bit => 1.0 - 2.0 * MIN_DIST_RATIO,
            Noise::Field { .. } => 1.0 - MIN_DIST_RATIO,
        };
        -per_block_bias.log2()
    }

    /// Base OTs packed into each tree's share of `β_i·Δ`: one per bit of
    /// `β_i`.
    pub(crate) fn share_ots(self) -> usize {
        match self {
            Noise::Bit => 0,
            Noise::Field { bits } => usize::from(bits),
        }
    }
}
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

/// Entries an extension's outputs need while its parts are made in
/// place: each part is expanded and encoded over its `n` entries at its
/// offset (the counts of the parts before it), the next part starting over
/// the spare entries of the one before, so the buffer reaches the largest
/// `offset + n` and is cut to the total count afterwards. Neither party
/// then holds a scratch buffer per part nor copies a part's outputs.
pub(crate) fn in_place_len(shapes: &[SilentParams]) -> usize {
    let mut offset = 0;
    shapes
        .iter()
        .map(|p| {
            let end = offset + p.n();
            offset += p.count;
            end
        })
        .max()
        .unwrap_or(0)
}

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
    /// What the noise carries (it sets the fewest trees).
    pub noise: Noise,
    /// Correlations asked for (the outputs are cut to this many).
    pub count: usize,
    /// Noise weight `t`: one tree, one noisy position each.
    pub trees: usize,
    /// Levels per tree.
    pub depth: usize,
}

impl SilentParams {
    /// The shape for `count` correlations: the deepest trees such that at
    /// least [`Noise::min_trees`] of them cover `2·count` leaves, then as
    /// many trees as that takes (more trees only add noise, hence security).
    pub fn for_count(count: usize, noise: Noise) -> Result<Self, OtError> {
        if count == 0 || count > MAX_COUNT {
            return Err(OtError::InvalidArgument(format!(
                "silent OT makes 1 to {MAX_COUNT} correlations at once, not {count}"
            )));
        }
        let leaves = 2 * count.max(MIN_COUNT);
        let depth = (leaves / noise.min_trees()).ilog2() as usize;
        let trees = leaves.div_ceil(1 << depth);
        let params = Self {
            noise,
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
        let min = self.noise.min_trees();
        if self.trees < min || bits < SECURITY_BITS {
            return Err(OtError::InvalidArgument(format!(
                "silent {} with {} trees gives {bits:.0}-bit security; at least {min} are needed for {SECURITY_BITS}",
                match self.noise {
                    Noise::Bit => "OT",
                    Noise::Field { .. } => "VOLE",
                },
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

    /// Security against linear tests, in bits: `t` times
    /// [`Noise::bits_per_tree`].
    pub fn security_bits(&self) -> f64 {
        self.trees as f64 * self.noise.bits_per_tree()
    }

    /// Base OTs this extension consumes: one per tree level, plus the
    /// share of `β_i·Δ` of each tree for VOLE.
    pub(crate) fn base_ots(&self) -> usize {
        self.trees * (self.depth + self.noise.share_ots())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOISES: [Noise; 3] = [Noise::Bit, Noise::FIELD, Noise::Field { bits: 61 }];

    #[test]
    fn min_trees_is_the_smallest_weight_for_128_bits() {
        for noise in NOISES {
            let needed = SECURITY_BITS / noise.bits_per_tree();
            assert_eq!(
                noise.min_trees(),
                (needed.ceil() as usize).div_ceil(8) * 8,
                "{noise:?}"
            );
        }
        // The published figures: 397.6 and 842.1 trees at δ = 0.1.
        assert!((SECURITY_BITS / Noise::Bit.bits_per_tree() - 397.6).abs() < 0.1);
        assert!((SECURITY_BITS / Noise::FIELD.bits_per_tree() - 842.1).abs() < 0.1);
    }

    #[test]
    fn field_noise_is_not_held_to_the_binary_rule() {
        // 400 trees of field noise give about 61 bits, not 128.
        let weak = SilentParams {
            noise: Noise::FIELD,
            count: 1 << 16,
            trees: 400,
            depth: 9,
        };
        assert!(weak.security_bits() < 62.0);
        assert!(weak.check().is_err());
        let bit = SilentParams {
            noise: Noise::Bit,
            ..weak
        };
        assert!(bit.check().is_ok());
    }

    #[test]
    fn every_size_meets_the_bar_and_covers_its_outputs() {
        for noise in NOISES {
            for count in [1, 100, 4096, 5000, 1 << 16, 1_362_000, 1 << 20, 1 << 24] {
                let p = SilentParams::for_count(count, noise).expect("params");
                assert!(p.security_bits() >= SECURITY_BITS, "{p:?}");
                assert!(p.trees >= noise.min_trees() && p.n() / 2 >= count, "{p:?}");
                // Not much more than asked: at most one tree's worth over.
                assert!(p.n() <= 2 * count.max(MIN_COUNT) + (1 << p.depth), "{p:?}");
            }
        }
    }

    #[test]
    fn field_noise_takes_one_to_128_bits() {
        assert_eq!(Noise::field(128).expect("128"), Noise::FIELD);
        assert_eq!(Noise::field(1).expect("1").share_ots(), 1);
        assert!(Noise::field(0).is_err() && Noise::field(129).is_err());
        // Narrower values keep the field rule: as many trees as 128 bits.
        assert_eq!(Noise::field(64).expect("64").min_trees(), 848);
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
    fn parts_made_in_place_reach_the_last_parts_end() {
        let shapes = |count: usize| -> Vec<SilentParams> {
            parts(count)
                .into_iter()
                .map(|c| SilentParams::for_count(c, Noise::FIELD).expect("params"))
                .collect()
        };
        let one = shapes(5000);
        assert_eq!(in_place_len(&one), one[0].n());
        let three = shapes(2 * MAX_PART + 5);
        assert_eq!(three.len(), 3);
        let before_last = three[0].count + three[1].count;
        assert_eq!(in_place_len(&three), before_last + three[2].n());
        assert!(in_place_len(&three) >= 2 * MAX_PART + 5);
        assert!(in_place_len(&[]) == 0);
    }

    #[test]
    fn weak_or_impossible_shapes_are_refused() {
        for noise in NOISES {
            let ok = SilentParams::for_count(1 << 16, noise).expect("params");
            let weak = SilentParams {
                trees: noise.min_trees() - 1,
                ..ok
            };
            assert!(weak.check().is_err());
            let shallow = SilentParams { depth: 1, ..ok };
            assert!(shallow.check().is_err());
            assert!(SilentParams::for_count(0, noise).is_err());
            assert!(SilentParams::for_count(MAX_COUNT + 1, noise).is_err());
        }
    }
}
