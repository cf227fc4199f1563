//! The VOLE-based OPRF's pieces both roles compute: item keys, the values
//! the receiver encodes, the malicious mode's offset commitment and
//! binding hash, and the output hash.

use psikit_ot::aes_hash;
use psikit_primitives::sha256;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::common::summaries::{pack_u128, Summary};

/// 128-bit OKVS keys of the items: `SHA-256(label || item)` truncated
/// (collision-resistant at 128 bits, so distinct items get distinct keys
/// except with negligible probability; the fixed label makes the encoding
/// injective).
pub fn item_keys(items: &[Vec<u8>]) -> Vec<u128> {
    let mut keys = vec![0u128; items.len()];
    keys.par_chunks_mut(KEY_BATCH)
        .zip(items.par_chunks(KEY_BATCH))
        .for_each(|(keys, items)| key_batch(items, keys));
    keys
}

/// Domain label of the item keys (16 bytes, so items up to
/// [`ONE_BLOCK`] bytes hash in one SHA-256 block).
const KEY_LABEL: &[u8; 16] = b"psikit-vole-key1";

/// Longest item whose message (label, item, padding) fits one block.
const ONE_BLOCK: usize = 64 - KEY_LABEL.len() - 9;

/// Items hashed together.
const KEY_BATCH: usize = 256;

/// The keys of a batch. Most keys (emails, ids, phone numbers) fit one
/// block: for those we pad the block ourselves and run the compression
/// function directly, on many blocks at once (`psikit_primitives::sha256`
/// interleaves two), about a quarter of the cost of the streaming
/// interface on short inputs; a test compares the result with the
/// `Digest` API at every length. Longer items take the streaming path.
fn key_batch(items: &[Vec<u8>], keys: &mut [u128]) {
    let mut blocks = [[0u8; 64]; KEY_BATCH];
    let mut at = [0usize; KEY_BATCH];
    let mut short = 0;
    for (i, (x, key)) in items.iter().zip(keys.iter_mut()).enumerate() {
        if x.len() <= ONE_BLOCK {
            let len = KEY_LABEL.len() + x.len();
            let block = &mut blocks[short];
            block[..KEY_LABEL.len()].copy_from_slice(KEY_LABEL);
            block[KEY_LABEL.len()..len].copy_from_slice(x);
            block[len] = 0x80;
            block[len + 1..56].fill(0);
            block[56..].copy_from_slice(&(len as u64 * 8).to_be_bytes());
            at[short] = i;
            short += 1;
        } else {
            let digest: [u8; 32] = Sha256::new()
                .chain_update(KEY_LABEL)
                .chain_update(x)
                .finalize()
                .into();
            *key = u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"));
        }
    }
    let mut states = [[0u32; 8]; KEY_BATCH];
    sha256::compress_from_iv(&blocks[..short], &mut states[..short]);
    for (state, &i) in states[..short].iter().zip(&at[..short]) {
        // The digest's first 16 bytes: its first four words, big-endian.
        let mut bytes = [0u8; 16];
        for (b, w) in bytes.chunks_exact_mut(4).zip(state) {
            b.copy_from_slice(&w.to_be_bytes());
        }
        keys[i] = u128::from_le_bytes(bytes);
    }
}

/// Tweak of `h`, the hash of item keys into OKVS values.
const KEY_HASH: u128 = 1;
/// Tweak of `H`, the output hash of decoded OPRF values.
const OUTPUT_HASH: u128 = 2;

/// The fewest bits of OKVS values (and of the VOLE's `C`) that keep the
/// OPRF's values hidden at all of `points` keys the sender evaluates but
/// the receiver did not encode, except with probability `2^-sigma`: a key
/// `k` has `Decode(P, k) = h(k)` with probability `2^-bits`, and only then
/// is its value one the receiver can compute, so `σ + ⌈log2 points⌉` (the
/// count's bit length) bits, at most 128 (RR22's subfield VOLE).
pub fn subfield_bits(points: u64, sigma: u32) -> u32 {
    (sigma + 64 - points.max(1).leading_zeros()).min(128)
}

