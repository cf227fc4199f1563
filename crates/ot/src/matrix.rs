//! The IKNP matrix step shared by the 1-out-of-2 extension (128 columns) and
//! KK13 (256 columns).
//!
//! Per base OT `p` the receiver holds seeds `(k0_p, k1_p)` and the sender
//! holds `k_{s_p}`. For a batch of rows the receiver sends the columns
//! `u_p = G(k0_p) ⊕ G(k1_p) ⊕ c_p` (where `c_p` is what it wants the sender
//! to absorb: its choice vector for 1-out-of-2, a column of codewords for
//! KK13) and keeps `t_p = G(k0_p)`. The sender computes
//! `q_p = G(k_{s_p}) ⊕ s_p·u_p = t_p ⊕ s_p·c_p`.
//!
//! Rows are processed in sub-batches of [`SUB_BATCH`] rows, the unit of
//! parallel work. Within a sub-batch of `L` rows a matrix is column-major:
//! column `p` is `L / 128` consecutive blocks, and block `k` of every column
//! comes from PRG block `g0 / 128 + k` where `g0` is the sub-batch's global
//! first row (so sub-batches are independent). A wire frame is the
//! concatenation of its sub-batches' `u` matrices, each block as 16
//! little-endian bytes.

use zeroize::Zeroize;

use crate::aes_hash::{fill_pair, Prg};
use crate::messages::block_from_le;

/// Rows per unit of parallel work (a multiple of 128). Frames hold a whole
/// number of sub-batches, so sub-batch boundaries are the same for any frame
/// size.
pub(crate) const SUB_BATCH: usize = 1024;

/// `(first row, rows)` of each frame of an `m`-row extension.
pub(crate) fn frames(m: usize, frame_rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..m)
        .step_by(frame_rows)
        .map(move |s| (s, frame_rows.min(m - s)))
}

/// Receiver side of one sub-batch starting at global row `g0`: fills
/// `t_cols` with `G(k0_p)` and `u_out` with `G(k0_p) ⊕ G(k1_p) ⊕ c_p`, where
/// `extra(p)` yields `c_p`'s blocks.
pub(crate) fn receiver_columns<'a>(
    prgs: &[[Prg; 2]],
    g0: u64,
    extra: impl Fn(usize) -> &'a [u128],
    u_out: &mut [u8],
    t_cols: &mut [u128],
) {
    let bpc = t_cols.len() / prgs.len();
    debug_assert_eq!(u_out.len(), t_cols.len() * 16);
    debug_assert!(bpc <= SUB_BATCH / 128);
    let mut g1 = [0u128; SUB_BATCH / 128];
    let g1 = &mut g1[..bpc];
    for (p, ((pair, t), u)) in prgs
        .iter()
        .zip(t_cols.chunks_exact_mut(bpc))
        .zip(u_out.chunks_exact_mut(bpc * 16))
        .enumerate()
    {
        fill_pair(&pair[0], &pair[1], g0 / 128, t, g1);
        let c = extra(p);
        for (((ub, tv), gv), cv) in u.chunks_exact_mut(16).zip(t.iter()).zip(&*g1).zip(c) {
            ub.copy_from_slice(&(tv ^ gv ^ cv).to_le_bytes());
        }
    }
    g1.zeroize();
}

