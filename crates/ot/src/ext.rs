//! 1-out-of-2 OT extension: IKNP03 (semi-honest) and KOS15 (malicious),
//! one code path.
//!
//! * Y. Ishai, J. Kilian, K. Nissim, E. Petrank, "Extending oblivious
//!   transfers efficiently", CRYPTO 2003 (IKNP).
//! * M. Keller, E. Orsini, P. Scholl, "Actively secure OT extension with
//!   optimal overhead", CRYPTO 2015 (KOS), **as corrected** in the updated
//!   ePrint 2015/546.
//!
//! # Protocol
//! Setup: 128 base OTs ([`crate::base`]) with the *extension sender* as
//! base-OT receiver; its choice bits form the global `Δ`. Each base key
//! seeds an AES-CTR PRG (key derived with the session id).
//!
//! Extension for choice bits `r` (receiver-chosen, any bias): the receiver
//! sends the matrix `u_j = G(k0_j) ⊕ G(k1_j) ⊕ r` column by column, in
//! frames; the sender gets `q_j = G(k_{Δ_j}) ⊕ Δ_j·u_j`, and after
//! transposition row `i` satisfies `q_i = t_i ⊕ r_i·Δ`. That is a
//! correlated OT; random-OT messages are `H(i, q_i)`, `H(i, q_i ⊕ Δ)` and the
//! receiver's `H(i, t_i)`, hashed on demand ([`SenderOts`], [`ReceiverOts`]).
//! Rows are padded to a multiple of 128 with random choice bits; padding
//! rows are discarded.
//!
//! # The KOS consistency check (malicious security)
//! A malicious receiver could use a different choice vector in each column
//! (`u_j = G(k0_j) ⊕ G(k1_j) ⊕ r^(j)`) to learn bits of `Δ`. The original KOS
//! check (random combination of the *rows* in GF(2^128)) relied on a lemma
//! that Roy ("SoftSpokenOT", CRYPTO 2022, ePrint 2022/192, §4.1.3 and App. D)
//! showed false, with an attack on some parameters. KOS updated their paper
//! (ePrint 2015/546, Fig. 10) with a SoftSpokenOT-style check, which we
//! implement:
//!
//! 1. the receiver extends `128` extra rows with uniformly random choice
//!    bits (one 128-bit block per column, used as a mask);
//! 2. after receiving the whole matrix, the sender sends a fresh seed, from
//!    which both derive weights `χ_k ∈ GF(2^128)`, one per 128-row block `k`
//!    (the last, mask block gets weight 1);
//! 3. the receiver sends `x̃ = Σ_k χ_k·r_k` and, for every column `j`,
//!    `t̃_j = Σ_k χ_k·t_{j,k}` (each column cut into 128-bit blocks);
//! 4. the sender accepts iff `t̃_j = q̃_j ⊕ Δ_j·x̃` for all `j`, where
//!    `q̃_j = Σ_k χ_k·q_{j,k}`.
//! 5. the sender confirms (`KOS_OK`), or in an *unconfirmed* extension
//!    ([`OtExtReceiver::extend_unconfirmed`]) stays silent unless the check
//!    failed, and the receiver does not wait: the confirmation only tells
//!    the receiver that the sender accepted, which the receiver's security
//!    does not depend on, and a protocol that hears from the sender later
//!    learns of a failure then.
//!
//! Because `x̃` is one-time padded by the random mask block and `t̃_j` follows
//! from `q̃_j` and `x̃`, the sender learns nothing from the answer, so the
//! weights need no coin toss (the sender alone picks the seed, but only after
//! the matrix is fixed). A receiver cheating in `c` columns passes with
//! probability `2^-c` and then learns those `c` bits of `Δ`: the inherent
//! leakage of KOS, which the TCCR output hash tolerates (see
//! [`crate::aes_hash`]). The check adds 128 rows and about 2 KiB per
//! extension and, per OT on each side, one carry-less multiply (three
//! `PCLMULQDQ`, [`gf128::ColumnSums`]) on a column copy of the matrix kept
//! until the weights are known (cheaper than transposing the rows back).
//!
//! # Output hash
//! Semi-honest extensions hash with the CR hash `π(x) ⊕ x`, malicious ones
//! with the TCCR hash `π(π(x) ⊕ i) ⊕ π(x)`, tweak `i` = the OT's global row.

use std::sync::Arc;

