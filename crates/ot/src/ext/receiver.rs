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
    total_rows, Ending,
};
use super::outputs::{hash_in_place, RowRecycler};
use super::{ExtConfig, RandomReceiverOts, ReceiverOts, Security, BASE_OTS};
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseSenderOutput};
use crate::gf128;
use crate::matrix::{frames, receiver_columns, SUB_BATCH};
use crate::messages::{abort, block_from_le, encode_blocks, kind, ExtHeader, PROTOCOL_ID};
use crate::transpose::transpose_128xn;
use crate::{ChoiceBits, OtError, SessionId};

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
    ///
    /// [`OtExtSender::extend_unconfirmed`]: super::OtExtSender::extend_unconfirmed
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
    ///
    /// [`OtExtSender::extend_random`]: super::OtExtSender::extend_random
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
    ///
    /// [`OtExtSender::recv_matrix`]: super::OtExtSender::recv_matrix
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
