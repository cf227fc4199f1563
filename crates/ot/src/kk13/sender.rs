//! KK13's sender: the extension and its outputs, `N` messages per OT.

use super::code::*;
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseReceiverOutput};
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::ext::{check_frame_rows, check_header_fields, ExtConfig};
use crate::matrix::{frames, sender_columns, SUB_BATCH};
use crate::messages::{abort, kind, ExtHeader, Mode, PROTOCOL_ID};
use crate::session::SessionId;
use psikit_transport::Channel;
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;
use zeroize::{Zeroize, Zeroizing};

/// The KK13 sender: holds `s` and one PRG per code bit.
pub struct Kk13Sender {
    sid: SessionId,
    n_choices: u16,
    s: Row,
    masks: Vec<u128>,
    prgs: Vec<Prg>,
    next_row: u64,
    poisoned: bool,
    cfg: ExtConfig,
}

impl std::fmt::Debug for Kk13Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kk13Sender(N = {}, row {})",
            self.n_choices, self.next_row
        )
    }
}

impl Drop for Kk13Sender {
    fn drop(&mut self) {
        self.s.zeroize();
        self.masks.zeroize();
    }
}

impl Kk13Sender {
    /// Runs 256 base OTs (as their receiver, random `s`) for 1-out-of-N OTs.
    pub async fn setup<R: RngCore + CryptoRng>(
        chan: &mut Channel,
        sid: &SessionId,
        n_choices: usize,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        check_n(n_choices)?;
        let choices = ChoiceBits::random(CODE_BITS, rng);
        let base_sid = sid.derive("kk13/base");
        let base = base::receive_in(chan, &base_sid, &choices, rng, cfg.pool()).await?;
        Self::from_base_ots(&base, sid, n_choices, cfg)
    }

    /// Builds the sender from 256 random OTs in which it was the receiver.
    pub fn from_base_ots(
        base: &BaseReceiverOutput,
        sid: &SessionId,
        n_choices: usize,
        cfg: ExtConfig,
    ) -> Result<Self, OtError> {
        let n_choices = check_n(n_choices)?;
        if base.len() != CODE_BITS {
            return Err(OtError::InvalidArgument(format!(
                "{} base OTs given, KK13 needs {CODE_BITS}",
                base.len()
            )));
        }
        let masks: Vec<u128> = (0..CODE_BITS).map(|p| base.choices().mask(p)).collect();
        let mut s = [0u128; 2];
        for (p, m) in masks.iter().enumerate() {
            s[p / 128] |= m & (1u128 << (p % 128));
        }
        let prgs = base
            .keys()
            .iter()
            .enumerate()
            .map(|(p, k)| prg_for(sid, p, *k))
            .collect();
        Ok(Self {
            sid: *sid,
            n_choices,
            s,
            masks,
            prgs,
            next_row: 0,
            poisoned: false,
            cfg,
        })
    }

    /// Extends `count` random 1-out-of-N OTs.
    pub async fn extend(
        &mut self,
        chan: &mut Channel,
        count: usize,
    ) -> Result<Kk13SenderOts, OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        let out = self.extend_inner(chan, count).await;
        if out.is_err() {
            self.poisoned = true;
        }
        out
    }

    async fn extend_inner(
        &mut self,
        chan: &mut Channel,
        count: usize,
    ) -> Result<Kk13SenderOts, OtError> {
        let m = rows_for(count)?;
        let first_row = self.next_row;
        let hasher = Kk13Hash::new(&self.sid, self.n_choices);
        if m == 0 {
            return Ok(Kk13SenderOts::new(
                Vec::new(),
                self.s,
                self.n_choices,
                first_row,
                hasher,
            ));
        }
        let frame = chan.recv_expect(PROTOCOL_ID, kind::EXT_HEADER).await?;
        let checked = ExtHeader::decode(&frame.payload).and_then(|h| {
            check_header_fields(&h, (Mode::Kk13, self.n_choices), first_row, count)?;
            check_frame_rows(chan, h.frame_rows, CODE_BITS)
        });
        let frame_rows = match checked {
            Ok(r) => r,
            Err(e) => return Err(abort(chan, e).await),
        };
        // Secret buffers are wiped on every exit path, errors included.
        let mut rows = Zeroizing::new(vec![[0u128; 2]; m]);
        let mut cols = Zeroizing::new(vec![0u128; 2 * frame_rows.min(m)]);
        for (start, len) in frames(m, frame_rows) {
            let frame = chan.recv_expect(PROTOCOL_ID, kind::EXT_MATRIX).await?;
            if frame.payload.len() != len * CODE_BITS / 8 {
                let e = OtError::Malformed(format!(
                    "KK13 matrix frame of {} bytes, expected {}",
                    frame.payload.len(),
                    len * CODE_BITS / 8
                ));
                return Err(abort(chan, e).await);
            }
            let g0 = first_row + start as u64;
            let (prgs, masks, cols) = (&self.prgs, &self.masks, &mut cols[..2 * len]);
            run_in(self.cfg.pool(), || {
                frame
                    .payload
                    .par_chunks(SUB_BATCH * CODE_BITS / 8)
                    .zip(cols.par_chunks_mut(2 * SUB_BATCH))
                    .zip(rows[start..start + len].par_chunks_mut(SUB_BATCH))
                    .enumerate()
                    .for_each(|(c, ((u, q), r))| {
                        sender_columns(prgs, masks, g0 + (c * SUB_BATCH) as u64, u, q);
                        halves_to_rows(q, r);
                    })
            });
        }
        self.next_row += m as u64;
        let mut rows = std::mem::take(&mut *rows);
        bytemuck::cast_slice_mut::<Row, u128>(&mut rows[count..]).zeroize();
        rows.truncate(count);
        Ok(Kk13SenderOts::new(
            rows,
            self.s,
            self.n_choices,
            first_row,
            hasher,
        ))
    }
}

