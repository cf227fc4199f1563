//! KK13's receiver (the chooser): the extension and its outputs.

use super::code::*;
use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseSenderOutput};
use crate::error::OtError;
use crate::ext::ExtConfig;
use crate::matrix::{frames, receiver_columns, SUB_BATCH};
use crate::messages::{kind, ExtHeader, Mode, PROTOCOL_ID};
use crate::session::SessionId;
use crate::transpose::transpose_nx128;
use psikit_transport::{Channel, Frame};
use rand::{CryptoRng, Rng, RngCore};
use rayon::prelude::*;
use zeroize::{Zeroize, Zeroizing};

/// The KK13 receiver: holds both PRG seeds of every code bit.
pub struct Kk13Receiver {
    sid: SessionId,
    n_choices: u16,
    prgs: Vec<[Prg; 2]>,
    next_row: u64,
    poisoned: bool,
    cfg: ExtConfig,
}

impl std::fmt::Debug for Kk13Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kk13Receiver(N = {}, row {})",
            self.n_choices, self.next_row
        )
    }
}

impl Kk13Receiver {
    /// Runs 256 base OTs (as their sender) for 1-out-of-N OTs.
    pub async fn setup<R: RngCore + CryptoRng>(
        chan: &mut Channel,
        sid: &SessionId,
        n_choices: usize,
        cfg: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        check_n(n_choices)?;
        let base_sid = sid.derive("kk13/base");
        let base = base::send_in(chan, &base_sid, CODE_BITS, rng, cfg.pool()).await?;
        Self::from_base_ots(&base, sid, n_choices, cfg)
    }

    /// Builds the receiver from 256 random OTs in which it was the sender.
    pub fn from_base_ots(
        base: &BaseSenderOutput,
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
        let prgs = base
            .keys()
            .iter()
            .enumerate()
            .map(|(p, [k0, k1])| [prg_for(sid, p, *k0), prg_for(sid, p, *k1)])
            .collect();
        Ok(Self {
            sid: *sid,
            n_choices,
            prgs,
            next_row: 0,
            poisoned: false,
            cfg,
        })
    }

    /// Extends one random 1-out-of-N OT per choice (each `< N`).
    pub async fn extend(
        &mut self,
        chan: &mut Channel,
        choices: &[u8],
    ) -> Result<Kk13ReceiverOts, OtError> {
        if self.poisoned {
            return Err(OtError::Poisoned);
        }
        if let Some(bad) = choices
            .iter()
            .find(|w| usize::from(**w) >= usize::from(self.n_choices))
        {
            return Err(OtError::InvalidArgument(format!(
                "choice {bad} is not below N = {}",
                self.n_choices
            )));
        }
        let out = self.extend_inner(chan, choices).await;
        if out.is_err() {
            self.poisoned = true;
        }
        out
    }

