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

/// The `k` Bloom filter hash functions over a filter of `n_bf` bits.
#[derive(Clone)]
pub struct BloomHasher {
    seed: [u8; 32],
    k: u32,
    n_bf: u64,
}

impl BloomHasher {
    pub fn new(seed: [u8; 32], k: u32, n_bf: u64) -> Self {
        assert!(k > 0 && n_bf > 0, "Bloom filter needs k > 0 and n_bf > 0");
        Self { seed, k, n_bf }
    }

    pub fn n_bf(&self) -> u64 {
        self.n_bf
    }

    /// Writes `h*(x)`: the distinct positions `{h_i(x)}`, sorted. Distinct
    /// positions matter: XOR-ing `G[h_i(x)]` over colliding `i` would cancel
    /// terms (the paper's fix in section 4.1).
    pub fn positions(&self, item: &[u8], out: &mut Vec<u64>) {
        out.clear();
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(self.seed)
            .chain_update((item.len() as u64).to_le_bytes())
            .chain_update(item)
            .finalize();
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest[..16]);
        let prg = Aes128::new(&key.into());
        let blocks = self.k.div_ceil(2) as u64;
        for counter in 0..blocks {
            let mut block = Block::from((u128::from(counter)).to_le_bytes());
            prg.encrypt_block(&mut block);
            let word = u128::from_le_bytes(block.into());
            for half in [word as u64, (word >> 64) as u64] {
                if (out.len() as u32) < self.k {
                    out.push(((u128::from(half) * u128::from(self.n_bf)) >> 64) as u64);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_distinct_in_range_and_deterministic() {
        let h = BloomHasher::new([3; 32], 91, 1000);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        h.positions(b"alice", &mut a);
        h.positions(b"alice", &mut b);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert!(a.iter().all(|&p| p < 1000));
        // 91 draws from 1000 collide with probability ~98%: fewer than k.
        assert!(a.len() <= 91 && a.len() > 70);
        h.positions(b"bob", &mut b);
        assert_ne!(a, b);
        let other_seed = BloomHasher::new([4; 32], 91, 1000);
        other_seed.positions(b"alice", &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn positions_are_uniform_enough() {
        let h = BloomHasher::new([9; 32], 90, 64);
        let mut counts = [0u32; 64];
        let mut pos = Vec::new();
        for i in 0..2000u32 {
            h.positions(&i.to_le_bytes(), &mut pos);
            for &p in &pos {
                counts[p as usize] += 1;
            }
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        // Each position is hit by ~1 - (63/64)^90 = 76% of items.
        assert!(*min > 1300 && *max < 1750, "{min}..{max}");
    }
}