/// The KK13 sender's outputs: rows `q_i` and the secret `s`; message `j` of
/// OT `i` is `H(i, q_i ⊕ (C(j) ∧ s))`, hashed on demand.
pub struct Kk13SenderOts {
    rows: Vec<Row>,
    s: Row,
    n_choices: u16,
    first_row: u64,
    hasher: Kk13Hash,
}

impl std::fmt::Debug for Kk13SenderOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kk13SenderOts({} OTs, N = {}, hidden)",
            self.rows.len(),
            self.n_choices
        )
    }
}

impl Drop for Kk13SenderOts {
    fn drop(&mut self) {
        self.rows.zeroize();
        self.s.zeroize();
    }
}

impl Kk13SenderOts {
    fn new(rows: Vec<Row>, s: Row, n_choices: u16, first_row: u64, hasher: Kk13Hash) -> Self {
        Self {
            rows,
            s,
            n_choices,
            first_row,
            hasher,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// N, the number of messages per OT.
    pub fn n_choices(&self) -> usize {
        usize::from(self.n_choices)
    }

    /// The unhashed row `q_i` (`= t_i ⊕ (C(w_i) ∧ s)`).
    pub fn q(&self, i: usize) -> Row {
        self.rows[i]
    }

    /// The sender's secret code mask `s` (its base-OT choice bits).
    pub fn s(&self) -> Row {
        self.s
    }

    /// Message `j` of OT `i`, hashed now. Panics if `j ≥ N`.
    pub fn message(&self, i: usize, j: usize) -> u128 {
        assert!(
            j < self.n_choices(),
            "message {j} of a 1-out-of-{} OT",
            self.n_choices
        );
        self.hasher
            .hash(self.first_row + i as u64, &self.input(i, code_table()[j]))
    }

    /// The hash input of the message with codeword `c` of OT `i`.
    fn input(&self, i: usize, c: Row) -> Row {
        let q = self.rows[i];
        [q[0] ^ (c[0] & self.s[0]), q[1] ^ (c[1] & self.s[1])]
    }

    /// Messages `0..n` of OTs `first..first + out.len() / n` into
    /// `out[(i - first) * n + j]`: the batched form of [`Self::message`]
    /// (two hashes at a time with the SHA extensions), for callers that
    /// spread batches over threads. Panics if `n > N` or `out.len()` is
    /// not a multiple of `n`.
    pub fn messages_into(&self, first: usize, n: usize, out: &mut [u128]) {
        assert!(n <= self.n_choices() && out.len().is_multiple_of(n));
        let code = code_table();
        let mut blocks: Vec<[u8; 64]> = (first..first + out.len() / n)
            .flat_map(|i| {
                let tweak = self.first_row + i as u64;
                (0..n).map(move |j| Kk13Hash::block(tweak, &self.input(i, code[j])))
            })
            .collect();
        self.hasher.hash_many(&blocks, out);
        blocks.zeroize();
    }

    /// All N messages of every OT (`out[i * N + j]`), hashed in parallel.
    pub fn messages(&self) -> Vec<u128> {
        let n = self.n_choices();
        let mut out = vec![0u128; self.rows.len() * n];
        out.par_chunks_mut(n).enumerate().for_each(|(i, o)| {
            o.iter_mut()
                .enumerate()
                .for_each(|(j, m)| *m = self.message(i, j))
        });
        out
    }
}