use psikit_transport::frame::HEADER_LEN;
use psikit_transport::{Channel, Frame};
use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseReceiverOutput, BaseSenderOutput};
use crate::gf128::{self, ColumnSums};
use crate::matrix::{frames, receiver_columns, sender_columns, SUB_BATCH};
use crate::messages::{
    abort, block_from_le, decode_blocks, encode_blocks, kind, ExtHeader, Mode, KOS_CONFIRMED,
    KOS_UNCONFIRMED, PROTOCOL_ID,
};
use crate::transpose::transpose_128xn;
use crate::{ChoiceBits, OtError, SessionId};

/// Base OTs (and matrix columns) of the 1-out-of-2 extension.
pub const BASE_OTS: usize = 128;

/// Extra rows a KOS extension adds for its consistency check.
pub const KOS_EXTRA_ROWS: usize = 128;

/// Default rows per matrix frame: 1 MiB of matrix per frame.
pub const DEFAULT_FRAME_ROWS: usize = 1 << 16;

/// Most OTs one extension call may produce.
pub const MAX_OTS: usize = 1 << 36;

/// Semi-honest (IKNP) or malicious (KOS) security.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    SemiHonest,
    Malicious,
}

impl Security {
    /// The header's mode and parameter; `confirm` says whether a KOS sender
    /// confirms a passed check (IKNP has no check, so no parameter).
    fn header(self, confirm: bool) -> (Mode, u16) {
        match (self, confirm) {
            (Security::SemiHonest, _) => (Mode::Iknp, 0),
            (Security::Malicious, true) => (Mode::Kos, KOS_CONFIRMED),
            (Security::Malicious, false) => (Mode::Kos, KOS_UNCONFIRMED),
        }
    }

    fn hash(self) -> RowHash {
        match self {
            Security::SemiHonest => RowHash::Cr,
            Security::Malicious => RowHash::Tccr,
        }
    }
}

/// Tuning that does not change the protocol's security.
#[derive(Clone, Debug)]
pub struct ExtConfig {
    /// Pool for the parallel parts; `None` uses rayon's global pool.
    pub pool: Option<Arc<rayon::ThreadPool>>,
    /// Rows per matrix frame the receiver sends (rounded down to a multiple
    /// of the 1024-row sub-batch and capped by the channel's frame limit).
    pub frame_rows: usize,
}

impl Default for ExtConfig {
    fn default() -> Self {
        Self {
            pool: None,
            frame_rows: DEFAULT_FRAME_ROWS,
        }
    }
}

impl ExtConfig {
    /// A configuration with its own pool of `threads` threads.
    pub fn with_threads(threads: usize) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        Ok(Self {
            pool: Some(Arc::new(pool)),
            ..Self::default()
        })
    }

    pub(crate) fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_deref()
    }

    /// Rows per frame for a matrix of `columns` columns on `chan`.
    pub(crate) fn frame_rows_for(&self, chan: &Channel, columns: usize) -> Result<usize, OtError> {
        let max_payload = (chan.limits().max_frame_bytes as usize).saturating_sub(HEADER_LEN);
        let fit = max_payload / (columns / 8);
        let rows = self.frame_rows.min(fit) / SUB_BATCH * SUB_BATCH;
        if rows == 0 {
            return Err(OtError::InvalidArgument(format!(
                "frames of {} bytes cannot hold one {SUB_BATCH}-row batch of the OT matrix",
                chan.limits().max_frame_bytes
            )));
        }
        Ok(rows)
    }
}

