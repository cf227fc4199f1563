//! Rows of keys: a bin, a start column in the bin and a band of bits, all
//! from two AES blocks.
//!
//! With `E1`, `E2` AES-128 under keys derived from the public seed
//! (`E_seed(0)`, `E_seed(1)`), a key `k` gets `h1 = E1(k) xor k` and
//! `h2 = E2(k) xor k` (Matyas-Meyer-Oseas, a random oracle when AES is an
//! ideal cipher). The low 32 bits of `h1` pick the bin, the next 32 the
//! start (multiply-high maps, whose bias the bound accounts for), and the
//! band is the high half of `h1` followed by `h2`, cut to the band width.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128, Block};

use super::band::{Band, BAND_WORDS};

/// Keys hashed per batch of AES calls (the `aes` crate pipelines blocks).
const BATCH: usize = 32;

/// Where a key's row lies and its bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Row {
    /// Bin index.
    pub bin: u32,
    /// First column of the band inside the bin.
    pub start: u32,
    /// The band's bits, bit `j` for column `start + j`.
    pub band: Band,
}

/// The row function of one OKVS instance (seed and sizes).
#[derive(Clone)]
pub(crate) struct RowHasher {
    e1: Aes128,
    e2: Aes128,
    bins: u64,
    starts: u64,
    mask: Band,
}

impl RowHasher {
    /// Rows for `bins` bins with `starts` start positions and `width`-bit
    /// bands, keyed by `seed`.
    pub fn new(seed: &[u8; 16], bins: usize, starts: usize, width: usize) -> Self {
        let master = Aes128::new(&(*seed).into());
        let derive = |i: u8| {
            let mut block = Block::from([i; 16]);
            master.encrypt_block(&mut block);
            Aes128::new(&block)
        };
        Self {
            e1: derive(0),
            e2: derive(1),
            bins: bins as u64,
            starts: starts as u64,
            mask: width_mask(width),
        }
    }

    /// The row of one key.
    pub fn row(&self, key: u128) -> Row {
        let mut x1 = Block::from(key.to_le_bytes());
        let mut x2 = x1;
        self.e1.encrypt_block(&mut x1);
        self.e2.encrypt_block(&mut x2);
        self.row_from(mmo(&x1, key), mmo(&x2, key))
    }

    /// The rows of `keys` into `out` (same length).
    pub fn rows(&self, keys: &[u128], out: &mut [Row]) {
        for (keys, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.rows_batch(keys, out);
        }
    }

    /// The bins of `keys` into `out` (same length): the bins of their rows,
    /// from `E1` alone.
    pub fn bins(&self, keys: &[u128], out: &mut [u32]) {
        if self.bins == 1 {
            out.fill(0);
            return;
        }
        let mut b1 = [Block::default(); BATCH];
        for (keys, out) in keys.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            for (k, x1) in keys.iter().zip(&mut b1) {
                *x1 = Block::from(k.to_le_bytes());
            }
            self.e1.encrypt_blocks(&mut b1[..keys.len()]);
            for ((&k, x1), bin) in keys.iter().zip(&b1).zip(out) {
                *bin = self.bin(mmo(x1, k));
            }
        }
    }

    fn bin(&self, h1: u128) -> u32 {
        ((h1 as u32 as u64 * self.bins) >> 32) as u32
    }

    fn rows_batch(&self, keys: &[u128], out: &mut [Row]) {
        let mut b1 = [Block::default(); BATCH];
        let mut b2 = [Block::default(); BATCH];
        for ((k, x1), x2) in keys.iter().zip(&mut b1).zip(&mut b2) {
            *x1 = Block::from(k.to_le_bytes());
            *x2 = *x1;
        }
        let len = keys.len();
        self.e1.encrypt_blocks(&mut b1[..len]);
        self.e2.encrypt_blocks(&mut b2[..len]);
        for (((&k, x1), x2), row) in keys.iter().zip(&b1).zip(&b2).zip(out) {
            *row = self.row_from(mmo(x1, k), mmo(x2, k));
        }
    }

    fn row_from(&self, h1: u128, h2: u128) -> Row {
        let bin = self.bin(h1);
        let start = (((h1 >> 32) as u32 as u64 * self.starts) >> 32) as u32;
        let bits: [u64; BAND_WORDS] = [(h1 >> 64) as u64, h2 as u64, (h2 >> 64) as u64];
        let mut band = [0u64; BAND_WORDS];
        for ((b, x), m) in band.iter_mut().zip(bits).zip(self.mask) {
            *b = x & m;
        }
        Row { bin, start, band }
    }
}

/// `E(k) xor k` from the encrypted block.
fn mmo(encrypted: &Block, key: u128) -> u128 {
    u128::from_le_bytes((*encrypted).into()) ^ key
}

/// Band with the low `width` bits set.
fn width_mask(width: usize) -> Band {
    let mut mask = [0u64; BAND_WORDS];
    for (i, m) in mask.iter_mut().enumerate() {
        let bits = width.saturating_sub(i * 64).min(64);
        *m = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
    }
    mask
}
