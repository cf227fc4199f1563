//! What the sender and the receiver of an extension both run: matrix
//! sizes, the column PRG keys, the KOS check weights and column sums, the
//! reusable buffers and header checks.

use psikit_transport::frame::HEADER_LEN;
use psikit_transport::Channel;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

use super::config::{Security, BASE_OTS, KOS_EXTRA_ROWS, MAX_OTS};
use super::outputs::{hash_in_place, RowHash};
use crate::aes_hash::Prg;
use crate::base::run_in;
use crate::error::OtError;
use crate::gf128::ColumnSums;
use crate::matrix::SUB_BATCH;
use crate::messages::{ExtHeader, Mode};
use crate::session::SessionId;

/// Rows of the matrix for `n` OTs: padded to 128, plus KOS's mask rows.
pub(super) fn total_rows(n: usize, security: Security) -> Result<usize, OtError> {
    if n > MAX_OTS {
        return Err(OtError::InvalidArgument(format!(
            "{n} OTs requested; at most {MAX_OTS} per call"
        )));
    }
    let extra = match security {
        Security::SemiHonest => 0,
        Security::Malicious => KOS_EXTRA_ROWS,
    };
    Ok(n.div_ceil(128) * 128 + extra)
}

/// AES key for column `j`'s PRG: the base-OT key bound to the session.
pub(super) fn prg_for(sid: &SessionId, j: usize, key: u128) -> Prg {
    let mut h = Sha256::new();
    h.update(b"psikit-ot/ext/prg/v1");
    h.update(sid.0);
    h.update((j as u32).to_be_bytes());
    h.update(key.to_le_bytes());
    let mut d: [u8; 32] = h.finalize().into();
    let seed = u128::from_le_bytes(d[..16].try_into().expect("16 bytes"));
    d.zeroize();
    Prg::new(seed)
}

/// The check weights `χ_0..χ_{blocks-1}`; the last (mask block) is 1.
pub(super) fn chi_weights(
    sid: &SessionId,
    first_row: u64,
    seed: &[u8; 16],
    blocks: usize,
) -> Vec<u128> {
    let mut h = Sha256::new();
    h.update(b"psikit-ot/kos/chi/v1");
    h.update(sid.0);
    h.update(first_row.to_be_bytes());
    h.update(seed);
    let d = h.finalize();
    let prg = Prg::new(u128::from_le_bytes(d[..16].try_into().expect("16 bytes")));
    let mut chis = prg.blocks(0, blocks);
    if let Some(last) = chis.last_mut() {
        *last = 1;
    }
    chis
}

/// `Σ_k χ_k·col_{j,k}` for every column `j` (reduced), where `col_{j,k}` is
/// the `k`-th 128-bit block of matrix column `j`. `cols` is the whole
/// matrix in the sub-batch column layout the extension computes (128
/// columns of `SUB_BATCH / 128` blocks per sub-batch), kept for this check
/// in a buffer reused across extensions; transposing the rows back instead
/// cost a second full transposition.
pub(super) fn column_sums(cols: &[u128], chis: &[u128]) -> Vec<u128> {
    let zero = || ColumnSums::new(BASE_OTS);
    cols.par_chunks(SUB_BATCH)
        .enumerate()
        .fold(zero, |mut acc, (c, sub)| {
            let bpc = sub.len() / BASE_OTS;
            acc.add(&chis[c * (SUB_BATCH / 128)..][..bpc], sub);
            acc
        })
        .reduce(zero, |a, b| a.merge(&b))
        .finish()
}

/// Length of the column buffer of an extension of `m` rows: KOS keeps the
/// whole matrix for its check ([`column_sums`]); IKNP needs one frame's.
pub(super) fn column_buffer(kos: bool, m: usize, frame_rows: usize) -> usize {
    if kos {
        m
    } else {
        frame_rows.min(m)
    }
}

/// The part of the column buffer that the frame of rows `start..start+len`
/// fills: its own place when the buffer holds the whole matrix (`whole`),
/// else the start of a one-frame buffer.
pub(super) fn frame_columns(
    cols: &mut [u128],
    whole: bool,
    start: usize,
    len: usize,
) -> &mut [u128] {
    if whole {
        &mut cols[start..start + len]
    } else {
        &mut cols[..len]
    }
}

/// Takes the reusable column buffer, sized for this extension. Stale
/// contents are harmless: every frame overwrites its part before use.
pub(super) fn take_columns(buffer: &mut Zeroizing<Vec<u128>>, len: usize) -> Zeroizing<Vec<u128>> {
    let mut cols = std::mem::take(buffer);
    cols.resize(len, 0);
    cols
}

/// The first `n` rows of an extension (padding and check rows wiped),
/// hashed in place into random-OT messages when `hash` is given.
pub(super) fn finish_rows(
    rows: &mut Zeroizing<Vec<u128>>,
    n: usize,
    first_row: u64,
    hash: Option<RowHash>,
    pool: Option<&rayon::ThreadPool>,
) -> Vec<u128> {
    if let Some(hash) = hash {
        run_in(pool, || hash_in_place(hash, first_row, &mut rows[..n]));
    }
    let mut rows = std::mem::take(&mut **rows);
    rows[n..].zeroize();
    rows.truncate(n);
    rows
}

/// Checks mode, position and size of an extension header.
pub(crate) fn check_header_fields(
    h: &ExtHeader,
    (mode, param): (Mode, u16),
    next_row: u64,
    n: usize,
) -> Result<(), OtError> {
    if (h.mode, h.param) != (mode, param) {
        return Err(OtError::Mismatch(format!(
            "peer runs {:?}({}), we run {mode:?}({param})",
            h.mode, h.param
        )));
    }
    if h.first_row != next_row {
        return Err(OtError::Mismatch(format!(
            "peer is at row {}, we are at row {next_row}",
            h.first_row
        )));
    }
    if h.n != n as u64 {
        return Err(OtError::Mismatch(format!(
            "peer extends {} OTs, we extend {n}",
            h.n
        )));
    }
    Ok(())
}

/// Validates a peer-chosen frame size: whole sub-batches within our limit.
pub(crate) fn check_frame_rows(
    chan: &Channel,
    frame_rows: u32,
    columns: usize,
) -> Result<usize, OtError> {
    let rows = frame_rows as usize;
    let max_payload = (chan.limits().max_frame_bytes as usize).saturating_sub(HEADER_LEN);
    if rows == 0 || !rows.is_multiple_of(SUB_BATCH) || rows * (columns / 8) > max_payload {
        return Err(OtError::Malformed(format!(
            "invalid frame size of {rows} rows"
        )));
    }
    Ok(rows)
}
