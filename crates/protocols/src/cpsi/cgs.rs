//! The CGS equality share generation on KK13 1-out-of-16 OTs: the paper's
//! KK-CGS (Han-Moon-Son §3.2, Table 2, Appendix A.1), the equality of
//! Chandran, Gupta and Shah's circuit PSI (PETS 2022), itself CrypTFlow2's
//! equality test (Rathee et al., CCS 2020).
//!
//! Both parties hold one `ℓ`-bit value per bin (EPC's `ℓ_c`-bit outputs,
//! or the tags when EPC is off); they end with XOR shares of "the two
//! values of this bin are equal":
//!
//! 1. **Leaves.** Each value is cut into `⌈ℓ/4⌉` blocks of `d = 4` bits
//!    (the last one shorter when `4 ∤ ℓ`). Per block, one
//!    `(2^r, 1)`-OT_1 (`r` the block's width, so 16 messages for a full
//!    block, `2^(ℓ mod 4)` for a short last one, which the KK13 sender
//!    simply never hashes nor sends): the OT sender draws a share bit `s`
//!    and offers message `j = s ⊕ [its block = j]`; the chooser chooses
//!    with its block and gets `s ⊕ [blocks equal]`.
//! 2. **AND tree.** The `⌈ℓ/4⌉ - 1` ANDs per bin of [`gmw::and_tree`],
//!    on Beaver triples from `(16, 1)`-OT_2: two bit triples per OT. The
//!    chooser's choice is its four shares `a₁, b₁, a₁', b₁'`; the sender
//!    draws `a₀, b₀, c₀, a₀', b₀', c₀'` and offers, for `j = (u, v, u',
//!    v')`, the two bits `c₀ ⊕ (a₀ ⊕ u)(b₀ ⊕ v)` and
//!    `c₀' ⊕ (a₀' ⊕ u')(b₀' ⊕ v')`, so the chooser's
//!    `c₁ = c₀ ⊕ (a₀ ⊕ a₁)(b₀ ⊕ b₁)` completes `c = a ∧ b`.
//!
//! The OTs are KK13's random 1-out-of-16 OTs (Walsh-Hadamard code of
//! length 256, [`psikit_ot::kk13`]) turned into chosen-message ones: the
//! sender sends each message XOR the low bits of its random message
//! (`2^r` bits per leaf OT, 32 per triple OT). KK13's 256 base OTs are
//! forward IKNP random OTs ([`Rots::forward_base`]), in which the KK13
//! sender (circuit PSI's receiver) was the receiver: no public-key work.
//! The sender (the leader) chooses.
//!
//! # Cost per bin (`ℓ` compared bits, `ℓ/4` blocks)
//! `ℓ/4` leaf OTs and `(ℓ/4 - 1)/2` triple OTs, each 256 bits of KK13
//! matrix (the chooser's) plus 16 or 32 bits of masked messages (the
//! sender's), and 4 bits of openings per AND: about
//! `68ℓ + 36ℓ + ℓ ≈ 105ℓ` bits, the paper's `0.75(λ + 12)ℓ` of Table 2
//! at `λ = 128` (against IKNP-GMW's `2λℓ = 256ℓ` and Silent-GMW's `4ℓ`).
//! Compute: the KK13 sender's 16 SHA-256 compressions per OT dominate
//! (the chooser hashes once per OT); a short last block of `r` bits
//! hashes and sends only `2^r` messages. Rounds: one per chunk of
//! 2^18 OTs, then `⌈log2(ℓ/4)⌉` AND layers.
//!
//! # Security
//! Semi-honest, like the rest of circuit PSI: KK13 as implemented is
//! semi-honest (128-bit: the code's distance is 128 and the hash is
//! SHA-256 as a random oracle), and the shares and openings are uniformly
//! random to each party.
//!
//! # Why hand-written
//! No Rust crate offers CrypTFlow2's equality or KK13 triples; the parts
//! are a few dozen lines over our KK13 extension and our GMW layer, and
//! share their packed bits, their chunked wire format and their bounds.

use psikit_ot::kk13::CODE_BITS;
use psikit_ot::{ExtConfig, Kk13Receiver, Kk13Sender, SessionId};
use psikit_transport::Channel;
use rand::{Rng, RngCore};
use rayon::prelude::*;

use super::bits::Bits;
use super::gmw::{self, Triples};
use super::messages::{recv_exact, send, KIND_CHOSEN};
use super::rng::rng;
use super::rot::{Base, Rots};
use crate::error::{Error, Violation};

/// Bits per block, the paper's `d`.
pub const BLOCK: u32 = 4;

