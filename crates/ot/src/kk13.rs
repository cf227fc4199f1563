//! Random 1-out-of-N OT extension (KK13), N ≤ 256, semi-honest.
//!
//! V. Kolesnikov and R. Kumaresan, "Improved OT extension for transferring
//! short secrets", CRYPTO 2013. IKNP generalised from the repetition code to
//! a linear code `C` of length `k` and minimum distance `d ≥ κ`: with `k` base
//! OTs (sender's choice string `s ∈ {0,1}^k`), the receiver with choice
//! `w_i ∈ [N]` sends the columns of `G(k0) ⊕ G(k1) ⊕ C(w)`; the sender ends
//! with rows `q_i = t_i ⊕ (C(w_i) ∧ s)`. Its `N` messages are
//! `H(i, q_i ⊕ (C(j) ∧ s))` for `j ∈ [N]`; the receiver's is `H(i, t_i)`, equal
//! to message `w_i`. For `j ≠ w_i` the hash input differs from `t_i` in
//! `C(j) ⊕ C(w_i)`, masked by at least `d` unknown bits of `s`.
//!
//! * Code: the Walsh-Hadamard code of length 256, `C(w)_p = ⟨w, p⟩` (parity
//!   of `w & p`), whose nonzero codewords all have weight 128: `d = 128 = κ`,
//!   as KK13 requires for 128-bit security. It supports `N ≤ 256`.
//! * Base OTs: 256 (one per code bit), either fresh Masny-Rindal OTs
//!   ([`Kk13Sender::setup`]) or random OTs from a 1-out-of-2 extension in
//!   which the KK13 *sender* was the *receiver*
//!   ([`crate::ReceiverOts::to_base_receiver`], no public-key work).
//! * Hash: the inputs are 256 bits, so the 128-bit fixed-key hashes do not
//!   apply directly (and XOR-ing two 128-bit hashes of the halves would allow
//!   a 2^64 meet-in-the-middle search on outputs). We use SHA-256 (random
//!   oracle; SHA-NI when present) over a precomputed 64-byte prefix holding
//!   the domain, session id and N, so each message costs one compression.
//! * Security: semi-honest (KK13). A malicious variant needs the PSS17
//!   consistency check, not implemented.

use std::sync::OnceLock;

use psikit_primitives::sha256;
use psikit_transport::{Channel, Frame};
use rand::{CryptoRng, Rng, RngCore};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

use crate::aes_hash::Prg;
use crate::base::{self, run_in, BaseReceiverOutput, BaseSenderOutput};
use crate::ext::{check_frame_rows, check_header_fields, ExtConfig, MAX_OTS};
use crate::matrix::{frames, receiver_columns, sender_columns, SUB_BATCH};
use crate::messages::{abort, kind, ExtHeader, Mode, PROTOCOL_ID};
use crate::transpose::{transpose_128xn, transpose_nx128};
use crate::{ChoiceBits, OtError, SessionId};

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

/// All 256 codewords, computed once.
fn code_table() -> &'static [Row; 256] {
    static TABLE: OnceLock<[Row; 256]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|w| codeword(w as u8)))
}

fn check_n(n_choices: usize) -> Result<u16, OtError> {
    if !(2..=MAX_N).contains(&n_choices) {
        return Err(OtError::InvalidArgument(format!(
            "KK13 needs 2 ≤ N ≤ {MAX_N}, got {n_choices}"
        )));
    }
    Ok(n_choices as u16)
}