/// Rows of the matrix for `n` OTs: padded to 128, plus KOS's mask rows.
fn total_rows(n: usize, security: Security) -> Result<usize, OtError> {
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
fn prg_for(sid: &SessionId, j: usize, key: u128) -> Prg {
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
fn chi_weights(sid: &SessionId, first_row: u64, seed: &[u8; 16], blocks: usize) -> Vec<u128> {
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
fn column_sums(cols: &[u128], chis: &[u128]) -> Vec<u128> {
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
fn column_buffer(kos: bool, m: usize, frame_rows: usize) -> usize {
    if kos {
        m
    } else {
        frame_rows.min(m)
    }
}

/// The part of the column buffer that the frame of rows `start..start+len`
/// fills: its own place when the buffer holds the whole matrix (`whole`),
/// else the start of a one-frame buffer.
fn frame_columns(cols: &mut [u128], whole: bool, start: usize, len: usize) -> &mut [u128] {
    if whole {
        &mut cols[start..start + len]
    } else {
        &mut cols[..len]
    }
}

/// Takes the reusable column buffer, sized for this extension. Stale
/// contents are harmless: every frame overwrites its part before use.
fn take_columns(buffer: &mut Zeroizing<Vec<u128>>, len: usize) -> Zeroizing<Vec<u128>> {
    let mut cols = std::mem::take(buffer);
    cols.resize(len, 0);
    cols
}

/// The first `n` rows of an extension (padding and check rows wiped),
/// hashed in place into random-OT messages when `hash` is given.
fn finish_rows(
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

/// Packed choice bytes as 128-bit blocks.
fn bytes_to_blocks(bytes: &[u8]) -> Vec<u128> {
    bytes.chunks_exact(16).map(block_from_le).collect()
}

/// Test hook: how a cheating receiver tampers with its matrix.
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub(crate) struct Cheat {
    /// `(column, row)` bits of `u` to flip (rows relative to the extension).
    pub flips: Vec<(usize, usize)>,
    /// Also adjust `t̃` so the check passes iff `Δ_j = 1` (else iff `Δ_j = 0`).
    pub compensate: bool,
}

/// The extension sender: holds `Δ` and one PRG per base OT.
pub struct OtExtSender {
    security: Security,
    sid: SessionId,
    delta: u128,
    masks: Vec<u128>,
    prgs: Vec<Prg>,
    next_row: u64,
    poisoned: bool,
    rng: StdRng,
    cfg: ExtConfig,
    /// Column buffer reused across extensions (allocating 16 bytes per OT
    /// afresh each time costs page faults); wiped on drop.
    cols: Zeroizing<Vec<u128>>,
    /// Rows buffer reused across extensions, handed back by the outputs.
    rows: RowRecycler,
}

impl std::fmt::Debug for OtExtSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtExtSender")
            .field("security", &self.security)
            .field("next_row", &self.next_row)
            .finish_non_exhaustive()
    }
}

impl Drop for OtExtSender {
    fn drop(&mut self) {
        self.delta.zeroize();
        self.masks.zeroize();
    }
}

impl OtExtSender {
    /// Runs 128 base OTs (as their receiver) with a random `Δ`.
    pub async fn setup<R: RngCore + CryptoRng>(
        chan: &mut Channel,
        sid: &SessionId,
        security: Security,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let delta: u128 = rng.gen();
        Self::setup_with_delta(chan, sid, security, cfg, delta, rng).await
    }

    /// Like [`OtExtSender::setup`] with a chosen `Δ` (e.g. one with its low
    /// bit set, as free-XOR garbling wants).
    pub async fn setup_with_delta<R: RngCore + CryptoRng>(
        chan: &mut Channel,
        sid: &SessionId,
        security: Security,
        cfg: ExtConfig,
        delta: u128,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let bits: Vec<bool> = (0..BASE_OTS).map(|j| (delta >> j) & 1 == 1).collect();
        let choices = ChoiceBits::from_bools(&bits);
        let base_sid = sid.derive("ext/base");
        let base = base::receive_in(chan, &base_sid, &choices, rng, cfg.pool()).await?;
        Self::from_base_ots(&base, sid, security, cfg, rng)
    }

    /// Builds the sender from 128 existing random OTs in which it was the
    /// receiver (its choice bits become `Δ`).
    pub fn from_base_ots<R: RngCore + CryptoRng>(
        base: &BaseReceiverOutput,
        sid: &SessionId,
        security: Security,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        if base.len() != BASE_OTS {
            return Err(OtError::InvalidArgument(format!(
                "{} base OTs given, {BASE_OTS} needed",
                base.len()
            )));
        }
        let masks: Vec<u128> = (0..BASE_OTS).map(|j| base.choices().mask(j)).collect();
        let delta = masks
            .iter()
            .enumerate()
            .fold(0u128, |d, (j, m)| d | (m & (1u128 << j)));
        let prgs = base
            .keys()
            .iter()
            .enumerate()
            .map(|(j, k)| prg_for(sid, j, *k))
            .collect();
        Ok(Self {
            security,
            sid: *sid,
            delta,
            masks,
            prgs,
            next_row: 0,
            poisoned: false,
            rng: StdRng::from_seed(rng.gen()),
            cfg,
            cols: Zeroizing::new(Vec::new()),
            rows: RowRecycler::default(),
        })
    }

    /// The global correlation `Δ` (secret).
    pub fn delta(&self) -> u128 {
        self.delta
    }

    pub fn security(&self) -> Security {
        self.security
    }

    /// Extends `n` OTs as correlated rows whose random-OT messages are hashed
    /// on demand ([`SenderOts`]). The receiver calls
    /// [`OtExtReceiver::extend`] or [`OtExtReceiver::extend_random`] with `n`
    /// choice bits. After an error the instance is unusable.
    pub async fn extend(&mut self, chan: &mut Channel, n: usize) -> Result<SenderOts, OtError> {
        let (rows, _, first_row) = self.guarded(chan, n, false, Ending::confirmed()).await?;
        let hash = self.security.hash();
        let recycle = self.rows.handle();
        Ok(SenderOts::new(rows, self.delta, first_row, hash, recycle))
    }

    /// Like [`OtExtSender::extend`], with a receiver calling
    /// [`OtExtReceiver::extend_unconfirmed`]: a passed KOS check is not
    /// confirmed (a failed one still aborts with an error frame), and
    /// `follow_up` is sent as soon as the whole matrix has arrived (right
    /// after the KOS seed). The follow-up is for a message that must only be
    /// sent once the receiver's choice bits are fixed, such as a
    /// cut-and-choose challenge: sent here, the receiver has it together with
    /// the seed, instead of one round trip later.
    ///
    /// `meanwhile` is the caller's own work, run exactly once on success:
    /// after the matrix has arrived and the seed has gone out, while the
    /// receiver computes its check (so a protocol can finish its previous
    /// batch of OTs there instead of before this extension, where it would
    /// hold up the receiver's matrix).
    pub async fn extend_unconfirmed(
        &mut self,
        chan: &mut Channel,
        n: usize,
        follow_up: Option<&Frame>,
        meanwhile: impl FnOnce() + Send,
    ) -> Result<SenderOts, OtError> {
        let ending = Ending::unconfirmed(follow_up, Box::new(meanwhile));
        let (rows, _, first_row) = self.guarded(chan, n, false, ending).await?;
        let hash = self.security.hash();
        let recycle = self.rows.handle();
        Ok(SenderOts::new(rows, self.delta, first_row, hash, recycle))
    }

    /// Extends `n` random OTs and hashes every message during the extension
    /// (frame by frame for IKNP, after the check for KOS), keeping only the
    /// messages. When every message is needed this costs less time and
    /// memory than [`OtExtSender::extend`] followed by
    /// [`SenderOts::messages`]. Same wire protocol as `extend`.
    pub async fn extend_random(
        &mut self,
        chan: &mut Channel,
        n: usize,
    ) -> Result<RandomSenderOts, OtError> {
        let (m0, m1, _) = self.guarded(chan, n, true, Ending::confirmed()).await?;
        Ok(RandomSenderOts::new(m0, m1))
    }

    /// Runs one extension and marks the instance unusable if it fails.
    /// Returns the rows (hashed into `m_{i,0}` if `random`), the `m_{i,1}`
    /// (if `random`) and the first row's index.
    async fn guarded(
        &mut self,
        chan: &mut Channel,
        n: usize,
        random: bool,
        mut ending: Ending<'_>,
    ) -> Result<(Vec<u128>, Vec<u128>, u64), OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        if n == 0 {
            ending.run_meanwhile();
            return Ok((Vec::new(), Vec::new(), self.next_row));
        }
        let out = self.run(chan, n, random, ending).await;
        if out.is_err() {
            self.poisoned = true;
        }
        out
    }

    async fn run(
        &mut self,
        chan: &mut Channel,
        n: usize,
        random: bool,
        mut ending: Ending<'_>,
    ) -> Result<(Vec<u128>, Vec<u128>, u64), OtError> {
        let m = total_rows(n, self.security)?;
        let first_row = self.next_row;
        let frame = chan.recv_expect(PROTOCOL_ID, kind::EXT_HEADER).await?;
        let frame_rows = match self.check_header(chan, &frame.payload, n, ending.confirm) {
            Ok(r) => r,
            Err(e) => return Err(abort(chan, e).await),
        };
        // Secret buffers are wiped on every exit path, errors included.
        let mut rows = self.rows.take(m);
        let mut m1 = Zeroizing::new(vec![0u128; if random { n } else { 0 }]);
        let kos = self.security == Security::Malicious;
        // Messages are hashed frame by frame while the data is in cache and
        // the receiver works on the next frame, except that KOS must check
        // the unhashed rows first: it hashes only `m_{i,1}` in the pipeline
        // and the rows into `m_{i,0}` after the check.
        let mut cols = take_columns(&mut self.cols, column_buffer(kos, m, frame_rows));
        self.recv_matrix(chan, frame_rows, &mut rows, &mut m1, &mut cols, !kos)
            .await?;
        if kos {
            self.kos_verify(chan, first_row, &cols, &mut ending).await?;
        } else {
            if let Some(follow_up) = ending.follow_up {
                chan.send(follow_up).await?;
            }
            ending.run_meanwhile();
        }
        self.cols = cols;
        self.next_row += m as u64;
        // KOS hashes the rows into random-OT messages only after its check.
        let hash = (kos && random).then(|| self.security.hash());
        let rows = finish_rows(&mut rows, n, first_row, hash, self.cfg.pool());
        Ok((rows, std::mem::take(&mut *m1), first_row))
    }

    /// Receives the matrix frame by frame and turns each into rows `q_i`.
    /// For the first `m1.len()` rows it also writes `m_{i,1}` to `m1` and,
    /// if `hash_rows`, hashes the rows in place into `m_{i,0}`. Columns go
    /// to `cols`: one frame's worth, or the whole matrix for the KOS check.
    async fn recv_matrix(
        &self,
        chan: &mut Channel,
        frame_rows: usize,
        rows: &mut [u128],
        m1: &mut [u128],
        cols: &mut [u128],
        hash_rows: bool,
    ) -> Result<(), OtError> {
        let whole = cols.len() == rows.len();
        let (prgs, masks, delta) = (&self.prgs, &self.masks, self.delta);
        let hash = self.security.hash();
        let hashed_rows = m1.len();
        for (start, len) in frames(rows.len(), frame_rows) {
            let frame = chan.recv_expect(PROTOCOL_ID, kind::EXT_MATRIX).await?;
            if frame.payload.len() != len * BASE_OTS / 8 {
                let e = OtError::Malformed(format!(
                    "matrix frame of {} bytes, expected {}",
                    frame.payload.len(),
                    len * BASE_OTS / 8
                ));
                return Err(abort(chan, e).await);
            }
            let g0 = self.next_row + start as u64;
            let cols = frame_columns(cols, whole, start, len);
            let rows = &mut rows[start..start + len];
            let out = m1
                .get_mut(start..hashed_rows.min(start + len))
                .unwrap_or_default();
            run_in(self.cfg.pool(), || {
                sender_frame(prgs, masks, g0, &frame.payload, cols, rows);
                let rows = &mut rows[..out.len()];
                hash_flipped(hash, delta, g0, rows, out);
                if hash_rows {
                    hash_in_place(hash, g0, rows);
                }
            });
        }
        Ok(())
    }

    /// Validates the receiver's header against our request; returns its
    /// frame size.
    fn check_header(
        &self,
        chan: &Channel,
        payload: &[u8],
        n: usize,
        confirm: bool,
    ) -> Result<usize, OtError> {
        let h = ExtHeader::decode(payload)?;
        check_header_fields(&h, self.security.header(confirm), self.next_row, n)?;
        check_frame_rows(chan, h.frame_rows, BASE_OTS)
    }

    /// KOS check, sender side (see the module docs).
    async fn kos_verify(
        &mut self,
        chan: &mut Channel,
        first_row: u64,
        cols: &[u128],
        ending: &mut Ending<'_>,
    ) -> Result<(), OtError> {
        let seed: [u8; 16] = self.rng.gen();
        chan.send(&Frame::new(PROTOCOL_ID, kind::KOS_SEED, seed.to_vec()))
            .await?;
        if let Some(follow_up) = ending.follow_up {
            chan.send(follow_up).await?;
        }
        // Our sums, then the caller's work, while the receiver computes its
        // answer.
        let chis = chi_weights(&self.sid, first_row, &seed, cols.len() / 128);
        let q_sums = run_in(self.cfg.pool(), || column_sums(cols, &chis));
        ending.run_meanwhile();
        let frame = chan.recv_expect(PROTOCOL_ID, kind::KOS_CHECK).await?;
        let answer = match decode_blocks(&frame.payload, BASE_OTS + 1, "KOS check") {
            Ok(a) => a,
            Err(e) => return Err(abort(chan, e).await),
        };
        let x = answer[0];
        // Accumulate every column's discrepancy so the time taken does not
        // depend on which column (i.e. which bit of Δ) failed.
        let diff = q_sums
            .iter()
            .zip(&self.masks)
            .zip(&answer[1..])
            .fold(0u128, |d, ((q, m), t)| d | (q ^ (x & m) ^ t));
        if diff != 0 {
            return Err(abort(chan, OtError::ConsistencyCheck).await);
        }
        if ending.confirm {
            chan.send(&Frame::new(PROTOCOL_ID, kind::KOS_OK, Vec::new()))
                .await?;
        }
        Ok(())
    }
}

/// Work a caller runs inside an unconfirmed extension while the peer is busy
/// (see [`OtExtSender::extend_unconfirmed`]).
type Meanwhile<'a> = Box<dyn FnOnce() + Send + 'a>;

/// How an extension ends, on either side: with the sender confirming a
/// passed KOS check, or without. Without, the sender's optional follow-up
/// message travels with the seed (after the matrix for IKNP, which has no
/// check), and each side runs its caller's `meanwhile` work where it would
/// otherwise wait for the other.
struct Ending<'a> {
    confirm: bool,
    /// Sender only.
    follow_up: Option<&'a Frame>,
    meanwhile: Option<Meanwhile<'a>>,
}

impl<'a> Ending<'a> {
    fn confirmed() -> Self {
        Self {
            confirm: true,
            follow_up: None,
            meanwhile: None,
        }
    }

    fn unconfirmed(follow_up: Option<&'a Frame>, meanwhile: Meanwhile<'a>) -> Self {
        Self {
            confirm: false,
            follow_up,
            meanwhile: Some(meanwhile),
        }
    }

    /// Runs the caller's work, at most once.
    fn run_meanwhile(&mut self) {
        if let Some(work) = self.meanwhile.take() {
            work();
        }
    }
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
    if rows == 0 || rows % SUB_BATCH != 0 || rows * (columns / 8) > max_payload {
        return Err(OtError::Malformed(format!(
            "invalid frame size of {rows} rows"
        )));
    }
    Ok(rows)
}

/// Sender work for one frame, parallel over sub-batches: rebuild `q`
/// columns, keep them in `cols`, transpose into `rows`.
fn sender_frame(
    prgs: &[Prg],
    masks: &[u128],
    g0: u64,
    u: &[u8],
    cols: &mut [u128],
    rows: &mut [u128],
) {
    u.par_chunks(SUB_BATCH * BASE_OTS / 8)
        .zip(cols.par_chunks_mut(SUB_BATCH))
        .zip(rows.par_chunks_mut(SUB_BATCH))
        .enumerate()
        .for_each(|(c, ((u, q), r))| {
            sender_columns(prgs, masks, g0 + (c * SUB_BATCH) as u64, u, q);
            transpose_128xn(q, r);
        });
}

/// Receiver work for one frame, parallel over sub-batches: build `u` into
/// `payload`, keep `t` columns in `cols`, transpose into `rows`.
fn receiver_frame(
    prgs: &[[Prg; 2]],
    g0: u64,
    r: &[u8],
    payload: &mut [u8],
    cols: &mut [u128],
    rows: &mut [u128],
) {
    payload
        .par_chunks_mut(SUB_BATCH * BASE_OTS / 8)
        .zip(cols.par_chunks_mut(SUB_BATCH))
        .zip(rows.par_chunks_mut(SUB_BATCH))
        .zip(r.par_chunks(SUB_BATCH / 8))
        .enumerate()
        .for_each(|(c, (((u, t), rows), r))| {
            let mut rb = [0u128; SUB_BATCH / 128];
            for (b, bytes) in rb.iter_mut().zip(r.chunks_exact(16)) {
                *b = block_from_le(bytes);
            }
            let blocks = &rb[..r.len() / 16];
            receiver_columns(prgs, g0 + (c * SUB_BATCH) as u64, |_| blocks, u, t);
            transpose_128xn(t, rows);
            rb.zeroize();
        });
}

/// The extension receiver: holds both PRG seeds of every base OT.
pub struct OtExtReceiver {
    security: Security,
    sid: SessionId,
    prgs: Vec<[Prg; 2]>,
    next_row: u64,
    poisoned: bool,
    rng: StdRng,
    cfg: ExtConfig,
    /// Column and rows buffers reused across extensions, as
    /// [`OtExtSender`]'s.
    cols: Zeroizing<Vec<u128>>,
    rows: RowRecycler,
    #[cfg(test)]
    pub(crate) cheat: Option<Cheat>,
}

impl std::fmt::Debug for OtExtReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtExtReceiver")
            .field("security", &self.security)
            .field("next_row", &self.next_row)
            .finish_non_exhaustive()
    }
}

