//! The extension receiver (the base OTs' sender, holding both PRG seeds of
//! every base OT): builds and sends the matrix for its choice bits and runs
//! the KOS check's prover side.

use psikit_transport::{Channel, Frame};
use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;
use zeroize::{Zeroize, Zeroizing};

use super::common::{
    chi_weights, column_buffer, column_sums, finish_rows, frame_columns, prg_for, take_columns,
    total_rows,
};
use super::config::{Confirm, ExtConfig, Security, BASE_OTS};
use super::outputs::{hash_in_place, RandomReceiverOts, ReceiverOts, RowRecycler};
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseSenderOutput};
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::gf128;
use crate::matrix::{frames, receiver_columns, SUB_BATCH};
use crate::messages::{abort, block_from_le, encode_blocks, kind, ExtHeader, PROTOCOL_ID};
use crate::session::SessionId;
use crate::transpose::transpose_128xn;

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
    ///
    /// [`OtExtSender`]: super::OtExtSender
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
    ///
    /// [`OtExtSender::extend`]: super::OtExtSender::extend
    /// [`OtExtSender::extend_random`]: super::OtExtSender::extend_random
    pub async fn extend(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
    ) -> Result<ReceiverOts, OtError> {
        let matrix = self.send_matrix(chan, choices, Confirm::Yes).await?;
        matrix.answer_check(chan).await
    }

    /// Extends one random OT per choice bit and hashes every message during
    /// the extension, keeping only the messages (see
    /// [`OtExtSender::extend_random`]).
    ///
    /// [`OtExtSender::extend_random`]: super::OtExtSender::extend_random
    pub async fn extend_random(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
    ) -> Result<RandomReceiverOts, OtError> {
        let matrix = self.start(chan, choices, Confirm::Yes, true).await?;
        let (messages, choices, _) = matrix.complete(chan).await?;
        Ok(RandomReceiverOts::new(messages, choices))
    }

    /// First step of an extension with one OT per choice bit (see [the
    /// steps]): sends the header, announcing `confirm`, and the whole
    /// matrix, frame by frame as it is built. The sender runs
    /// [`OtExtSender::receive_matrix`] with as many OTs and the same
    /// `confirm`.
    ///
    /// Once it has returned the choice bits are fixed, and the caller may do
    /// its own work while the sender processes the matrix. Then
    /// [`MatrixSent::answer_check`]; until then the instance is unusable,
    /// and stays so if a step fails or the extension is dropped.
    ///
    /// [the steps]: super#steps
    /// [`OtExtSender::receive_matrix`]: super::OtExtSender::receive_matrix
    pub async fn send_matrix(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        confirm: Confirm,
    ) -> Result<MatrixSent<'_>, OtError> {
        self.start(chan, choices, confirm, false).await
    }

    /// [`OtExtReceiver::send_matrix`], with the rows hashed into random-OT
    /// messages during the extension if `random` (see
    /// [`OtExtReceiver::extend_random`]).
    async fn start(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        confirm: Confirm,
        random: bool,
    ) -> Result<MatrixSent<'_>, OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        // Cleared by the last step only.
        self.poisoned = true;
        let run = match choices.is_empty() {
            true => None,
            false => Some(self.run(chan, choices, confirm, random).await?),
        };
        Ok(MatrixSent {
            ext: self,
            run,
            confirm,
        })
    }

    /// Sends the header, then the matrix, built into a new [`Run`].
    async fn run(
        &mut self,
        chan: &mut Channel,
        choices: &ChoiceBits,
        confirm: Confirm,
        random: bool,
    ) -> Result<Run, OtError> {
        let n = choices.len();
        let m = total_rows(n, self.security)?;
        let frame_rows = self.cfg.frame_rows_for(chan, BASE_OTS)?;
        let (mode, param) = self.security.header(confirm);
        let header = ExtHeader {
            mode,
            param,
            first_row: self.next_row,
            n: n as u64,
            frame_rows: frame_rows as u32,
        };
        chan.send(&header.to_frame()).await?;
        let kos = self.kos();
        // Secret buffers are wiped on every exit path, errors included.
        let mut run = Run {
            n,
            first_row: self.next_row,
            random,
            r: Zeroizing::new(choices.padded(m, &mut self.rng)),
            rows: self.rows.take(m),
            cols: take_columns(&mut self.cols, column_buffer(kos, m, frame_rows)),
        };
        // IKNP hashes each frame while it is in cache; KOS must first prove
        // consistency on the unhashed rows.
        let in_pipeline = if random && !kos { n } else { 0 };
        self.send_frames(chan, frame_rows, &mut run, in_pipeline)
            .await?;
        Ok(run)
    }

    fn kos(&self) -> bool {
        self.security == Security::Malicious
    }

    /// Builds and sends the matrix frame by frame for the padded choice
    /// bytes `r`, filling `rows` with `t_i`; the first `hashed_rows` rows are
    /// then hashed in place into the random-OT messages. Columns go to
    /// `cols` as in [`OtExtSender::recv_matrix`]. (`r`, `rows` and `cols`
    /// are `run`'s.)
    ///
    /// [`OtExtSender::recv_matrix`]: super::OtExtSender::recv_matrix
    async fn send_frames(
        &self,
        chan: &mut Channel,
        frame_rows: usize,
        run: &mut Run,
        hashed_rows: usize,
    ) -> Result<(), OtError> {
        let (r, rows, cols) = (&run.r[..], &mut run.rows[..], &mut run.cols[..]);
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
        &self,
        chan: &mut Channel,
        run: &Run,
        confirm: Confirm,
    ) -> Result<(), OtError> {
        let frame = chan.recv_expect(PROTOCOL_ID, kind::KOS_SEED).await?;
        let Ok(seed) = <[u8; 16]>::try_from(frame.payload.as_slice()) else {
            let e = OtError::Malformed(format!("KOS seed of {} bytes", frame.payload.len()));
            return Err(abort(chan, e).await);
        };
        let chis = chi_weights(&self.sid, run.first_row, &seed, run.cols.len() / 128);
        let (x, mut t_sums) = run_in(self.cfg.pool(), || {
            let mut rb = bytes_to_blocks(&run.r);
            let x = gf128::reduce(gf128::inner_product(&chis, &rb));
            rb.zeroize();
            (x, column_sums(&run.cols, &chis))
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
        if confirm == Confirm::No {
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

/// What an extension holds between its steps (none for zero OTs).
struct Run {
    n: usize,
    first_row: u64,
    /// Whether the rows become random-OT messages during the extension.
    random: bool,
    /// The choice bits, padded to the matrix's rows.
    r: Zeroizing<Vec<u8>>,
    /// The rows `t_i` of the whole matrix (hashed in the pipeline for
    /// random IKNP).
    rows: Zeroizing<Vec<u128>>,
    /// Matrix columns: the whole matrix for the KOS check, else one frame.
    cols: Zeroizing<Vec<u128>>,
}

/// A receiver's extension whose matrix has gone out (from
/// [`OtExtReceiver::send_matrix`]); last step: [`MatrixSent::answer_check`].
#[must_use = "an extension left half-way makes its instance unusable"]
pub struct MatrixSent<'a> {
    ext: &'a mut OtExtReceiver,
    run: Option<Run>,
    confirm: Confirm,
}

impl std::fmt::Debug for MatrixSent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixSent")
            .field("n", &self.run.as_ref().map_or(0, |r| r.n))
            .finish_non_exhaustive()
    }
}

impl MatrixSent<'_> {
    /// Last step: reads the sender's KOS seed, sends the check, and, in a
    /// [`Confirm::Yes`] extension, waits for the sender's confirmation;
    /// returns the OTs (IKNP: returns at once). In a [`Confirm::No`]
    /// extension a failed check shows up later, as the sender's error frame
    /// in place of the next message the caller reads from it.
    pub async fn answer_check(self, chan: &mut Channel) -> Result<ReceiverOts, OtError> {
        let hash = self.ext.security.hash();
        let recycle = self.ext.rows.handle();
        let (rows, choices, first_row) = self.complete(chan).await?;
        Ok(ReceiverOts::new(rows, choices, first_row, hash, recycle))
    }

    /// [`MatrixSent::answer_check`] for either output: the rows (hashed in
    /// place if random), the choice bits and the first row's index.
    async fn complete(self, chan: &mut Channel) -> Result<(Vec<u128>, ChoiceBits, u64), OtError> {
        let ext = self.ext;
        let Some(mut run) = self.run else {
            ext.poisoned = false;
            return Ok((Vec::new(), ChoiceBits::default(), ext.next_row));
        };
        let kos = ext.kos();
        if kos {
            ext.kos_prove(chan, &run, self.confirm).await?;
        }
        ext.cols = std::mem::take(&mut run.cols);
        ext.next_row += run.rows.len() as u64;
        // KOS hashes the rows into random-OT messages only after its check.
        let hash = (kos && run.random).then(|| ext.security.hash());
        let rows = finish_rows(&mut run.rows, run.n, run.first_row, hash, ext.cfg.pool());
        ext.poisoned = false;
        let choices = ChoiceBits::from_padded(std::mem::take(&mut *run.r), run.n);
        Ok((rows, choices, run.first_row))
    }
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