/// PRG for code column `p`, bound to the session.
fn prg_for(sid: &SessionId, p: usize, key: u128) -> Prg {
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
struct Kk13Hash {
    prefix: [u32; 8],
}

impl Kk13Hash {
    fn new(sid: &SessionId, n_choices: u16) -> Self {
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
    fn block(tweak: u64, x: &Row) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[..8].copy_from_slice(&tweak.to_be_bytes());
        b[8..24].copy_from_slice(&x[0].to_le_bytes());
        b[24..40].copy_from_slice(&x[1].to_le_bytes());
        b[40] = 0x80;
        b[56..].copy_from_slice(&(104u64 * 8).to_be_bytes());
        b
    }

    /// The first 16 bytes of the digest in `state`.
    fn output(state: &[u32; 8]) -> u128 {
        let mut d = [0u8; 16];
        for (d, w) in d.chunks_exact_mut(4).zip(state) {
            d.copy_from_slice(&w.to_be_bytes());
        }
        u128::from_le_bytes(d)
    }

    fn hash(&self, tweak: u64, x: &Row) -> u128 {
        let mut out = [0u128];
        self.hash_many(&[Self::block(tweak, x)], &mut out);
        out[0]
    }

    /// `out[k]` = the hash whose last block is `blocks[k]`.
    fn hash_many(&self, blocks: &[[u8; 64]], out: &mut [u128]) {
        let mut states = vec![[0u32; 8]; blocks.len()];
        sha256::compress_from(&self.prefix, blocks, &mut states);
        for (o, s) in out.iter_mut().zip(&states) {
            *o = Self::output(s);
        }
        states.zeroize();
    }
}

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

/// Rows of the matrix for `count` OTs (padded to 128).
fn rows_for(count: usize) -> Result<usize, OtError> {
    if count > MAX_OTS {
        return Err(OtError::InvalidArgument(format!("{count} OTs requested")));
    }
    Ok(count.div_ceil(128) * 128)
}

/// Transposes 256 columns (two 128 × L halves) into L rows of 256 bits.
fn halves_to_rows(cols: &[u128], rows: &mut [Row]) {
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
    let code = code_table();
    let mut lo: Vec<u128> = w.iter().map(|x| code[usize::from(*x)][0]).collect();
    let mut hi: Vec<u128> = w.iter().map(|x| code[usize::from(*x)][1]).collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ext::{OtExtReceiver, OtExtSender, Security};
    use psikit_transport::Limits;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn walsh_hadamard_distance_is_128() {
        let t = code_table();
        assert_eq!(t[0], [0, 0]);
        for a in 0..256 {
            for b in (a + 1)..256 {
                let d = (t[a][0] ^ t[b][0]).count_ones() + (t[a][1] ^ t[b][1]).count_ones();
                assert_eq!(d, 128, "{a} vs {b}");
            }
        }
    }

    /// Asserts the KK13 correlation and the random-OT outputs.
    fn assert_kk13(s: &Kk13SenderOts, r: &Kk13ReceiverOts, choices: &[u8]) {
        let n = s.n_choices();
        let all = s.messages();
        let rm = r.messages();
        let code = code_table();
        for (i, w) in choices.iter().enumerate() {
            let w = usize::from(*w);
            assert_eq!(r.choice(i), w);
            let (q, t, c, sm) = (s.q(i), r.t(i), code[w], s.s());
            assert_eq!(
                [q[0] ^ t[0], q[1] ^ t[1]],
                [c[0] & sm[0], c[1] & sm[1]],
                "row {i}"
            );
            assert_eq!(rm[i], r.message(i));
            for j in 0..n {
                assert_eq!(all[i * n + j], s.message(i, j));
                if j == w {
                    assert_eq!(rm[i], all[i * n + j], "OT {i}");
                } else {
                    assert_ne!(rm[i], all[i * n + j], "OT {i}, message {j}");
                }
            }
        }
    }

    /// The batched messages equal the single ones, over any range.
    fn assert_batches(s: &Kk13SenderOts) {
        let n = s.n_choices();
        for (first, count, k) in [
            (0, s.len(), n),
            (3, 5.min(s.len() - 3), 1),
            (1, 7, 3.min(n)),
        ] {
            let mut out = vec![0u128; count * k];
            s.messages_into(first, k, &mut out);
            for (at, m) in out.iter().enumerate() {
                assert_eq!(*m, s.message(first + at / k, at % k), "{first} {count} {k}");
            }
        }
    }

    #[test]
    fn the_hash_is_sha256_of_prefix_tweak_and_input() {
        let sid = SessionId::new(b"kk13 hash");
        let h = Kk13Hash::new(&sid, 16);
        let x = [u128::MAX / 3, 0x0123_4567_89ab_cdef];
        let mut prefix = [0u8; 64];
        prefix[..22].copy_from_slice(b"psikit-ot/kk13/hash/v1");
        prefix[24..56].copy_from_slice(&sid.0);
        prefix[56..58].copy_from_slice(&16u16.to_be_bytes());
        let mut d = Sha256::new();
        d.update(prefix);
        d.update(77u64.to_be_bytes());
        d.update(x[0].to_le_bytes());
        d.update(x[1].to_le_bytes());
        let want = u128::from_le_bytes(d.finalize()[..16].try_into().expect("16"));
        assert_eq!(h.hash(77, &x), want);
    }

    async fn run(n_choices: usize, count: usize, cfg: ExtConfig) {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"kk13");
        let scfg = cfg.clone();
        let sender = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(1);
            let mut s = Kk13Sender::setup(&mut a, &sid, n_choices, scfg, &mut rng)
                .await
                .unwrap();
            let o1 = s.extend(&mut a, count).await.unwrap();
            let o2 = s.extend(&mut a, 300).await.unwrap();
            (o1, o2)
        });
        let mut rng = StdRng::seed_from_u64(2);
        let mut r = Kk13Receiver::setup(&mut b, &sid, n_choices, cfg, &mut rng)
            .await
            .unwrap();
        let c1 = random_choices(count, n_choices, &mut rng);
        let c2 = random_choices(300, n_choices, &mut rng);
        let r1 = r.extend(&mut b, &c1).await.unwrap();
        let r2 = r.extend(&mut b, &c2).await.unwrap();
        let (s1, s2) = sender.await.unwrap();
        assert_batches(&s2);
        assert_kk13(&s1, &r1, &c1);
        assert_kk13(&s2, &r2, &c2);
    }

    #[tokio::test]
    async fn kk13_correlation_for_several_n() {
        for n in [2, 4, 16, 256] {
            run(n, 2_000, ExtConfig::default()).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn kk13_one_thread_small_frames() {
        let mut cfg = ExtConfig::with_threads(1).unwrap();
        cfg.frame_rows = 1024;
        run(16, 5_000, cfg).await;
    }

    #[tokio::test]
    async fn kk13_bootstrapped_from_1_of_2_extension_and_checks_arguments() {
        // The 1-out-of-2 *receiver* becomes the KK13 *sender*.
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"kk13-boot");
        let t = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(3);
            let mut s = OtExtSender::setup(
                &mut a,
                &sid,
                Security::Malicious,
                ExtConfig::default(),
                &mut rng,
            )
            .await
            .unwrap();
            let ots = s.extend(&mut a, 256).await.unwrap();
            let mut kr = Kk13Receiver::from_base_ots(
                &ots.to_base_sender(0..256),
                &sid,
                4,
                ExtConfig::default(),
            )
            .unwrap();
            let choices = vec![3, 0, 1, 2, 2];
            let out = kr.extend(&mut a, &choices).await.unwrap();
            assert!(kr.extend(&mut a, &[4]).await.is_err());
            (out, choices)
        });
        let mut rng = StdRng::seed_from_u64(4);
        let mut r = OtExtReceiver::setup(
            &mut b,
            &sid,
            Security::Malicious,
            ExtConfig::default(),
            &mut rng,
        )
        .await
        .unwrap();
        let ots = r
            .extend(&mut b, &ChoiceBits::random(256, &mut rng))
            .await
            .unwrap();
        let mut ks =
            Kk13Sender::from_base_ots(&ots.to_base_receiver(0..256), &sid, 4, ExtConfig::default())
                .unwrap();
        let s_out = ks.extend(&mut b, 5).await.unwrap();
        let (r_out, choices) = t.await.unwrap();
        assert_kk13(&s_out, &r_out, &choices);
        assert!(Kk13Sender::from_base_ots(
            &ots.to_base_receiver(0..128),
            &sid,
            4,
            ExtConfig::default()
        )
        .is_err());
        assert!(Kk13Sender::from_base_ots(
            &ots.to_base_receiver(0..256),
            &sid,
            257,
            ExtConfig::default()
        )
        .is_err());
    }

    #[tokio::test]
    async fn kk13_rejects_wrong_n_and_short_frames() {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"kk13-bad");
        let t = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(5);
            let mut s = Kk13Sender::setup(&mut a, &sid, 16, ExtConfig::default(), &mut rng)
                .await
                .unwrap();
            s.extend(&mut a, 10).await
        });
        let mut rng = StdRng::seed_from_u64(6);
        let mut r = Kk13Receiver::setup(&mut b, &sid, 8, ExtConfig::default(), &mut rng)
            .await
            .unwrap();
        let _ = r.extend(&mut b, &[1; 10]).await;
        assert!(matches!(t.await.unwrap(), Err(OtError::Mismatch(_))));

        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let t = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(5);
            let mut s = Kk13Sender::setup(&mut a, &sid, 16, ExtConfig::default(), &mut rng)
                .await
                .unwrap();
            s.extend(&mut a, 10).await
        });
        let _r = Kk13Receiver::setup(&mut b, &sid, 16, ExtConfig::default(), &mut rng)
            .await
            .unwrap();
        let h = ExtHeader {
            mode: Mode::Kk13,
            param: 16,
            first_row: 0,
            n: 10,
            frame_rows: 1024,
        };
        b.send(&h.to_frame()).await.unwrap();
        b.send(&Frame::new(
            PROTOCOL_ID,
            kind::EXT_MATRIX,
            vec![0; 128 * 16],
        ))
        .await
        .unwrap();
        assert!(matches!(t.await.unwrap(), Err(OtError::Malformed(_))));
    }
}
