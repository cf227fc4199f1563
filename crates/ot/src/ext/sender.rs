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
    frame_columns, prg_for, take_columns, total_rows,
};
use super::config::{Confirm, ExtConfig, Security, BASE_OTS};
use super::outputs::{hash_flipped, hash_in_place, RandomSenderOts, RowRecycler, SenderOts};
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseReceiverOutput};
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::matrix::{frames, sender_columns, SUB_BATCH};
use crate::messages::{abort, decode_blocks, kind, ExtHeader, PROTOCOL_ID};
use crate::session::SessionId;
use crate::transpose::transpose_128xn;

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
        let matrix = self.receive_matrix(chan, n, Confirm::Yes).await?;
        matrix.send_seed(chan).await?.finish(chan).await
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
        let matrix = self.start(chan, n, Confirm::Yes, true).await?;
        let (m0, m1, _) = matrix.send_seed(chan).await?.complete(chan).await?;
        Ok(RandomSenderOts::new(m0, m1))
    }

    /// First step of an extension of `n` OTs (see [the steps]): reads the
    /// receiver's header and its whole matrix, turning each frame into rows
    /// as it arrives. The receiver runs [`OtExtReceiver::send_matrix`] with
    /// `n` choice bits and the same `confirm`; a header that disagrees (on
    /// `n`, the security, the confirmation or the position) is refused.
    ///
    /// The matrix fixes the receiver's choice bits. Continue with
    /// [`MatrixReceived::send_seed`]; until the last step the instance is
    /// unusable, and stays so if a step fails or the extension is dropped.
    ///
    /// [the steps]: super#steps
    /// [`OtExtReceiver::send_matrix`]: super::OtExtReceiver::send_matrix
    pub async fn receive_matrix(
        &mut self,
        chan: &mut Channel,
        n: usize,
        confirm: Confirm,
    ) -> Result<MatrixReceived<'_>, OtError> {
        self.start(chan, n, confirm, false).await
    }

    /// [`OtExtSender::receive_matrix`], with the rows hashed into random-OT
    /// messages during the extension if `random` (see
    /// [`OtExtSender::extend_random`]).
    async fn start(
        &mut self,
        chan: &mut Channel,
        n: usize,
        confirm: Confirm,
        random: bool,
    ) -> Result<MatrixReceived<'_>, OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        // Cleared by the last step only.
        self.poisoned = true;
        let run = match n {
            0 => None,
            _ => Some(self.run(chan, n, confirm, random).await?),
        };
        Ok(MatrixReceived {
            ext: self,
            run,
            confirm,
        })
    }

    /// Reads and checks the header, then the matrix into a new [`Run`].
    async fn run(
        &mut self,
        chan: &mut Channel,
        n: usize,
        confirm: Confirm,
        random: bool,
    ) -> Result<Run, OtError> {
        let m = total_rows(n, self.security)?;
        let frame = chan.recv_expect(PROTOCOL_ID, kind::EXT_HEADER).await?;
        let frame_rows = match self.check_header(chan, &frame.payload, n, confirm) {
            Ok(r) => r,
            Err(e) => return Err(abort(chan, e).await),
        };
        let kos = self.kos();
        // Secret buffers are wiped on every exit path, errors included.
        let mut run = Run {
            n,
            first_row: self.next_row,
            random,
            rows: self.rows.take(m),
            m1: Zeroizing::new(vec![0u128; if random { n } else { 0 }]),
            cols: take_columns(&mut self.cols, column_buffer(kos, m, frame_rows)),
        };
        // Messages are hashed frame by frame while the data is in cache and
        // the receiver works on the next frame, except that KOS must check
        // the unhashed rows first: it hashes only `m_{i,1}` in the pipeline
        // and the rows into `m_{i,0}` after the check.
        self.recv_matrix(chan, frame_rows, &mut run, !kos).await?;
        Ok(run)
    }

    fn kos(&self) -> bool {
        self.security == Security::Malicious
    }

    /// Receives the matrix frame by frame and turns each into rows `q_i`.
    /// For the first `m1.len()` rows it also writes `m_{i,1}` to `m1` and,
    /// if `hash_rows`, hashes the rows in place into `m_{i,0}`. Columns go
    /// to `cols`: one frame's worth, or the whole matrix for the KOS check.
    /// (`rows`, `m1` and `cols` are `run`'s.)
    async fn recv_matrix(
        &self,
        chan: &mut Channel,
        frame_rows: usize,
        run: &mut Run,
        hash_rows: bool,
    ) -> Result<(), OtError> {
        let (rows, m1, cols) = (&mut run.rows[..], &mut run.m1[..], &mut run.cols[..]);
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
        confirm: Confirm,
    ) -> Result<usize, OtError> {
        let h = ExtHeader::decode(payload)?;
        check_header_fields(&h, self.security.header(confirm), self.next_row, n)?;
        check_frame_rows(chan, h.frame_rows, BASE_OTS)
    }

    /// KOS check, sender side (see the module docs), after the seed has
    /// gone out.
    async fn kos_verify(
        &self,
        chan: &mut Channel,
        run: &Run,
        seed: &[u8; 16],
        confirm: Confirm,
    ) -> Result<(), OtError> {
        let chis = chi_weights(&self.sid, run.first_row, seed, run.cols.len() / 128);
        let q_sums = run_in(self.cfg.pool(), || column_sums(&run.cols, &chis));
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
        if confirm == Confirm::Yes {
            chan.send(&Frame::new(PROTOCOL_ID, kind::KOS_OK, Vec::new()))
                .await?;
        }
        Ok(())
    }
}