/// Sender side of one sub-batch: `q_p = G(k_{s_p}) ⊕ (u_p & mask_p)` where
/// `mask_p` is all ones iff `s_p = 1` (branch-free in the secret bit).
/// Columns are expanded two at a time ([`fill_pair`]).
pub(crate) fn sender_columns(prgs: &[Prg], masks: &[u128], g0: u64, u: &[u8], q_cols: &mut [u128]) {
    let bpc = q_cols.len() / prgs.len();
    debug_assert_eq!(u.len(), q_cols.len() * 16);
    let mut q_pairs = q_cols.chunks_exact_mut(2 * bpc);
    for (pair, q) in prgs.chunks_exact(2).zip(&mut q_pairs) {
        let (qa, qb) = q.split_at_mut(bpc);
        fill_pair(&pair[0], &pair[1], g0 / 128, qa, qb);
    }
    if let (Some(prg), q) = (
        prgs.chunks_exact(2).remainder().first(),
        q_pairs.into_remainder(),
    ) {
        prg.fill(g0 / 128, q);
    }
    for ((q, ub), mask) in q_cols
        .chunks_exact_mut(bpc)
        .zip(u.chunks_exact(bpc * 16))
        .zip(masks)
    {
        for (qv, b) in q.iter_mut().zip(ub.chunks_exact(16)) {
            *qv ^= block_from_le(b) & mask;
        }
    }
}

/// Where bit `row` of column `col` sits in a frame of `len` rows with
/// `columns` columns: `(byte index, bit index)`. Used by test hooks that
/// tamper with single matrix bits.
#[cfg(test)]
pub(crate) fn bit_position(len: usize, columns: usize, row: usize, col: usize) -> (usize, usize) {
    let chunk = row / SUB_BATCH;
    let rows_in_chunk = SUB_BATCH.min(len - chunk * SUB_BATCH);
    let bpc = rows_in_chunk / 128;
    let r = row % SUB_BATCH;
    let block = col * bpc + r / 128;
    let byte = chunk * SUB_BATCH * columns / 8 + block * 16 + (r % 128) / 8;
    (byte, r % 8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transpose::transpose_128xn;

    #[test]
    fn frames_cover_rows() {
        let f: Vec<_> = frames(5000, 2048).collect();
        assert_eq!(f, vec![(0, 2048), (2048, 2048), (4096, 904)]);
        assert_eq!(frames(0, 1024).count(), 0);
    }

    #[test]
    fn columns_correlate_and_bit_position_matches() {
        let pairs: Vec<[Prg; 2]> = (0..128u128)
            .map(|j| [Prg::new(2 * j), Prg::new(2 * j + 1)])
            .collect();
        let s: Vec<bool> = (0..128).map(|j| j % 3 == 0).collect();
        let sender_prgs: Vec<Prg> = (0..128u128)
            .map(|j| Prg::new(2 * j + u128::from(s[j as usize])))
            .collect();
        let masks: Vec<u128> = s.iter().map(|b| u128::from(*b).wrapping_neg()).collect();
        let l = 384;
        let r: Vec<u128> = vec![0xdead_beef, 1 << 127, 5];
        let mut u = vec![0u8; l * 16];
        let mut t = vec![0u128; l];
        receiver_columns(&pairs, 1024, |_| &r, &mut u, &mut t);
        let mut q = vec![0u128; l];
        sender_columns(&sender_prgs, &masks, 1024, &u, &mut q);
        let (mut tr, mut qr) = (vec![0u128; l], vec![0u128; l]);
        transpose_128xn(&t, &mut tr);
        transpose_128xn(&q, &mut qr);
        let delta: u128 = s.iter().enumerate().map(|(j, b)| u128::from(*b) << j).sum();
        for i in 0..l {
            let bit = (r[i / 128] >> (i % 128)) & 1;
            assert_eq!(qr[i] ^ tr[i], if bit == 1 { delta } else { 0 }, "row {i}");
        }
        // Flipping the bit that bit_position names changes exactly q[row][col].
        let (row, col) = (200, 77);
        let (byte, bit) = bit_position(l, 128, row, col);
        u[byte] ^= 1 << bit;
        sender_columns(&sender_prgs, &masks, 1024, &u, &mut q);
        let mut qr2 = vec![0u128; l];
        transpose_128xn(&q, &mut qr2);
        for i in 0..l {
            let expect = if i == row { masks[col] & (1 << col) } else { 0 };
            assert_eq!(qr2[i] ^ qr[i], expect);
        }
    }
}