impl OtExtReceiver {
    /// Runs 128 base OTs (as their sender).
    pub async fn setup<R: RngCore + CryptoRng>(
        chan: &mut Channel,
        sid: &SessionId,
        security: Security,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let base_sid = sid.derive("ext/base");
        let base = base::send_in(chan, &base_sid, BASE_OTS, rng, cfg.pool()).await?;
        Self::from_base_ots(&base, sid, security, cfg, rng)
    }

    /// Builds the receiver from 128 existing random OTs in which it was the
    /// sender.
    pub fn from_base_ots<R: RngCore + CryptoRng>(
        base: &BaseSenderOutput,
        sid: &SessionId,
        security: Security,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        if base.len() != BASE_OTS {
            return Err(OtError::InvalidArgument(format!(
                "{} base OTs given, {BASE_OTS} needed",
                base.len()
            )));
        }
        let prgs = base
            .keys()
            .iter()
            .enumerate()
            .map(|(j, [k0, k1])| [prg_for(sid, j, *k0), prg_for(sid, j, *k1)])
            .collect();
        Ok(Self {
            security,
            sid: *sid,
            prgs,
            next_row: 0,
            poisoned: false,
            rng: StdRng::from_seed(rng.gen()),
            cfg,
            cols: Zeroizing::new(Vec::new()),
            rows: RowRecycler::default(),
            #[cfg(test)]
            cheat: None,
        })
    }

