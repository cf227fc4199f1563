//! The CGS equality's leaves: shares of "these 4-bit blocks are equal"
//! from a random 1-out-of-16 OT per block, then [`gmw::and_tree`] joins
//! the `⌈ℓ/4⌉` leaves.
//!
//! The 1-out-of-16 OT comes from silent OT's small VOLE of 4 bits (one
//! correlation per leaf: the OT sender's messages `H(b + j·Δ)`, the
//! chooser's `H(a)` of index `c`), or, on IKNP, from four random OTs,
//! one per bit of the block (Naor and Pinkas's 1-out-of-N from
//! 1-out-of-2: message `e` is `⊕_t bit_e(K_t(e_t))` over the block's OTs
//! `t`, of which the chooser holds `K_t(c_t)`; for `e ≠ c` some `t` has
//! `e_t ≠ c_t` and bit `e` of a key it lacks, distinct `e` using distinct
//! bits). Either way only bit 0 (or bit `e`) of each message is kept: a
//! 16-bit word `P` of pads per leaf at the OT sender, the index `c` and
//! the pad `P[c]` at the chooser.
//!
//! Against GMW bit by bit (two random OTs or one small VOLE per AND
//! gate, `ℓ - 1` gates), the small VOLEs cost one correlation per leaf
//! plus the tree's `⌈ℓ/4⌉ - 1` gates: at `ℓ = 61`, 31 correlations per
//! bin instead of 60, for about 80 more bits of traffic per bin (the
//! 16-bit masked messages and the 4-bit flips). The paper's Table 2
//! pairs CGS only with KK13.
//!
//! Per bin and block (the leader holding `x`, the chooser `y`):
//! * the chooser (circuit PSI's receiver) sends the flip `d = c ⊕ y`;
//! * the OT sender (the leader) draws a share bit `s` and sends, for each
//!   `j < 2^r` (`r ≤ 4` the block's bits), `s ⊕ [x = j] ⊕ P[d ⊕ j]`;
//! * the chooser removes `P[c]` from message `y` (`d ⊕ y = c`) and keeps
//!   `s ⊕ [x = y]`.
//!
//! The other messages carry pads of indices the chooser lacks; the flips
//! are uniformly random to the sender. Semi-honest, like the rest.

use psikit_transport::Channel;
use rand::Rng;
use rayon::prelude::*;

use super::bits::Bits;
use super::cgs::{blocks, pack, BLOCK};
use super::gmw::{self, SmallTriples, Triples, TRIPLE_BITS};
use super::messages::{recv_exact, send, KIND_CHOSEN, KIND_FLIPS};
use super::rng::rng;
use super::rot::{recv_flips, Either, Rots, SmallPads};
use crate::error::{Error, Violation};

/// Bits of the small VOLE behind each leaf's 1-out-of-16 OT.
const LEAF_BITS: u32 = BLOCK;

/// Forward correlations the leaves of `bins` values of `ell` bits use:
/// one small VOLE per block on silent OT, one random OT per bit on IKNP.
/// (The tree's triples are CGS's: [`super::cgs::triples_needed`].)
pub fn leaf_ots(bins: usize, ell: u32, small_voles: bool) -> usize {
    match small_voles {
        true => bins * blocks(ell),
        false => bins * ell as usize,
    }
}

/// The equality's correlations: `triples` AND triples (rounded up to whole
/// words) and the leaves' 1-out-of-16 OTs for `bins` values of `ell` bits,
/// on silent OT made in one pipeline of small VOLEs.
pub async fn prepare(
    ch: &mut Channel,
    rots: &mut Rots,
    bins: usize,
    ell: u32,
    triples: usize,
) -> Result<(Triples, Keys), Error> {
    let leader = rots.leader();
    if !rots.has_small_voles() {
        let triples = Triples::generate(rots, ch, triples).await?;
        let keys = collect_from_rots(ch, rots, bins, ell, leader).await?;
        return Ok((triples, keys));
    }
    let count = triples.next_multiple_of(64);
    let mut made = SmallTriples::new(count);
    let (mut sent, mut index, mut pads) = (Vec::new(), Vec::new(), Bits::default());
    let jobs = [(count, TRIPLE_BITS), (leaf_ots(bins, ell, true), LEAF_BITS)];
    rots.forward_small_chunks(ch, &jobs, |job, ots| match (job, ots.pads()) {
        (0, p) => made.add(p),
        (_, SmallPads::Sent(words)) => sent.extend(words),
        (_, SmallPads::Received { c, pads: p }) => {
            index.extend(c);
            pads.extend(&p);
        }
    })
    .await?;
    let keys = match leader {
        true => Keys::Sender(sent),
        false => Keys::Chooser { index, pads },
    };
    Ok((made.finish(ch, leader).await?, keys))
}

