//! The extension sender (the base OTs' receiver, holding `Δ`): receives the
//! matrix, rebuilds its columns and rows, and runs the KOS check's
//! verifier side.

use psikit_transport::{Channel, Frame};
use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;
use zeroize::{Zeroize, Zeroizing};

use super::common::{
    check_frame_rows, check_header_fields, chi_weights, column_buffer, column_sums, finish_rows,
    frame_columns, prg_for, take_columns, total_rows, Ending,
};
use super::outputs::{hash_flipped, hash_in_place, RowRecycler};
use super::{ExtConfig, RandomSenderOts, Security, SenderOts, BASE_OTS};
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseReceiverOutput};
use crate::matrix::{frames, sender_columns, SUB_BATCH};
use crate::messages::{abort, decode_blocks, kind, ExtHeader, PROTOCOL_ID};
use crate::transpose::transpose_128xn;
use crate::{ChoiceBits, OtError, SessionId};

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
    ///
    /// [`OtExtReceiver::extend`]: super::OtExtReceiver::extend
    /// [`OtExtReceiver::extend_random`]: super::OtExtReceiver::extend_random
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
    ///
    /// [`OtExtReceiver::extend_unconfirmed`]: super::OtExtReceiver::extend_unconfirmed
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