/// Messages of a full block's OT, `2^d`.
const N: usize = 1 << BLOCK;

/// Most KK13 OTs extended at once: 2^18 rows of 32 bytes, 8 MB.
const CHUNK: usize = 1 << 18;

/// OTs whose messages one thread hashes at once (64 KB of hash blocks).
const BATCH: usize = 64;

/// Blocks of an `ell`-bit value.
pub fn blocks(ell: u32) -> usize {
    ell.div_ceil(BLOCK) as usize
}

/// AND triples [`Cgs::equal`] uses for `bins` values of `ell` bits.
pub fn triples_needed(bins: usize, ell: u32) -> usize {
    gmw::tree_cost(bins, blocks(ell))
}

/// This party's KK13 extension.
enum Ot {
    /// The OT sender (circuit PSI's receiver).
    Sender(Kk13Sender),
    /// The chooser (the leader, circuit PSI's sender).
    Chooser(Kk13Receiver),
}

/// One party's CGS equality: its KK13 extension.
pub struct Cgs {
    ot: Ot,
}

impl Cgs {
    /// KK13 1-out-of-16 OTs on 256 of `rots`' forward IKNP OTs.
    pub async fn setup(
        ch: &mut Channel,
        rots: &mut Rots,
        sid: &SessionId,
        ext: &ExtConfig,
    ) -> Result<Self, Error> {
        let sid = sid.derive("cpsi-kk13");
        let ot = match rots.forward_base(ch, CODE_BITS).await? {
            Base::Sent(base) => {
                Ot::Chooser(Kk13Receiver::from_base_ots(&base, &sid, N, ext.clone())?)
            }
            Base::Received(base) => {
                Ot::Sender(Kk13Sender::from_base_ots(&base, &sid, N, ext.clone())?)
            }
        };
        Ok(Self { ot })
    }

    /// `count` AND triples (rounded up to whole words) from `count / 2`
    /// `(16, 1)`-OT_2.
    pub async fn triples(&mut self, ch: &mut Channel, count: usize) -> Result<Triples, Error> {
        let [a, b, c] = self.triple_shares(ch, count).await?;
        Ok(Triples::from_shares(a, b, c))
    }

    /// This party's shares `a`, `b`, `c` of the triples of [`Self::triples`].
    async fn triple_shares(&mut self, ch: &mut Channel, count: usize) -> Result<[Bits; 3], Error> {
        let count = count.next_multiple_of(64);
        let mut rng = rng()?;
        // Per OT, this party's two triples as bits a, b, c, a', b', c'.
        let mut mine: Vec<u8> = Vec::with_capacity(count / 2);
        for n in chunks(count / 2) {
            match &mut self.ot {
                Ot::Sender(s) => {
                    let mut r = vec![0u8; n];
                    rng.fill_bytes(&mut r);
                    let offer = |i: usize, j: usize| {
                        let r = u32::from(r[i]);
                        let bit = |k: u32| r >> k & 1;
                        let j = j as u32;
                        let j = |k: u32| j >> k & 1;
                        let first = bit(2) ^ ((bit(0) ^ j(0)) & (bit(1) ^ j(1)));
                        let second = bit(5) ^ ((bit(3) ^ j(2)) & (bit(4) ^ j(3)));
                        first | second << 1
                    };
                    offer_chunk(s, ch, n, N, 2, offer).await?;
                    mine.extend(r.iter().map(|r| r & 0x3f));
                }
                Ot::Chooser(r) => {
                    let choices: Vec<u8> = (0..n).map(|_| rng.gen_range(0..N as u8)).collect();
                    let chosen = choose_chunk(r, ch, &choices, N, 2).await?;
                    mine.extend(choices.iter().zip(&chosen).map(|(&w, &c)| {
                        let c = c as u8;
                        (w & 3) | (c & 1) << 2 | (w >> 2 & 3) << 3 | (c >> 1 & 1) << 5
                    }));
                }
            }
        }
        let bits = |k: u32| {
            Bits::from_bools(
                mine.iter()
                    .flat_map(|t| [t >> k & 1 == 1, t >> (k + 3) & 1 == 1]),
            )
        };
        Ok([bits(0), bits(1), bits(2)])
    }