/// Shares of `[x_i = y_i]` for every bin, where this party holds the
/// `ell`-bit `values` (the leader's `x`, the other's `y`): the leaves on
/// the OTs of `keys`, then the AND tree on `triples` (both from
/// [`prepare`], with at least [`super::cgs::triples_needed`]`(values.len(),
/// ell)` triples).
pub async fn equal(
    ch: &mut Channel,
    keys: Keys,
    triples: &mut Triples,
    values: &[u128],
    ell: u32,
    leader: bool,
) -> Result<Bits, Error> {
    let bins = values.len();
    let planes = match keys {
        Keys::Sender(pads) => {
            let flips = recv_flips(ch, pads.len() * BLOCK as usize).await?;
            offer(ch, &pads, &flips, values, ell).await?
        }
        Keys::Chooser { index, pads } => choose(ch, &index, &pads, values, ell).await?,
    };
    gmw::and_tree(ch, triples, planes, bins, leader).await
}

/// What the leaves keep of each 1-out-of-16 OT, leaf `i·blocks + k` for
/// bin `i` and block `k`.
pub enum Keys {
    /// Bit `e` of each word: bit 0 of message `e`.
    Sender(Vec<u16>),
    /// Each leaf's index `c` and bit 0 of its message.
    Chooser { index: Vec<u8>, pads: Bits },
}

/// The leaves' OTs from four random OTs per block, bit `t` of the block
/// on OT `i·ell + 4k + t` (16 bits kept of each message).
async fn collect_from_rots(
    ch: &mut Channel,
    rots: &mut Rots,
    bins: usize,
    ell: u32,
    leader: bool,
) -> Result<Keys, Error> {
    let (mut sent, mut choices, mut chosen) = (Vec::new(), Bits::default(), Vec::new());
    let low16 = |m: &u128| u64::from(*m as u16);
    rots.forward_chunks(ch, leaf_ots(bins, ell, false), |ots| match ots.whole() {
        Either::Sent(s) => sent.extend(s.m0.iter().zip(&s.m1).map(|(a, b)| (low16(a), low16(b)))),
        Either::Received(r) => {
            choices.extend(&r.choices);
            chosen.extend(r.chosen.iter().map(|m| *m as u16));
        }
    })
    .await?;
    let leaves = (0..bins).flat_map(|i| (0..blocks(ell) as u32).map(move |k| (i, k)));
    let ots = |i: usize, k: u32| {
        let first = i * ell as usize + (k * BLOCK) as usize;
        first..first + (ell - k * BLOCK).min(BLOCK) as usize
    };
    Ok(match leader {
        // P[e] = ⊕_t bit_e(K_t(e_t)): the messages e with e_t = 1 take
        // K_t(1), selected by SELECT[t].
        true => Keys::Sender(
            leaves
                .map(|(i, k)| {
                    ots(i, k).enumerate().fold(0u64, |p, (t, ot)| {
                        let (k0, k1) = sent[ot];
                        p ^ (k0 & !SELECT[t]) ^ (k1 & SELECT[t])
                    }) as u16
                })
                .collect(),
        ),
        false => {
            let (index, pads): (Vec<u8>, Vec<bool>) = leaves
                .map(|(i, k)| {
                    let c = ots(i, k)
                        .enumerate()
                        .fold(0u8, |c, (t, ot)| c | u8::from(choices.get(ot)) << t);
                    let pad = ots(i, k).fold(0, |p, ot| p ^ chosen[ot] >> c & 1);
                    (c, pad == 1)
                })
                .unzip();
            Keys::Chooser {
                index,
                pads: Bits::from_bools(pads),
            }
        }
    })
}

/// `SELECT[t]` has bit `j` set for the messages `j` whose bit `t` is 1.
const SELECT: [u64; 4] = [0xaaaa, 0xcccc, 0xf0f0, 0xff00];

/// `P` with its indices XORed by `d`: bit `j` of the result is bit
/// `d ⊕ j` of `P` (a swap of halves per bit of `d`, branch-free).
fn xor_permute(p: u16, d: u8) -> u64 {
    (0..BLOCK as usize).fold(u64::from(p), |w, t| {
        let (low, shift) = (!SELECT[t] & 0xffff, 1 << t);
        let swapped = (w & low) << shift | (w >> shift) & low;
        let take = 0u64.wrapping_sub(u64::from(d >> t & 1));
        swapped & take | w & !take
    })
}

/// Bits `[start, start + r)` of a value, the block.
fn block(v: u128, start: u32, r: u32) -> usize {
    (v >> start) as usize & ((1 << r) - 1)
}

/// Leaves whose 4-bit flips share a word of the flips' bits.
const FLIPS_PER_WORD: usize = 64 / BLOCK as usize;

/// The flip of leaf `leaf` (bits `4·leaf ..`).
fn flip(flips: &Bits, leaf: usize) -> u8 {
    let word = flips.words()[leaf / FLIPS_PER_WORD];
    (word >> (BLOCK as usize * (leaf % FLIPS_PER_WORD)) & 0xf) as u8
}

