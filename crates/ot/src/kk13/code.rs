//! What both KK13 roles use: the Walsh-Hadamard code, the PRGs of the
//! base OTs' keys, the message hash and the row layout.

use std::sync::OnceLock;

use psikit_primitives::sha256;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use crate::aes_hash::Prg;
use crate::error::OtError;
use crate::ext::MAX_OTS;
use crate::session::SessionId;
use crate::transpose::transpose_128xn;

/// Code length, and so the number of base OTs KK13 uses.
pub const CODE_BITS: usize = 256;

/// Largest N supported by the length-256 Walsh-Hadamard code.
pub const MAX_N: usize = 256;

/// A 256-bit row or codeword, low half first.
pub type Row = [u128; 2];

/// The Walsh-Hadamard codeword of `w`: bit `p` is the parity of `w & p`.
pub fn codeword(w: u8) -> Row {
    let mut c = [0u128; 2];
    for p in 0..CODE_BITS {
        let bit = u128::from((u32::from(w) & p as u32).count_ones() & 1);
        c[p / 128] |= bit << (p % 128);
    }
    c
}

/// The codeword of a secret choice `w` (the receiver's), as the XOR of
/// the codewords of its set bits (the code is linear) chosen by masks: a
/// read of [`code_table`] at `w` would show `w`'s cache line, three of a
/// 4-bit choice's bits.
pub(super) fn secret_codeword(w: u8) -> Row {
    let table = code_table();
    (0..8).fold([0u128; 2], |c, k| {
        let basis = table[1 << k];
        let set = u128::from(w >> k & 1).wrapping_neg();
        [c[0] ^ (set & basis[0]), c[1] ^ (set & basis[1])]
    })
}

/// All 256 codewords, computed once (the sender reads them at public
/// indices).
pub(super) fn code_table() -> &'static [Row; 256] {
    static TABLE: OnceLock<[Row; 256]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|w| codeword(w as u8)))
}

pub(super) fn check_n(n_choices: usize) -> Result<u16, OtError> {
    if !(2..=MAX_N).contains(&n_choices) {
        return Err(OtError::InvalidArgument(format!(
            "KK13 needs 2 ≤ N ≤ {MAX_N}, got {n_choices}"
        )));
    }
    Ok(n_choices as u16)
}

/// PRG for code column `p`, bound to the session.
pub(super) fn prg_for(sid: &SessionId, p: usize, key: u128) -> Prg {
    let mut h = Sha256::new();
    h.update(b"psikit-ot/kk13/prg/v1");
    h.update(sid.0);
    h.update((p as u32).to_be_bytes());
    h.update(key.to_le_bytes());
    let mut d: [u8; 32] = h.finalize().into();
    let seed = u128::from_le_bytes(d[..16].try_into().expect("16 bytes"));
    d.zeroize();
    Prg::new(seed)
}

/// The output hash `H(i, x)`: SHA-256 of a fixed 64-byte prefix (domain,
/// session, N), the tweak `i` and the 256-bit input, truncated to 128 bits.
/// The prefix is compressed once; each hash is then one compression of
/// its last, padded block, two at a time with the SHA extensions
/// ([`psikit_primitives::sha256::compress_from`]).
#[derive(Clone)]
pub(super) struct Kk13Hash {
    prefix: [u32; 8],
}

impl Kk13Hash {
    pub(super) fn new(sid: &SessionId, n_choices: u16) -> Self {
        let mut block = [0u8; 64];
        let label = b"psikit-ot/kk13/hash/v1";
        block[..label.len()].copy_from_slice(label);
        block[24..56].copy_from_slice(&sid.0);
        block[56..58].copy_from_slice(&n_choices.to_be_bytes());
        let mut prefix = [[0u32; 8]];
        sha256::compress_from_iv(&[block], &mut prefix);
        Self { prefix: prefix[0] }
    }

    /// The last block of `H(tweak, x)`: tweak, input, SHA-256's padding
    /// (104 bytes hashed in all).
    pub(super) fn block(tweak: u64, x: &Row) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[..8].copy_from_slice(&tweak.to_be_bytes());
        b[8..24].copy_from_slice(&x[0].to_le_bytes());
        b[24..40].copy_from_slice(&x[1].to_le_bytes());
        b[40] = 0x80;
        b[56..].copy_from_slice(&(104u64 * 8).to_be_bytes());
        b
    }

    /// The first 16 bytes of the digest in `state`.
    pub(super) fn output(state: &[u32; 8]) -> u128 {
        let mut d = [0u8; 16];
        for (d, w) in d.chunks_exact_mut(4).zip(state) {
            d.copy_from_slice(&w.to_be_bytes());
        }
        u128::from_le_bytes(d)
    }

    pub(super) fn hash(&self, tweak: u64, x: &Row) -> u128 {
        let mut out = [0u128];
        self.hash_many(&[Self::block(tweak, x)], &mut out);
        out[0]
    }

    /// `out[k]` = the hash whose last block is `blocks[k]`.
    pub(super) fn hash_many(&self, blocks: &[[u8; 64]], out: &mut [u128]) {
        let mut states = vec![[0u32; 8]; blocks.len()];
        sha256::compress_from(&self.prefix, blocks, &mut states);
        for (o, s) in out.iter_mut().zip(&states) {
            *o = Self::output(s);
        }
        states.zeroize();
    }
}

/// Rows of the matrix for `count` OTs (padded to 128).
pub(super) fn rows_for(count: usize) -> Result<usize, OtError> {
    if count > MAX_OTS {
        return Err(OtError::InvalidArgument(format!("{count} OTs requested")));
    }
    Ok(count.div_ceil(128) * 128)
}

/// Transposes 256 columns (two 128 × L halves) into L rows of 256 bits.
pub(super) fn halves_to_rows(cols: &[u128], rows: &mut [Row]) {
    let l = rows.len();
    let mut lo = vec![0u128; l];
    let mut hi = vec![0u128; l];
    transpose_128xn(&cols[..l], &mut lo);
    transpose_128xn(&cols[l..], &mut hi);
    for ((r, a), b) in rows.iter_mut().zip(&lo).zip(&hi) {
        *r = [*a, *b];
    }
    lo.zeroize();
    hi.zeroize();
}
