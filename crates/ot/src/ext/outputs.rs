//! The outputs of a 1-out-of-2 extension: correlated rows, and random-OT
//! messages hashed on demand, or all random-OT messages hashed during the
//! extension.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use rayon::prelude::*;
use zeroize::{Zeroize, Zeroizing};

use crate::aes_hash::{cr, cr_many, tccr, tccr_many};
use crate::base::{BaseReceiverOutput, BaseSenderOutput};
use crate::choice::ChoiceBits;
use crate::matrix::SUB_BATCH;

/// Which hash turns a correlated row into a random-OT message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowHash {
    Cr,
    Tccr,
}

impl RowHash {
    pub(crate) fn one(self, tweak: u64, x: u128) -> u128 {
        match self {
            RowHash::Cr => cr(x),
            RowHash::Tccr => tccr(u128::from(tweak), x),
        }
    }

    /// Hashes `xs` in place; block `k` has tweak `tweak(k)`.
    pub(crate) fn many(self, xs: &mut [u128], tweak: impl Fn(usize) -> u64) {
        match self {
            RowHash::Cr => cr_many(xs),
            RowHash::Tccr => tccr_many(xs, |k| u128::from(tweak(k))),
        }
    }
}

/// `xs[i] ← H(row0 + i, xs[i])`: hashes rows in place (a receiver's `t_i`
/// into its messages, a sender's `q_i` into `m_{i,0}`). Parallel over
/// sub-batches.
pub(super) fn hash_in_place(hash: RowHash, row0: u64, xs: &mut [u128]) {
    xs.par_chunks_mut(SUB_BATCH)
        .enumerate()
        .for_each(|(c, xs)| {
            let base = row0 + (c * SUB_BATCH) as u64;
            hash.many(xs, |k| base + k as u64);
        });
}

/// `out[i] ← H(row0 + i, q_i ⊕ Δ)`: the sender's bit-1 messages. Parallel
/// over sub-batches.
pub(super) fn hash_flipped(hash: RowHash, delta: u128, row0: u64, q: &[u128], out: &mut [u128]) {
    out.par_chunks_mut(SUB_BATCH)
        .zip(q.par_chunks(SUB_BATCH))
        .enumerate()
        .for_each(|(c, (o, q))| {
            for (o, q) in o.iter_mut().zip(q) {
                *o = q ^ delta;
            }
            let base = row0 + (c * SUB_BATCH) as u64;
            hash.many(o, |k| base + k as u64);
        });
}

/// `out[j] = rows[indices[j]] ⊕ d`, with the reads prefetched (the
/// indices are random and `rows` far larger than the caches). Panics if an
/// index is out of range.
fn gather(rows: &[u128], indices: &[u32], d: u128, out: &mut [u128]) {
    crate::gather::gather(rows, indices, |&i| i as usize, |j, r| out[j] = r ^ d);
}

/// The rows buffer an extension instance reuses across calls. Its outputs
/// ([`SenderOts`], [`ReceiverOts`]) hand their rows back when dropped, so the
/// next extension neither allocates and zero-fills 16 bytes per OT nor
/// page-faults them in, and the dropped output does not wipe them: the
/// instance overwrites every row before exposing any, and the buffer is
/// wiped when the instance (the recycler's only strong owner) is dropped,
/// as with the reused column buffer. An output that outlives its instance
/// wipes its own rows.
#[derive(Default)]
pub(crate) struct RowRecycler(Arc<Mutex<Zeroizing<Vec<u128>>>>);

impl RowRecycler {
    /// A buffer of `len` rows whose contents are stale (the caller must
    /// overwrite all of them); wiped on drop, including on error paths.
    pub(crate) fn take(&self, len: usize) -> Zeroizing<Vec<u128>> {
        let mut rows = match self.0.lock() {
            Ok(mut slot) => std::mem::take(&mut *slot),
            Err(_) => Zeroizing::new(Vec::new()),
        };
        if rows.capacity() < len {
            // Too small (or none yet): a fresh zeroed allocation, whose pages
            // the allocator maps lazily, instead of writing zeros here.
            let rows = Zeroizing::new(vec![0u128; len]);
            advise_huge_pages(&rows);
            return rows;
        }
        if rows.len() > len {
            rows[len..].zeroize();
        }
        rows.resize(len, 0);
        rows
    }