/// `h(k)`: the value the receiver's OKVS gives key `k`, cut to its low
/// `bits` bits (`VoleConfig::value_bits`). `h` and the output hash `H`
/// ([`output_hash`]) are the TCCR hash of fixed-key AES under two tweaks,
/// so they are separate random functions: with one hash for both, a
/// decoded value equal to an item key would give an output equal to that
/// key's OKVS value.
pub fn okvs_values(keys: &[u128], bits: u32) -> Vec<u128> {
    let mut v = vec![0u128; keys.len()];
    okvs_values_into(keys, bits, &mut v);
    v
}

/// [`okvs_values`] into `out` (as long as `keys`).
pub fn okvs_values_into(keys: &[u128], bits: u32, out: &mut [u128]) {
    let mask = u128::MAX >> (128 - bits);
    out.copy_from_slice(keys);
    out.par_chunks_mut(1 << 12).for_each(|c| {
        aes_hash::tccr_many(c, |_| KEY_HASH);
        c.iter_mut().for_each(|x| *x &= mask);
    });
}

/// `H(u)` in place: the OPRF's output hash, under its own tweak
/// ([`okvs_values`]).
pub fn output_hash(u: &mut [u128]) {
    u.par_chunks_mut(1 << 12)
        .for_each(|c| aes_hash::tccr_many(c, |_| OUTPUT_HASH));
}

/// The malicious mode's commitment to the sender's offset share.
pub fn commit(share: u128) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"psikit-vole-psi-offset-v1")
        .chain_update(share.to_le_bytes())
        .finalize()
        .into()
}

/// The OPRF outputs of decoded values `u` at item keys `keys`, in place:
/// `H(u)`, or in malicious mode (`binding`, the offset `w`) `H(AES_{u ⊕
/// w}(k) ⊕ k)`: Davies-Meyer keyed by the OPRF value, as volePSI's
/// malicious OPRF, binds each output to its item and to the offset `w`
/// neither party chose alone.
pub fn outputs(u: &mut [u128], keys: &[u128], binding: Option<u128>) {
    if let Some(w) = binding {
        u.par_chunks_mut(BIND_BATCH)
            .zip(keys.par_chunks(BIND_BATCH))
            .for_each(|(u, keys)| {
                // The AES keys `u ⊕ w` are secret: kept in one buffer, wiped.
                let mut aes_keys = Zeroizing::new([0u128; BIND_BATCH]);
                let aes_keys = &mut aes_keys[..u.len()];
                for (a, u) in aes_keys.iter_mut().zip(u.iter()) {
                    *a = u ^ w;
                }
                u.copy_from_slice(keys);
                aes_hash::encrypt_each(aes_keys, u);
                for (u, k) in u.iter_mut().zip(keys) {
                    *u ^= k;
                }
            });
    }
    output_hash(u);
}

/// Values bound per task: a few thousand key schedules.
const BIND_BATCH: usize = 1 << 10;

/// The summary values compared: the outputs ([`outputs`]) cut to `bits`
/// bits.
pub fn summaries(outputs: &[u128], bits: u32) -> Vec<Summary> {
    outputs.par_iter().map(|&x| pack_u128(x, bits)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sha256_at_every_length() {
        // Lengths on both sides of one block, more items than a batch.
        let items: Vec<Vec<u8>> = (0..3 * KEY_BATCH + 1)
            .map(|i| {
                (0..(i % 100) as u8)
                    .map(|b| b.wrapping_mul(37) ^ i as u8)
                    .collect()
            })
            .collect();
        for (item, key) in items.iter().zip(item_keys(&items)) {
            let digest = Sha256::new()
                .chain_update(KEY_LABEL)
                .chain_update(item)
                .finalize();
            let want = u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"));
            assert_eq!(key, want, "length {}", item.len());
        }
    }
}