    /// Shares of `[x_i = y_i]` for every bin, where this party holds the
    /// `ell`-bit `values` (the leader's `x`, the other's `y`), on
    /// `triples` from [`Self::triples`] (at least
    /// [`triples_needed`]`(values.len(), ell)`).
    pub async fn equal(
        &mut self,
        ch: &mut Channel,
        triples: &mut Triples,
        values: &[u128],
        ell: u32,
    ) -> Result<Bits, Error> {
        let bins = values.len();
        let width = bins.next_multiple_of(64);
        let mut rng = rng()?;
        let mut planes = Vec::with_capacity(blocks(ell));
        for k in 0..blocks(ell) as u32 {
            let shift = BLOCK * k;
            let messages = 1usize << (ell - shift).min(BLOCK);
            let block = |v: u128| (v >> shift) as usize & (messages - 1);
            let mut plane = Vec::with_capacity(width);
            let mut at = 0;
            for n in chunks(bins) {
                let part = &values[at..at + n];
                at += n;
                match &mut self.ot {
                    Ot::Sender(s) => {
                        let share: Vec<bool> = (0..n).map(|_| rng.gen()).collect();
                        let offer =
                            |i: usize, j: usize| u32::from(share[i] ^ (block(part[i]) == j));
                        offer_chunk(s, ch, n, messages, 1, offer).await?;
                        plane.extend(share);
                    }
                    Ot::Chooser(r) => {
                        let choices: Vec<u8> = part.iter().map(|&v| block(v) as u8).collect();
                        let chosen = choose_chunk(r, ch, &choices, messages, 1).await?;
                        plane.extend(chosen.iter().map(|&c| c == 1));
                    }
                }
            }
            plane.resize(width, false);
            planes.push(Bits::from_bools(plane));
        }
        let leader = matches!(self.ot, Ot::Chooser(_));
        gmw::and_tree(ch, triples, planes, bins, leader).await
    }
}

/// Chunk sizes of `total` OTs, at most [`CHUNK`] each.
fn chunks(total: usize) -> impl Iterator<Item = usize> {
    (0..total.div_ceil(CHUNK)).map(move |k| (total - k * CHUNK).min(CHUNK))
}

/// The OT sender's side of `n` chosen-message OTs, `messages` messages of
/// `out` bits each (`messages · out` divides 64): message `j` of OT `i` is
/// `offer(i, j)`, sent XOR the low bits of KK13's random message.
async fn offer_chunk(
    s: &mut Kk13Sender,
    ch: &mut Channel,
    n: usize,
    messages: usize,
    out: u32,
    offer: impl Fn(usize, usize) -> u32 + Sync,
) -> Result<(), Error> {
    let ots = s.extend(ch, n).await?;
    let mask = (1u32 << out) - 1;
    let mut rows = vec![0u64; n];
    rows.par_chunks_mut(BATCH)
        .enumerate()
        .for_each(|(b, rows)| {
            let first = b * BATCH;
            let mut hashes = vec![0u128; rows.len() * messages];
            ots.messages_into(first, messages, &mut hashes);
            for (k, (row, hashes)) in rows.iter_mut().zip(hashes.chunks(messages)).enumerate() {
                *row = hashes.iter().enumerate().fold(0u64, |row, (j, h)| {
                    let m = (offer(first + k, j) ^ *h as u32) & mask;
                    row | u64::from(m) << (j as u32 * out)
                });
            }
        });
    let masked = pack(&rows, messages * out as usize);
    send(ch, KIND_CHOSEN, &masked.to_bytes()).await
}

/// The chooser's side of [`offer_chunk`]: one OT per choice (each below
/// `messages`), the chosen message of each.
async fn choose_chunk(
    r: &mut Kk13Receiver,
    ch: &mut Channel,
    choices: &[u8],
    messages: usize,
    out: u32,
) -> Result<Vec<u32>, Error> {
    let ots = r.extend(ch, choices).await?;
    let n = choices.len();
    let width = messages * out as usize;
    let bytes = recv_exact(ch, KIND_CHOSEN, (n * width).div_ceil(8)).await?;
    let masked =
        Bits::from_bytes(&bytes, n * width).ok_or(Violation::Invalid("CGS masked messages"))?;
    let mask = (1u32 << out) - 1;
    Ok((0..n)
        .into_par_iter()
        .map(|i| {
            let row = unpack(&masked, i, width);
            ((row >> (u32::from(choices[i]) * out)) as u32 ^ ots.message(i) as u32) & mask
        })
        .collect())
}

/// `rows` of `width` bits each (`width` divides 64), packed in order.
pub(super) fn pack(rows: &[u64], width: usize) -> Bits {
    let mut words = vec![0u64; (rows.len() * width).div_ceil(64)];
    for (i, row) in rows.iter().enumerate() {
        words[i * width / 64] |= row << (i * width % 64);
    }
    Bits::from_words(words, rows.len() * width)
}

