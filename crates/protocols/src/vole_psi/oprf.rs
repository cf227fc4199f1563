//! The VOLE-based OPRF's pieces both roles compute: item keys, the values
//! the receiver encodes, and the output hash.

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

/// `H(u)` truncated to `len` bytes: the summary values compared.
pub fn summaries(mut u: Vec<u128>, len: usize) -> Vec<Summary> {
    u.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
    u.par_iter().map(|x| pack(&x.to_le_bytes(), len)).collect()
}
