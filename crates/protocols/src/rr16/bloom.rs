//! Bloom filter hash functions `h_1..h_k` for RR16 and the distinct
//! position set `h*(x)`.
//!
//! As the paper suggests (section 6.1), one slow hash call per item is
//! expanded by a PRG into all `k` positions: `d = SHA-256(domain || seed ||
//! x)`, then AES-128 keyed with `d[..16]` in counter mode gives `k` 64-bit
//! values, each reduced to `[0, N_bf)` by a multiply-shift. The `seed` comes
//! from a coin toss between the parties, so neither can steer positions.
//! SHA-256 plays the (observable) random oracle of the security proof; the
//! PRG expansion inherits that property.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128, Block};
use sha2::{Digest, Sha256};

const DOMAIN: &[u8] = b"psikit-rr16-bloom-v1";

/// Bits of [`Positions`]' repeat filter (8 KiB: stays in L1).
const SEEN_BITS: usize = 1 << 16;

/// The `k` Bloom filter hash functions over a filter of `n_bf` bits.
#[derive(Clone)]
pub struct BloomHasher {
    seed: [u8; 32],
    k: u32,
    n_bf: u64,
}

/// Reusable space for [`BloomHasher::positions`] (one per thread): the
/// positions of the last item, the AES blocks they come from, and a bitmap
/// that spots repeated positions without sorting.
pub struct Positions {
    list: Vec<u64>,
    blocks: Vec<Block>,
    seen: Vec<u64>,
}

impl Default for Positions {
    fn default() -> Self {
        Self {
            list: Vec::new(),
            blocks: Vec::new(),
            seen: vec![0; SEEN_BITS / 64],
        }
    }
}

impl Positions {
    /// The distinct positions of the last item hashed.
    pub fn as_slice(&self) -> &[u64] {
        &self.list
    }

    /// Drops repeated positions. Sorting the ~90 positions of every item
    /// was a large share of hashing a set into the filter, and repeats are
    /// rare (two of 90 positions in a filter of millions coincide for a few
    /// items in 100,000), so a bitmap indexed by 16 low bits finds the
    /// candidates first and only items with a candidate (about 6% at
    /// k = 90) pay for the sort.
    fn dedup(&mut self) {
        let mut candidate = false;
        for &j in &self.list {
            let (word, bit) = ((j as usize % SEEN_BITS) / 64, 1u64 << (j % 64));
            candidate |= self.seen[word] & bit != 0;
            self.seen[word] |= bit;
        }
        for &j in &self.list {
            self.seen[(j as usize % SEEN_BITS) / 64] = 0;
        }
        if candidate {
            self.list.sort_unstable();
            self.list.dedup();
        }
    }
}

impl BloomHasher {
    pub fn new(seed: [u8; 32], k: u32, n_bf: u64) -> Self {
        assert!(k > 0 && n_bf > 0, "Bloom filter needs k > 0 and n_bf > 0");
        Self { seed, k, n_bf }
    }

    /// Computes `h*(x)`: the distinct positions `{h_i(x)}`, in no
    /// particular order ([`Positions::as_slice`]). Distinct positions
    /// matter: XOR-ing `G[h_i(x)]` over colliding `i` would cancel terms
    /// (the paper's fix in section 4.1).
    pub fn positions(&self, item: &[u8], out: &mut Positions) {
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(self.seed)
            .chain_update((item.len() as u64).to_le_bytes())
            .chain_update(item)
            .finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        let prg = Aes128::new(&key.into());
        // All counter blocks in one call: the AES-NI backend pipelines
        // them, where one call per block waited out each block's latency.
        out.blocks.clear();
        out.blocks
            .extend((0..u128::from(self.k.div_ceil(2))).map(|c| Block::from(c.to_le_bytes())));
        prg.encrypt_blocks(&mut out.blocks);
        out.list.clear();
        for block in &out.blocks {
            let word = u128::from_le_bytes((*block).into());
            for half in [word as u64, (word >> 64) as u64] {
                if (out.list.len() as u32) < self.k {
                    out.list
                        .push(((u128::from(half) * u128::from(self.n_bf)) >> 64) as u64);
                }
            }
        }
        out.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_distinct_in_range_and_deterministic() {
        let h = BloomHasher::new([3; 32], 91, 1000);
        let mut scratch = Positions::default();
        let mut sorted = |h: &BloomHasher, x: &[u8]| {
            h.positions(x, &mut scratch);
            let mut v = scratch.as_slice().to_vec();
            v.sort_unstable();
            v
        };
        let a = sorted(&h, b"alice");
        assert_eq!(a, sorted(&h, b"alice"));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.iter().all(|&p| p < 1000));
        // 91 draws from 1000 collide with probability ~98%: fewer than k.
        assert!(a.len() <= 91 && a.len() > 70);
        assert_ne!(a, sorted(&h, b"bob"));
        let other_seed = BloomHasher::new([4; 32], 91, 1000);
        assert_ne!(a, sorted(&other_seed, b"alice"));
    }

    #[test]
    fn positions_are_uniform_enough() {
        let h = BloomHasher::new([9; 32], 90, 64);
        let mut counts = [0u32; 64];
        let mut pos = Positions::default();
        for i in 0..2000u32 {
            h.positions(&i.to_le_bytes(), &mut pos);
            for &p in pos.as_slice() {
                counts[p as usize] += 1;
            }
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        // Each position is hit by ~1 - (63/64)^90 = 76% of items.
        assert!(*min > 1300 && *max < 1750, "{min}..{max}");
    }

    /// The bitmap's fast path and the sorting fallback agree with a plain
    /// sort and dedup, in filters where repeats are rare and where they are
    /// the rule, including repeats that share the bitmap's 16 low bits.
    #[test]
    fn dedup_finds_exactly_the_repeats() {
        let mut pos = Positions::default();
        for (k, n_bf) in [(90, 1u64 << 30), (90, 200), (80, 1 << 17), (3, 1 << 40)] {
            let h = BloomHasher::new([7; 32], k, n_bf);
            for i in 0..500u32 {
                h.positions(&i.to_le_bytes(), &mut pos);
                let mut got = pos.as_slice().to_vec();
                got.sort_unstable();
                let mut want = got.clone();
                want.dedup();
                assert_eq!(got, want, "repeated position left in");
            }
        }
        pos.list = vec![5, 5 + SEEN_BITS as u64, 7, 5];
        pos.dedup();
        assert_eq!(pos.as_slice(), &[5, 7, 5 + SEEN_BITS as u64]);
        assert!(pos.seen.iter().all(|&w| w == 0), "bitmap left dirty");
    }
}