/// The leader's side: per block, its share bits and the masked messages.
async fn offer(
    ch: &mut Channel,
    pads: &[u16],
    flips: &Bits,
    values: &[u128],
    ell: u32,
) -> Result<Vec<Bits>, Error> {
    let (bins, per) = (values.len(), blocks(ell));
    let mut rng = rng()?;
    let mut planes = Vec::with_capacity(per);
    for k in 0..per as u32 {
        let (start, r) = (k * BLOCK, (ell - k * BLOCK).min(BLOCK));
        let share: Vec<bool> = (0..bins).map(|_| rng.gen()).collect();
        let all = (1u64 << (1 << r)) - 1;
        let rows: Vec<u64> = (0..bins)
            .into_par_iter()
            .map(|i| {
                let leaf = i * per + k as usize;
                let masks = xor_permute(pads[leaf], flip(flips, leaf));
                let eq = 1u64 << block(values[i], start, r);
                let shares = if share[i] { all } else { 0 };
                (shares ^ eq ^ masks) & all
            })
            .collect();
        send(ch, KIND_CHOSEN, &pack(&rows, 1 << r).to_bytes()).await?;
        planes.push(plane(share));
    }
    Ok(planes)
}

/// The chooser's side: it sends the flips that turn its OTs' indices into
/// its blocks, then unmasks the message of its block.
async fn choose(
    ch: &mut Channel,
    index: &[u8],
    pads: &Bits,
    values: &[u128],
    ell: u32,
) -> Result<Vec<Bits>, Error> {
    let (bins, per) = (values.len(), blocks(ell));
    let flip = |leaf: usize| {
        let (i, k) = ((leaf / per), (leaf % per) as u32);
        let r = (ell - k * BLOCK).min(BLOCK);
        u64::from(index[leaf] ^ block(values[i], k * BLOCK, r) as u8)
    };
    let words = (0..bins * per)
        .step_by(FLIPS_PER_WORD)
        .map(|first| {
            (first..(first + FLIPS_PER_WORD).min(bins * per)).fold(0, |w, leaf| {
                w | flip(leaf) << (BLOCK as usize * (leaf - first))
            })
        })
        .collect();
    let flips = Bits::from_words(words, BLOCK as usize * bins * per);
    send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
    let mut planes = Vec::with_capacity(per);
    for k in 0..per as u32 {
        let (start, r) = (k * BLOCK, (ell - k * BLOCK).min(BLOCK));
        let width = 1usize << r;
        let bytes = recv_exact(ch, KIND_CHOSEN, (bins * width).div_ceil(8)).await?;
        let masked = Bits::from_bytes(&bytes, bins * width)
            .ok_or(Violation::Invalid("CGS leaf messages"))?;
        let share: Vec<bool> = (0..bins)
            .into_par_iter()
            .map(|i| {
                let b = block(values[i], start, r);
                masked.get(i * width + b) ^ pads.get(i * per + k as usize)
            })
            .collect();
        planes.push(plane(share));
    }
    Ok(planes)
}

/// One leaf plane, padded to whole words as the AND tree expects.
fn plane(mut share: Vec<bool>) -> Bits {
    share.resize(share.len().next_multiple_of(64), false);
    Bits::from_bools(share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpsi::rot::test_rots;
    use psikit_transport::Limits;

    /// One party's equality shares of its `values` on fresh silent OTs
    /// (small VOLEs) or IKNP (four random OTs per leaf).
    async fn party(
        mut ch: Channel,
        leader: bool,
        values: Vec<u128>,
        ell: u32,
        silent: bool,
    ) -> Bits {
        let mut rots = test_rots(&mut ch, b"leaves test", leader, silent).await;
        assert_eq!(rots.has_small_voles(), silent);
        let needed = super::super::cgs::triples_needed(values.len(), ell);
        let (mut triples, keys) = prepare(&mut ch, &mut rots, values.len(), ell, needed)
            .await
            .expect("correlations");
        equal(&mut ch, keys, &mut triples, &values, ell, leader)
            .await
            .expect("equal")
    }

    /// Every pair of 4-bit values, and values one bit apart, for lengths
    /// with a full, a short and no short last block: equal exactly when
    /// the values are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shares_of_equality_are_exact() {
        for (ell, silent) in [(4u32, true), (6, true), (7, false), (17, true), (17, false)] {
            let mask = (1u128 << ell) - 1;
            let mut pairs: Vec<(u128, u128)> =
                (0..16).flat_map(|x| (0..16).map(move |y| (x, y))).collect();
            for i in 0..ell {
                let x = 0x2d5a_b3c1_u128.wrapping_mul(u128::from(i) + 3) & mask;
                pairs.extend([(x, x), (x, x ^ 1 << i), (x ^ mask, x)]);
            }
            let (x, y): (Vec<u128>, Vec<u128>) =
                pairs.iter().map(|&(x, y)| (x & mask, y & mask)).unzip();
            let (a, b) = Channel::memory_pair(Limits::default());
            let task = tokio::spawn(party(a, true, x.clone(), ell, silent));
            let mut shares = party(b, false, y.clone(), ell, silent).await;
            shares.xor_assign(&task.await.expect("task"));
            for i in 0..x.len() {
                assert_eq!(
                    shares.get(i),
                    x[i] == y[i],
                    "ell {ell}: {} vs {}",
                    x[i],
                    y[i]
                );
            }
        }
    }
}
