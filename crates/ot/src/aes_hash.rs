//! Fixed-key AES: the public permutation `π`, the correlation-robust hashes
//! built from it, and the AES-CTR PRG that expands base-OT seeds.
//!
//! # Hashes (Guo, Katz, Wang, Yu, "Efficient and secure multiparty
//! computation from fixed-key block ciphers", IEEE S&P 2020, "GKWY20")
//!
//! `π` is AES-128 under a fixed, public key (derived below from a public
//! label, so nobody chose it). GKWY20 prove, with `π` modelled as a random
//! permutation:
//!
//! * [`cr`]: `H(x) = π(x) ⊕ x` is *correlation robust* (CR): for a secret
//!   uniform `Δ`, the values `H(x_j ⊕ Δ)` at distinct public `x_j` look
//!   random. That is exactly what the semi-honest IKNP sender needs for
//!   random-OT outputs `H(q_i)`, `H(q_i ⊕ Δ)`: the rows `t_i = q_i ⊕ r_i·Δ`
//!   are pseudorandom and distinct except with negligible probability.
//! * [`tccr`]: `H(i, x) = π(π(x) ⊕ i) ⊕ π(x)` is *tweakable circular
//!   correlation robust* (TCCR). With the OT index as tweak it stays secure
//!   when the adversary chooses the inputs and even when the offsets repeat,
//!   which is what KOS15 needs: a malicious receiver picks its rows `t_i`
//!   freely (e.g. equal rows) and may learn a few bits of `Δ` through the
//!   consistency check's selective failure, and GKWY20 (Section 7) show TCCR
//!   suffices for the random-OT outputs of malicious OT extension.
//!
//! Both cost one (CR) or two (TCCR) AES calls per hashed message; the batch
//! forms pipeline AES-NI over many blocks.
//!
//! # PRG
//! [`Prg`] is AES-128 in counter mode keyed by a base-OT output: block `k` of
//! the stream is `AES_key(k)`, so any block range can be produced
//! independently (which lets batches of OTs be expanded in parallel).

use std::sync::OnceLock;

use aes::cipher::consts::U16;
use aes::cipher::inout::InOutBuf;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use sha2::{Digest, Sha256};

/// Blocks hashed per inner batch: enough to keep AES-NI's pipeline full,
/// small enough to live on the stack.
const HASH_BATCH: usize = 64;

/// The public label from which the fixed AES key is derived.
const FIXED_KEY_LABEL: &[u8] = b"psikit-ot fixed-key AES permutation v1";

/// The fixed-key permutation `π`, built once.
fn fixed() -> &'static Aes128 {
    static FIXED: OnceLock<Aes128> = OnceLock::new();
    FIXED.get_or_init(|| {
        let digest = Sha256::digest(FIXED_KEY_LABEL);
        Aes128::new_from_slice(&digest[..16]).expect("AES-128 key is 16 bytes")
    })
}

/// Encrypts every block of `blocks` in place (blocks are the little-endian
/// bytes of each `u128`).
fn encrypt_in_place(cipher: &Aes128, blocks: &mut [u128]) {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(blocks);
    let (chunks, tail) = InOutBuf::from(bytes).into_chunks::<U16>();
    debug_assert!(tail.is_empty());
    cipher.encrypt_blocks_inout(chunks);
}

/// `π(x)`: AES-128 under the fixed public key.
pub fn permute(x: u128) -> u128 {
    let mut b = [x];
    encrypt_in_place(fixed(), &mut b);
    b[0]
}

/// Applies `π` to every block in place.
pub fn permute_many(blocks: &mut [u128]) {
    encrypt_in_place(fixed(), blocks);
}

/// The GKWY20 correlation-robust hash `π(x) ⊕ x` (semi-honest IKNP).
pub fn cr(x: u128) -> u128 {
    permute(x) ^ x
}

/// [`cr`] on every block in place.
pub fn cr_many(blocks: &mut [u128]) {
    let mut save = [0u128; HASH_BATCH];
    for chunk in blocks.chunks_mut(HASH_BATCH) {
        let save = &mut save[..chunk.len()];
        save.copy_from_slice(chunk);
        permute_many(chunk);
        for (c, s) in chunk.iter_mut().zip(save.iter()) {
            *c ^= *s;
        }
    }
}

/// The GKWY20 TCCR hash `π(π(x) ⊕ i) ⊕ π(x)` with tweak `i` (KOS15).
pub fn tccr(tweak: u128, x: u128) -> u128 {
    let p = permute(x);
    permute(p ^ tweak) ^ p
}

/// [`tccr`] on every block in place; block `k` uses tweak `tweak(k)`.
pub fn tccr_many(blocks: &mut [u128], tweak: impl Fn(usize) -> u128) {
    let mut pi = [0u128; HASH_BATCH];
    for (c, chunk) in blocks.chunks_mut(HASH_BATCH).enumerate() {
        let pi = &mut pi[..chunk.len()];
        pi.copy_from_slice(chunk);
        permute_many(pi);
        for (k, (x, p)) in chunk.iter_mut().zip(pi.iter()).enumerate() {
            *x = *p ^ tweak(c * HASH_BATCH + k);
        }
        permute_many(chunk);
        for (x, p) in chunk.iter_mut().zip(pi.iter()) {
            *x ^= *p;
        }
    }
}

/// AES-128 in counter mode, keyed by a (secret) seed. Round keys are wiped
/// when the PRG is dropped (the `aes` crate's `zeroize` feature).
#[derive(Clone)]
pub struct Prg {
    cipher: Aes128,
}

impl Prg {
    /// A PRG keyed by `seed` (its little-endian bytes are the AES key).
    pub fn new(seed: u128) -> Self {
        let cipher = Aes128::new_from_slice(&seed.to_le_bytes()).expect("16-byte key");
        Self { cipher }
    }

    /// Fills `out` with stream blocks `first_block, first_block + 1, ...`.
    pub fn fill(&self, first_block: u64, out: &mut [u128]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = u128::from(first_block) + k as u128;
        }
        encrypt_in_place(&self.cipher, out);
    }

    /// Stream blocks as a fresh vector.
    pub fn blocks(&self, first_block: u64, count: usize) -> Vec<u128> {
        let mut v = vec![0u128; count];
        self.fill(first_block, &mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_forms_equal_single_forms() {
        let xs: Vec<u128> = (0..200u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let mut c = xs.clone();
        cr_many(&mut c);
        let mut t = xs.clone();
        tccr_many(&mut t, |k| 1000 + k as u128);
        for (k, x) in xs.iter().enumerate() {
            assert_eq!(c[k], cr(*x));
            assert_eq!(t[k], tccr(1000 + k as u128, *x));
            assert_ne!(c[k], *x);
        }
        // Distinct tweaks give unrelated outputs for the same input.
        assert_ne!(tccr(1, 5), tccr(2, 5));
    }

    #[test]
    fn prg_blocks_are_random_access() {
        let prg = Prg::new(42);
        let all = prg.blocks(10, 40);
        assert_eq!(prg.blocks(25, 5), all[15..20]);
        assert_ne!(Prg::new(43).blocks(10, 1)[0], all[0]);
    }
}
