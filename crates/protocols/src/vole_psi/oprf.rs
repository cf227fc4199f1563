//! The VOLE-based OPRF's pieces both roles compute: item keys, the values
//! the receiver encodes, the malicious mode's offset commitment and
//! binding hash, and the output hash.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use psikit_ot::aes_hash;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::common::summaries::{pack, Summary};

/// 128-bit OKVS keys of the items: `SHA-256(label || item)` truncated
/// (collision-resistant at 128 bits, so distinct items get distinct keys
/// except with negligible probability; the fixed label makes the encoding
/// injective).
pub fn item_keys(items: &[Vec<u8>]) -> Vec<u128> {
    items.par_iter().map(|x| item_key(x)).collect()
}

/// Domain label of the item keys (16 bytes, so items up to
/// [`ONE_BLOCK`] bytes hash in one SHA-256 block).
const KEY_LABEL: &[u8; 16] = b"psikit-vole-key1";

/// Longest item whose message (label, item, padding) fits one block.
const ONE_BLOCK: usize = 64 - KEY_LABEL.len() - 9;

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One item's key. Most keys (emails, ids, phone numbers) fit one block;
/// for those we pad the block ourselves and call the compression function
/// directly: the same SHA-256 (a test compares it with the `Digest` API
/// at every length), at about half the cost of the streaming interface
/// on short inputs, which matters for a million keys per party.
fn item_key(x: &[u8]) -> u128 {
    let digest: [u8; 32] = if x.len() <= ONE_BLOCK {
        let len = KEY_LABEL.len() + x.len();
        let mut block = [0u8; 64];
        block[..KEY_LABEL.len()].copy_from_slice(KEY_LABEL);
        block[KEY_LABEL.len()..len].copy_from_slice(x);
        block[len] = 0x80;
        block[56..].copy_from_slice(&(len as u64 * 8).to_be_bytes());
        let mut state = SHA256_IV;
        sha2::compress256(&mut state, &[block.into()]);
        let mut out = [0u8; 32];
        for (o, w) in out.chunks_exact_mut(4).zip(state) {
            o.copy_from_slice(&w.to_be_bytes());
        }
        out
    } else {
        Sha256::new()
            .chain_update(KEY_LABEL)
            .chain_update(x)
            .finalize()
            .into()
    };
    u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"))
}

/// `h(k)`: the value the receiver's OKVS gives key `k`.
pub fn okvs_values(keys: &[u128]) -> Vec<u128> {
    let mut v = keys.to_vec();
    v.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
    v
}

/// The malicious mode's commitment to the sender's offset share.
pub fn commit(share: u128) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"psikit-vole-psi-offset-v1")
        .chain_update(share.to_le_bytes())
        .finalize()
        .into()
}

/// Malicious mode: `AES_{u ⊕ w}(k) ⊕ k` for each decoded value `u` and
/// item key `k` (Davies-Meyer keyed by the OPRF value, as volePSI's
/// malicious OPRF): binds each output to its item and to the offset `w`
/// neither party chose alone.
pub fn bind(mut u: Vec<u128>, w: u128, keys: &[u128]) -> Vec<u128> {
    u.par_iter_mut().zip(keys.par_iter()).for_each(|(u, k)| {
        let cipher = Aes128::new(&(*u ^ w).to_le_bytes().into());
        let mut block = k.to_le_bytes().into();
        cipher.encrypt_block(&mut block);
        *u = u128::from_le_bytes(block.into()) ^ k;
    });
    u
}

/// `H(u)` truncated to `len` bytes: the summary values compared.
pub fn summaries(mut u: Vec<u128>, len: usize) -> Vec<Summary> {
    u.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
    u.par_iter().map(|x| pack(&x.to_le_bytes(), len)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_keys_are_sha256() {
        for len in 0..100 {
            let item: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let digest = Sha256::new()
                .chain_update(KEY_LABEL)
                .chain_update(&item)
                .finalize();
            let want = u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"));
            assert_eq!(item_key(&item), want, "length {len}");
        }
    }
}