    pub fn security(&self) -> Security {
        self.security
    }

    /// Extends one OT per choice bit, as correlated rows whose random-OT
    /// messages are hashed on demand ([`ReceiverOts`]). The sender calls
    /// [`OtExtSender::extend`] or [`OtExtSender::extend_random`]. After an
    /// error the instance is unusable.
    pub async fn extend(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
    ) -> Result<ReceiverOts, OtError> {
        let (rows, choices, first_row) = self
            .guarded(chan, choices, false, Ending::confirmed())
            .await?;
        let hash = self.security.hash();
        let recycle = self.rows.handle();
        Ok(ReceiverOts::new(rows, choices, first_row, hash, recycle))
    }

    /// Like [`OtExtReceiver::extend`], but returns right after sending the
    /// KOS check instead of waiting a round trip for the sender's
    /// confirmation; the sender calls [`OtExtSender::extend_unconfirmed`].
    /// If the check fails, the sender's error frame arrives in place of the
    /// next message the caller expects from it, so use this only when the
    /// sender's security does not depend on the outputs' use before then
    /// (KOS protects the sender; the receiver's own security needs no
    /// confirmation), e.g. when the sender answers later in any case.
    ///
    /// `meanwhile` is the caller's own work, run exactly once on success:
    /// after the whole matrix has been sent, while the sender receives and
    /// checks it.
    pub async fn extend_unconfirmed(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        meanwhile: impl FnOnce() + Send,
    ) -> Result<ReceiverOts, OtError> {
        let ending = Ending::unconfirmed(None, Box::new(meanwhile));
        let (rows, choices, first_row) = self.guarded(chan, choices, false, ending).await?;
        let hash = self.security.hash();
        let recycle = self.rows.handle();
        Ok(ReceiverOts::new(rows, choices, first_row, hash, recycle))
    }

