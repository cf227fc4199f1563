//! The VOLE-based OPRF's pieces both roles compute: item keys, the values
//! the receiver encodes, the malicious mode's offset commitment and
//! binding hash, and the output hash.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use psikit_ot::aes_hash;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use crate::common::summaries::{pack, Summary};

/// 128-bit OKVS keys of the items: SHA-256 of the length-prefixed item,
/// truncated (collision-resistant at 128 bits, so distinct items get
/// distinct keys except with negligible probability).
pub fn item_keys(items: &[Vec<u8>]) -> Vec<u128> {
    items
        .par_iter()
        .map(|x| {
            let digest = Sha256::new()
                .chain_update(b"psikit-vole-psi-item-v1")
                .chain_update((x.len() as u64).to_le_bytes())
                .chain_update(x)
                .finalize();
            u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"))
        })
        .collect()
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