/// Row `i` of [`pack`]'s layout.
fn unpack(bits: &Bits, i: usize, width: usize) -> u64 {
    let word = bits.words()[i * width / 64] >> (i * width % 64);
    match width {
        64 => word,
        _ => word & ((1u64 << width) - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psikit_transport::Limits;

    /// The two parties' `Cgs`, on KK13's own base OTs.
    async fn pair() -> (Cgs, Cgs, Channel, Channel) {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"cgs test");
        let ext = ExtConfig::default();
        let e2 = ext.clone();
        let chooser = tokio::spawn(async move {
            let r = Kk13Receiver::setup(&mut a, &sid, N, e2, &mut rand::rngs::OsRng).await;
            (r.expect("KK13 receiver"), a)
        });
        let s = Kk13Sender::setup(&mut b, &sid, N, ext, &mut rand::rngs::OsRng)
            .await
            .expect("KK13 sender");
        let (r, a) = chooser.await.expect("task");
        (Cgs { ot: Ot::Chooser(r) }, Cgs { ot: Ot::Sender(s) }, a, b)
    }

    /// Both parties' equality shares of `x` (the chooser's) and `y`.
    async fn equal(x: Vec<u128>, y: Vec<u128>, ell: u32) -> Bits {
        let (mut c, mut s, mut a, mut b) = pair().await;
        let needed = triples_needed(x.len(), ell);
        let task = tokio::spawn(async move {
            let mut t = c.triples(&mut a, needed).await.expect("triples");
            c.equal(&mut a, &mut t, &x, ell).await.expect("equal")
        });
        let mut t = s.triples(&mut b, needed).await.expect("triples");
        let mut mine = s.equal(&mut b, &mut t, &y, ell).await.expect("equal");
        mine.xor_assign(&task.await.expect("task"));
        mine
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn block_equality_on_every_pair_of_4_bit_values() {
        let pairs: Vec<(u128, u128)> = (0..16).flat_map(|x| (0..16).map(move |y| (x, y))).collect();
        let (x, y): (Vec<u128>, Vec<u128>) = pairs.iter().copied().unzip();
        // 4 bits: one leaf, no AND; 6 and 7: a short last block.
        for ell in [4, 6, 7] {
            let got = equal(x.clone(), y.clone(), ell).await;
            for (i, (x, y)) in pairs.iter().enumerate() {
                assert_eq!(got.get(i), x == y, "ell {ell}: {x} vs {y}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn equality_of_long_values_through_the_and_tree() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for ell in [16u32, 22, 61] {
            let mask = (1u128 << ell) - 1;
            let x: Vec<u128> = (0..700).map(|_| rng.gen::<u128>() & mask).collect();
            // Equal, one bit off (in every position), or random.
            let y: Vec<u128> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| match i % 3 {
                    0 => v,
                    1 => v ^ 1 << (i as u32 % ell),
                    _ => rng.gen::<u128>() & mask,
                })
                .collect();
            let got = equal(x.clone(), y.clone(), ell).await;
            assert_eq!(got.len(), x.len());
            for i in 0..x.len() {
                assert_eq!(got.get(i), x[i] == y[i], "ell {ell}, bin {i}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_triple_from_16_choose_1_ot2_multiplies() {
        let (mut c, mut s, mut a, mut b) = pair().await;
        // Over a chunk boundary, and not a whole number of chunks.
        let count = 2 * CHUNK + 320;
        let task = tokio::spawn(async move { c.triple_shares(&mut a, count).await });
        let [a1, b1, c1] = s.triple_shares(&mut b, count).await.expect("sender");
        let [a0, b0, c0] = task.await.expect("task").expect("chooser");
        assert_eq!(a0.len(), count);
        let (mut ones_a, mut ones_b) = (0, 0);
        for i in 0..count {
            let (x, y) = (a0.get(i) ^ a1.get(i), b0.get(i) ^ b1.get(i));
            assert_eq!(c0.get(i) ^ c1.get(i), x & y, "triple {i}");
            ones_a += usize::from(x);
            ones_b += usize::from(y);
        }
        // The multiplied bits are random, not constant.
        assert!(ones_a > count / 3 && ones_b > count / 3);
    }

    #[test]
    fn packing_round_trips_every_width() {
        for width in [2usize, 4, 8, 16, 32, 64] {
            let rows: Vec<u64> = (0..77u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - width))
                .collect();
            let bits = pack(&rows, width);
            for (i, row) in rows.iter().enumerate() {
                assert_eq!(unpack(&bits, i, width), *row, "width {width} row {i}");
            }
        }
    }
}