    async fn extend_inner(
        &mut self,
        chan: &mut Channel,
        choices: &[u8],
    ) -> Result<Kk13ReceiverOts, OtError> {
        let count = choices.len();
        let m = rows_for(count)?;
        let first_row = self.next_row;
        let hasher = Kk13Hash::new(&self.sid, self.n_choices);
        if m == 0 {
            return Ok(Kk13ReceiverOts::new(
                Vec::new(),
                Vec::new(),
                first_row,
                hasher,
            ));
        }
        let frame_rows = self.cfg.frame_rows_for(chan, CODE_BITS)?;
        let header = ExtHeader {
            mode: Mode::Kk13,
            param: self.n_choices,
            first_row,
            n: count as u64,
            frame_rows: frame_rows as u32,
        };
        chan.send(&header.to_frame()).await?;
        // Secret buffers are wiped on every exit path, errors included.
        let mut w = Zeroizing::new(choices.to_vec());
        w.resize(m, 0);
        let mut rows = Zeroizing::new(vec![[0u128; 2]; m]);
        let mut cols = Zeroizing::new(vec![0u128; 2 * frame_rows.min(m)]);
        for (start, len) in frames(m, frame_rows) {
            let mut payload = vec![0u8; len * CODE_BITS / 8];
            let g0 = first_row + start as u64;
            let (prgs, cols) = (&self.prgs, &mut cols[..2 * len]);
            let (w, rows) = (&w[start..start + len], &mut rows[start..start + len]);
            run_in(self.cfg.pool(), || {
                payload
                    .par_chunks_mut(SUB_BATCH * CODE_BITS / 8)
                    .zip(cols.par_chunks_mut(2 * SUB_BATCH))
                    .zip(rows.par_chunks_mut(SUB_BATCH))
                    .zip(w.par_chunks(SUB_BATCH))
                    .enumerate()
                    .for_each(|(c, (((u, t), r), w))| {
                        kk13_receiver_chunk(prgs, g0 + (c * SUB_BATCH) as u64, w, u, t, r)
                    })
            });
            chan.send(&Frame::new(PROTOCOL_ID, kind::EXT_MATRIX, payload))
                .await?;
        }
        self.next_row += m as u64;
        let mut rows = std::mem::take(&mut *rows);
        bytemuck::cast_slice_mut::<Row, u128>(&mut rows[count..]).zeroize();
        rows.truncate(count);
        let w = w[..count].to_vec();
        Ok(Kk13ReceiverOts::new(rows, w, first_row, hasher))
    }
}

/// Receiver work for one sub-batch: codeword columns, `u`, `t` rows.
fn kk13_receiver_chunk(
    prgs: &[[Prg; 2]],
    g0: u64,
    w: &[u8],
    u: &mut [u8],
    t: &mut [u128],
    rows: &mut [Row],
) {
    let l = w.len();
    let (mut lo, mut hi): (Vec<u128>, Vec<u128>) = w
        .iter()
        .map(|&x| {
            let [lo, hi] = secret_codeword(x);
            (lo, hi)
        })
        .unzip();
    let mut ccols = vec![0u128; 2 * l];
    transpose_nx128(&lo, &mut ccols[..l]);
    transpose_nx128(&hi, &mut ccols[l..]);
    let bpc = l / 128;
    receiver_columns(prgs, g0, |p| &ccols[p * bpc..(p + 1) * bpc], u, t);
    halves_to_rows(t, rows);
    lo.zeroize();
    hi.zeroize();
    ccols.zeroize();
}

/// The KK13 receiver's outputs: rows `t_i` and choices `w_i`; its message
/// for OT `i` is `H(i, t_i)`.
pub struct Kk13ReceiverOts {
    rows: Vec<Row>,
    choices: Vec<u8>,
    first_row: u64,
    hasher: Kk13Hash,
}

impl std::fmt::Debug for Kk13ReceiverOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kk13ReceiverOts({} OTs, hidden)", self.rows.len())
    }
}

impl Drop for Kk13ReceiverOts {
    fn drop(&mut self) {
        self.rows.zeroize();
        self.choices.zeroize();
    }
}

impl Kk13ReceiverOts {
    fn new(rows: Vec<Row>, choices: Vec<u8>, first_row: u64, hasher: Kk13Hash) -> Self {
        Self {
            rows,
            choices,
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

    pub fn choice(&self, i: usize) -> usize {
        usize::from(self.choices[i])
    }

    /// The unhashed row `t_i`.
    pub fn t(&self, i: usize) -> Row {
        self.rows[i]
    }

    /// The receiver's message of OT `i` (= the sender's message `w_i`).
    pub fn message(&self, i: usize) -> u128 {
        self.hasher.hash(self.first_row + i as u64, &self.rows[i])
    }

    /// Every message, hashed in parallel.
    pub fn messages(&self) -> Vec<u128> {
        (0..self.rows.len())
            .into_par_iter()
            .map(|i| self.message(i))
            .collect()
    }
}

/// Draws uniformly random choices below `n_choices` (test and bench helper).
pub fn random_choices<R: RngCore + CryptoRng>(
    count: usize,
    n_choices: usize,
    rng: &mut R,
) -> Vec<u8> {
    (0..count)
        .map(|_| rng.gen_range(0..n_choices) as u8)
        .collect()
}