/// What an extension holds between its steps (none for zero OTs).
struct Run {
    n: usize,
    first_row: u64,
    /// Whether the rows become random-OT messages during the extension.
    random: bool,
    /// The rows `q_i` of the whole matrix (hashed into `m_{i,0}` in the
    /// pipeline for random IKNP).
    rows: Zeroizing<Vec<u128>>,
    /// `m_{i,1}` of every OT when `random`, else empty.
    m1: Zeroizing<Vec<u128>>,
    /// Matrix columns: the whole matrix for the KOS check, else one frame.
    cols: Zeroizing<Vec<u128>>,
}

/// A sender's extension whose matrix has arrived (from
/// [`OtExtSender::receive_matrix`]); next: [`MatrixReceived::send_seed`].
#[must_use = "an extension left half-way makes its instance unusable"]
pub struct MatrixReceived<'a> {
    ext: &'a mut OtExtSender,
    run: Option<Run>,
    confirm: Confirm,
}

impl std::fmt::Debug for MatrixReceived<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixReceived")
            .field("n", &self.run.as_ref().map_or(0, |r| r.n))
            .finish_non_exhaustive()
    }
}

impl<'a> MatrixReceived<'a> {
    /// Second step: sends the KOS seed, from which both parties derive the
    /// check's weights (nothing for IKNP). Once it has returned, the caller
    /// may do its own work while the receiver computes the check and, in a
    /// [`Confirm::No`] extension, send messages of its own that must wait
    /// until the receiver's choice bits are fixed, such as a cut-and-choose
    /// challenge: the receiver reads them after its check (in a
    /// [`Confirm::Yes`] extension they would arrive in place of the
    /// confirmation). Then [`SeedSent::finish`].
    pub async fn send_seed(self, chan: &mut Channel) -> Result<SeedSent<'a>, OtError> {
        let seed = match &self.run {
            Some(_) if self.ext.kos() => {
                let seed: [u8; 16] = self.ext.rng.gen();
                chan.send(&Frame::new(PROTOCOL_ID, kind::KOS_SEED, seed.to_vec()))
                    .await?;
                Some(seed)
            }
            _ => None,
        };
        Ok(SeedSent {
            ext: self.ext,
            run: self.run,
            confirm: self.confirm,
            seed,
        })
    }
}

/// A sender's extension whose KOS seed has gone out (from
/// [`MatrixReceived::send_seed`]); last step: [`SeedSent::finish`].
#[must_use = "an extension left half-way makes its instance unusable"]
pub struct SeedSent<'a> {
    ext: &'a mut OtExtSender,
    run: Option<Run>,
    confirm: Confirm,
    /// KOS only.
    seed: Option<[u8; 16]>,
}

impl std::fmt::Debug for SeedSent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedSent")
            .field("n", &self.run.as_ref().map_or(0, |r| r.n))
            .finish_non_exhaustive()
    }
}

impl SeedSent<'_> {
    /// Last step: reads the receiver's KOS check and verifies it, confirms
    /// a passed check if the extension is [`Confirm::Yes`], and returns the
    /// OTs (IKNP: returns at once). A failed check is reported to the
    /// receiver with an error frame and returned as
    /// [`OtError::ConsistencyCheck`]; the instance is then unusable.
    pub async fn finish(self, chan: &mut Channel) -> Result<SenderOts, OtError> {
        let (delta, hash) = (self.ext.delta, self.ext.security.hash());
        let recycle = self.ext.rows.handle();
        let (rows, _, first_row) = self.complete(chan).await?;
        Ok(SenderOts::new(rows, delta, first_row, hash, recycle))
    }

    /// [`SeedSent::finish`] for either output: the rows (hashed into
    /// `m_{i,0}` if random), the `m_{i,1}` (if random) and the first row's
    /// index.
    async fn complete(self, chan: &mut Channel) -> Result<(Vec<u128>, Vec<u128>, u64), OtError> {
        let ext = self.ext;
        let Some(mut run) = self.run else {
            ext.poisoned = false;
            return Ok((Vec::new(), Vec::new(), ext.next_row));
        };
        if let Some(seed) = &self.seed {
            ext.kos_verify(chan, &run, seed, self.confirm).await?;
        }
        ext.cols = std::mem::take(&mut run.cols);
        ext.next_row += run.rows.len() as u64;
        // KOS hashes the rows into random-OT messages only after its check.
        let hash = (ext.kos() && run.random).then(|| ext.security.hash());
        let rows = finish_rows(&mut run.rows, run.n, run.first_row, hash, ext.cfg.pool());
        ext.poisoned = false;
        Ok((rows, std::mem::take(&mut *run.m1), run.first_row))
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