    /// Where an output returns its rows.
    pub(crate) fn handle(&self) -> RowReturn {
        RowReturn(Arc::downgrade(&self.0))
    }
}

/// Asks Linux to back `buf` with transparent huge pages, which are often
/// enabled for `madvise`d memory only. Outputs are read through random
/// indices (RR16's permutation), and with 4 KiB pages a 16 MiB rows buffer
/// spans 4096 pages, more than the TLB holds, so nearly every such read
/// also walks the page tables (measured: about 1 CPU-second less per party
/// at RR16 2^20). Call it before the pages are first touched. Only a hint:
/// failures are ignored, and elsewhere it does nothing.
fn advise_huge_pages(buf: &[u128]) {
    #[cfg(target_os = "linux")]
    {
        use core::ffi::{c_int, c_void};
        extern "C" {
            fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
        }
        const MADV_HUGEPAGE: c_int = 14;
        const PAGE: usize = 4096;
        let start = buf.as_ptr() as usize;
        let (first, end) = (
            start.next_multiple_of(PAGE),
            start + std::mem::size_of_val(buf),
        );
        if end > first {
            // SAFETY: the range lies within `buf`'s live allocation, and
            // MADV_HUGEPAGE changes neither contents nor mapping, only how
            // pages are backed; the return value (e.g. EINVAL without THP)
            // is deliberately ignored.
            unsafe { madvise(first as *mut c_void, end - first, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// An output's way back to its instance's [`RowRecycler`].
pub(crate) struct RowReturn(Weak<Mutex<Zeroizing<Vec<u128>>>>);

impl RowReturn {
    /// Hands `rows` back if the instance is alive and holds no larger
    /// buffer; wipes whatever is left in `rows` either way.
    fn give_back(&self, rows: &mut Vec<u128>) {
        if let Some(slot) = self.0.upgrade() {
            if let Ok(mut slot) = slot.lock() {
                if slot.capacity() < rows.capacity() {
                    std::mem::swap(&mut **slot, rows);
                }
            }
        }
        rows.zeroize();
    }
}

/// The sender's side of extended OTs: correlated rows `q_i` and `Δ`.
///
/// As correlated OT: messages `q_i` and `q_i ⊕ Δ`. As random OT: messages
/// `H(q_i)` and `H(q_i ⊕ Δ)` (IKNP; KOS tweaks `H` by the OT's index:
/// `RowHash`), hashed when asked for.
pub struct SenderOts {
    rows: Vec<u128>,
    delta: u128,
    first_row: u64,
    pub(crate) hash: RowHash,
    hashed: OnceLock<Vec<[u128; 2]>>,
    recycle: RowReturn,
}

impl std::fmt::Debug for SenderOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SenderOts({} OTs from row {}, hidden)",
            self.rows.len(),
            self.first_row
        )
    }
}

impl Drop for SenderOts {
    fn drop(&mut self) {
        self.recycle.give_back(&mut self.rows);
        self.delta.zeroize();
        if let Some(mut h) = self.hashed.take() {
            bytemuck::cast_slice_mut::<[u128; 2], u128>(&mut h).zeroize();
        }
    }
}

impl SenderOts {
    pub(super) fn new(
        rows: Vec<u128>,
        delta: u128,
        first_row: u64,
        hash: RowHash,
        recycle: RowReturn,
    ) -> Self {
        Self {
            rows,
            delta,
            first_row,
            hash,
            hashed: OnceLock::new(),
            recycle,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The global correlation `Δ` (secret).
    pub fn delta(&self) -> u128 {
        self.delta
    }

    /// Correlated-OT messages for bit 0: `q_i` (bit-1 messages are `q_i ⊕ Δ`).
    pub fn q(&self) -> &[u128] {
        &self.rows
    }

    /// Correlated-OT pair `(q_i, q_i ⊕ Δ)`.
    pub fn correlated(&self, i: usize) -> [u128; 2] {
        [self.rows[i], self.rows[i] ^ self.delta]
    }

    /// The tweak (global row index) OT `i` is hashed with.
    pub fn tweak(&self, i: usize) -> u64 {
        self.first_row + i as u64
    }

    /// Random-OT message `m_{i,bit}`: hashed now, unless an earlier
    /// [`SenderOts::messages`] already hashed everything.
    pub fn message(&self, i: usize, bit: bool) -> u128 {
        if let Some(h) = self.hashed.get() {
            return h[i][usize::from(bit)];
        }
        let x = self.rows[i] ^ (self.delta & u128::from(bit).wrapping_neg());
        self.hash.one(self.tweak(i), x)
    }

    /// `out[j] = m_{indices[j], bit}`: the batched form of
    /// [`Self::message`] for OTs picked in any order (e.g. through a
    /// permutation). Hashes with pipelined AES, which is several times
    /// faster than one [`Self::message`] call per OT; runs on the calling
    /// thread, so callers parallelise over batches. Panics if an index is
    /// out of range or the lengths differ.
    pub fn messages_at(&self, indices: &[u32], bit: bool, out: &mut [u128]) {
        assert_eq!(indices.len(), out.len(), "one output per index");
        let d = self.delta & u128::from(bit).wrapping_neg();
        gather(&self.rows, indices, d, out);
        self.hash
            .many(out, |k| self.first_row + u64::from(indices[k]));
    }

    /// Both random-OT messages of every OT; hashed in parallel on first use
    /// and kept. (If only these are needed, [`super::OtExtSender::extend_random`]
    /// is cheaper.)
    pub fn messages(&self) -> &[[u128; 2]] {
        self.hashed.get_or_init(|| {
            let mut m0 = self.rows.clone();
            let mut m1 = vec![0u128; m0.len()];
            hash_flipped(self.hash, self.delta, self.first_row, &m0, &mut m1);
            hash_in_place(self.hash, self.first_row, &mut m0);
            let pairs = m0.iter().zip(&m1).map(|(a, b)| [*a, *b]).collect();
            m0.zeroize();
            m1.zeroize();
            pairs
        })
    }

    /// The random-OT messages `m_{i,bit}` of every OT for one `bit` (e.g.
    /// RR16's sender needs only the bit-1 messages), hashed in parallel.
    pub fn messages_for(&self, bit: bool) -> Vec<u128> {
        let d = self.delta & u128::from(bit).wrapping_neg();
        let mut out: Vec<u128> = self.rows.iter().map(|q| q ^ d).collect();
        hash_in_place(self.hash, self.first_row, &mut out);
        out
    }

    /// Random-OT messages of `range` as base-OT sender outputs, e.g. to seed
    /// another extension (KK13) without public-key operations.
    pub fn to_base_sender(&self, range: std::ops::Range<usize>) -> BaseSenderOutput {
        BaseSenderOutput::from_keys(
            range
                .map(|i| [self.message(i, false), self.message(i, true)])
                .collect(),
        )
    }
}

/// The receiver's side of extended OTs: rows `t_i = q_i ⊕ b_i·Δ` and the
/// choice bits `b_i`.
pub struct ReceiverOts {
    rows: Vec<u128>,
    choices: ChoiceBits,
    first_row: u64,
    pub(crate) hash: RowHash,
    hashed: OnceLock<Vec<u128>>,
    recycle: RowReturn,
}

impl std::fmt::Debug for ReceiverOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ReceiverOts({} OTs from row {}, hidden)",
            self.rows.len(),
            self.first_row
        )
    }
}

impl Drop for ReceiverOts {
    fn drop(&mut self) {
        self.recycle.give_back(&mut self.rows);
        if let Some(mut h) = self.hashed.take() {
            h.zeroize();
        }
    }
}

impl ReceiverOts {
    pub(super) fn new(
        rows: Vec<u128>,
        choices: ChoiceBits,
        first_row: u64,
        hash: RowHash,
        recycle: RowReturn,
    ) -> Self {
        Self {
            rows,
            choices,
            first_row,
            hash,
            hashed: OnceLock::new(),
            recycle,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn choices(&self) -> &ChoiceBits {
        &self.choices
    }

    pub fn choice(&self, i: usize) -> bool {
        self.choices.get(i)
    }

    /// Correlated-OT messages `t_i = q_i ⊕ b_i·Δ`.
    pub fn t(&self) -> &[u128] {
        &self.rows
    }

    /// The tweak (global row index) OT `i` is hashed with.
    pub fn tweak(&self, i: usize) -> u64 {
        self.first_row + i as u64
    }

    /// Random-OT message `m_{i,b_i}`: hashed now, unless an earlier
    /// [`ReceiverOts::messages`] already hashed everything.
    pub fn message(&self, i: usize) -> u128 {
        if let Some(h) = self.hashed.get() {
            return h[i];
        }
        self.hash.one(self.tweak(i), self.rows[i])
    }

    /// `out[j] = m_{indices[j], b}`: the batched form of [`Self::message`]
    /// (see [`SenderOts::messages_at`]).
    pub fn messages_at(&self, indices: &[u32], out: &mut [u128]) {
        assert_eq!(indices.len(), out.len(), "one output per index");
        gather(&self.rows, indices, 0, out);
        self.hash
            .many(out, |k| self.first_row + u64::from(indices[k]));
    }

    /// Every random-OT message; hashed in parallel on first use and kept.
    pub fn messages(&self) -> &[u128] {
        self.hashed.get_or_init(|| {
            let mut out = self.rows.clone();
            hash_in_place(self.hash, self.first_row, &mut out);
            out
        })
    }

    /// Random-OT messages of `range` as base-OT receiver outputs.
    pub fn to_base_receiver(&self, range: std::ops::Range<usize>) -> BaseReceiverOutput {
        let bits: Vec<bool> = range.clone().map(|i| self.choice(i)).collect();
        let keys = range.map(|i| self.message(i)).collect();
        BaseReceiverOutput::from_keys(ChoiceBits::from_bools(&bits), keys)
            .expect("one key per choice bit")
    }
}

/// All random-OT messages of the sender, hashed during the extension
/// ([`super::OtExtSender::extend_random`]); the correlated rows are not kept.
pub struct RandomSenderOts {
    m0: Vec<u128>,
    m1: Vec<u128>,
}

impl std::fmt::Debug for RandomSenderOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RandomSenderOts({} OTs, hidden)", self.m0.len())
    }
}

impl Drop for RandomSenderOts {
    fn drop(&mut self) {
        self.m0.zeroize();
        self.m1.zeroize();
    }
}

impl RandomSenderOts {
    pub(super) fn new(m0: Vec<u128>, m1: Vec<u128>) -> Self {
        debug_assert_eq!(m0.len(), m1.len());
        Self { m0, m1 }
    }

    pub fn len(&self) -> usize {
        self.m0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.m0.is_empty()
    }

    /// Message `m_{i,bit}`.
    pub fn message(&self, i: usize, bit: bool) -> u128 {
        if bit {
            self.m1[i]
        } else {
            self.m0[i]
        }
    }

    /// The messages `m_{i,bit}` of every OT for one `bit`.
    pub fn messages_for(&self, bit: bool) -> &[u128] {
        if bit {
            &self.m1
        } else {
            &self.m0
        }
    }
}

/// All random-OT messages of the receiver, hashed during the extension
/// ([`super::OtExtReceiver::extend_random`]), with its choice bits.
pub struct RandomReceiverOts {
    messages: Vec<u128>,
    choices: ChoiceBits,
}

impl std::fmt::Debug for RandomReceiverOts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RandomReceiverOts({} OTs, hidden)", self.messages.len())
    }
}

impl Drop for RandomReceiverOts {
    fn drop(&mut self) {
        self.messages.zeroize();
    }
}

impl RandomReceiverOts {
    pub(super) fn new(messages: Vec<u128>, choices: ChoiceBits) -> Self {
        Self { messages, choices }
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn choices(&self) -> &ChoiceBits {
        &self.choices
    }

    /// Message `m_{i,b_i}`.
    pub fn message(&self, i: usize) -> u128 {
        self.messages[i]
    }

    /// Every message `m_{i,b_i}`.
    pub fn messages(&self) -> &[u128] {
        &self.messages
    }
}