    /// Extends one random OT per choice bit and hashes every message during
    /// the extension, keeping only the messages (see
    /// [`OtExtSender::extend_random`]).
    pub async fn extend_random(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
    ) -> Result<RandomReceiverOts, OtError> {
        let (messages, choices, _) = self
            .guarded(chan, choices, true, Ending::confirmed())
            .await?;
        Ok(RandomReceiverOts::new(messages, choices))
    }

    /// Runs one extension and marks the instance unusable if it fails.
    /// Returns the rows (hashed in place if `random`), the choice bits and
    /// the first row's index.
    async fn guarded(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        random: bool,
        mut ending: Ending<'_>,
    ) -> Result<(Vec<u128>, ChoiceBits, u64), OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        if choices.is_empty() {
            ending.run_meanwhile();
            return Ok((Vec::new(), ChoiceBits::default(), self.next_row));
        }
        let out = self.run(chan, choices, random, ending).await;
        if out.is_err() {
            self.poisoned = true;
        }
        out
    }

    async fn run(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        random: bool,
        mut ending: Ending<'_>,
    ) -> Result<(Vec<u128>, ChoiceBits, u64), OtError> {
        let n = choices.len();
        let m = total_rows(n, self.security)?;
        let frame_rows = self.cfg.frame_rows_for(chan, BASE_OTS)?;
        let first_row = self.next_row;
        let (mode, param) = self.security.header(ending.confirm);
        let header = ExtHeader {
            mode,
            param,
            first_row,
            n: n as u64,
            frame_rows: frame_rows as u32,
        };
        chan.send(&header.to_frame()).await?;
        // Secret buffers are wiped on every exit path, errors included.
        let r = Zeroizing::new(choices.padded(m, &mut self.rng));
        let mut rows = self.rows.take(m);
        let kos = self.security == Security::Malicious;
        // IKNP hashes each frame while it is in cache; KOS must first prove
        // consistency on the unhashed rows.
        let in_pipeline = if random && !kos { n } else { 0 };
        let mut cols = take_columns(&mut self.cols, column_buffer(kos, m, frame_rows));
        self.send_matrix(chan, frame_rows, &r, &mut rows, &mut cols, in_pipeline)
            .await?;
        ending.run_meanwhile();
        if kos {
            self.kos_prove(chan, first_row, &r, &cols, ending.confirm)
                .await?;
        }
        self.cols = cols;
        self.next_row += m as u64;
        // KOS hashes the rows into random-OT messages only after its check.
        let hash = (kos && random).then(|| self.security.hash());
        let rows = finish_rows(&mut rows, n, first_row, hash, self.cfg.pool());
        Ok((rows, ChoiceBits::from_padded(r.to_vec(), n), first_row))
    }

    /// Builds and sends the matrix frame by frame for the padded choice
    /// bytes `r`, filling `rows` with `t_i`; the first `hashed_rows` rows are
    /// then hashed in place into the random-OT messages. Columns go to
    /// `cols` as in [`OtExtSender::recv_matrix`].
    async fn send_matrix(
        &self,
        chan: &mut Channel,
        frame_rows: usize,
        r: &[u8],
        rows: &mut [u128],
        cols: &mut [u128],
        hashed_rows: usize,
    ) -> Result<(), OtError> {
        let whole = cols.len() == rows.len();
        let hash = self.security.hash();
        // One payload buffer for every frame (only the last may be shorter).
        let mut frame = Frame::new(PROTOCOL_ID, kind::EXT_MATRIX, Vec::new());
        for (start, len) in frames(rows.len(), frame_rows) {
            frame.payload.resize(len * BASE_OTS / 8, 0);
            let payload = &mut frame.payload;
            let g0 = self.next_row + start as u64;
            let (prgs, rb) = (&self.prgs, &r[start / 8..(start + len) / 8]);
            let cols = frame_columns(cols, whole, start, len);
            let rows = &mut rows[start..start + len];
            let to_hash = hashed_rows.min(start + len).saturating_sub(start);
            run_in(self.cfg.pool(), || {
                receiver_frame(prgs, g0, rb, payload, cols, rows);
                hash_in_place(hash, g0, &mut rows[..to_hash]);
            });
            #[cfg(test)]
            self.apply_flips(start, len, &mut frame.payload);
            chan.send(&frame).await?;
        }
        Ok(())
    }

    /// KOS check, receiver side (see the module docs).
    async fn kos_prove(
        &mut self,
        chan: &mut Channel,
        first_row: u64,
        r: &[u8],
        cols: &[u128],
        confirm: bool,
    ) -> Result<(), OtError> {
        let frame = chan.recv_expect(PROTOCOL_ID, kind::KOS_SEED).await?;
        let Ok(seed) = <[u8; 16]>::try_from(frame.payload.as_slice()) else {
            let e = OtError::Malformed(format!("KOS seed of {} bytes", frame.payload.len()));
            return Err(abort(chan, e).await);
        };
        let chis = chi_weights(&self.sid, first_row, &seed, cols.len() / 128);
        let (x, mut t_sums) = run_in(self.cfg.pool(), || {
            let mut rb = bytes_to_blocks(r);
            let x = gf128::reduce(gf128::inner_product(&chis, &rb));
            rb.zeroize();
            (x, column_sums(cols, &chis))
        });
        #[cfg(test)]
        self.compensate(&chis, &mut t_sums);
        let mut answer = Vec::with_capacity(BASE_OTS + 1);
        answer.push(x);
        answer.append(&mut t_sums);
        chan.send(&Frame::new(
            PROTOCOL_ID,
            kind::KOS_CHECK,
            encode_blocks(&answer),
        ))
        .await?;
        answer.zeroize();
        if !confirm {
            return Ok(());
        }
        let ok = chan.recv_expect(PROTOCOL_ID, kind::KOS_OK).await?;
        if !ok.payload.is_empty() {
            return Err(OtError::Malformed("KOS confirmation with a payload".into()));
        }
        Ok(())
    }

    /// Test hook: flips the chosen `u` bits inside this frame.
    #[cfg(test)]
    fn apply_flips(&self, start: usize, len: usize, payload: &mut [u8]) {
        let Some(cheat) = &self.cheat else { return };
        for &(col, row) in &cheat.flips {
            if (start..start + len).contains(&row) {
                let (byte, bit) = crate::matrix::bit_position(len, BASE_OTS, row - start, col);
                payload[byte] ^= 1 << bit;
            }
        }
    }

    /// Test hook: adjusts `t̃` as if the flips had been made in `t` too.
    #[cfg(test)]
    fn compensate(&self, chis: &[u128], t_sums: &mut [u128]) {
        let Some(cheat) = self.cheat.as_ref().filter(|c| c.compensate) else {
            return;
        };
        for &(col, row) in &cheat.flips {
            t_sums[col] ^= gf128::mul(chis[row / 128], 1u128 << (row % 128));
        }
    }
}

mod outputs;

use outputs::{hash_flipped, hash_in_place, RowHash, RowRecycler};
pub use outputs::{RandomReceiverOts, RandomSenderOts, ReceiverOts, SenderOts};

#[cfg(test)]
mod tests;
