//! The CGS equality on 1-out-of-16 OTs, as a tree of AND gates of fan-in
//! four: shares of "these 4-bit blocks are equal" per block (CGS's
//! leaves), then the AND of the leaves by the same OTs.
//!
//! The 1-out-of-16 OT comes from silent OT's small VOLE of 4 bits (one
//! correlation per OT: the OT sender's messages `H(b + j·Δ)`, the
//! chooser's `H(a)` of index `c`), or, on IKNP, from four random OTs,
//! one per bit of the block (Naor and Pinkas's 1-out-of-N from
//! 1-out-of-2: message `e` is `⊕_t bit_e(K_t(e_t))` over the block's OTs
//! `t`, of which the chooser holds `K_t(c_t)`; for `e ≠ c` some `t` has
//! `e_t ≠ c_t` and bit `e` of a key it lacks, distinct `e` using distinct
//! bits). Either way only bit 0 (or bit `e`) of each message is kept: a
//! 16-bit word `P` of pads per OT at the OT sender, the index `c` and
//! the pad `P[c]` at the chooser.
//!
//! Per bin and OT (the leader holding `x`, the chooser `y`, both of `r ≤
//! 4` bits):
//! * the chooser (circuit PSI's receiver) sends the flip `d = c ⊕ y`;
//! * the OT sender (the leader) draws a share bit `s` and sends, for each
//!   `j < 2^r`, `s ⊕ [x = j] ⊕ P[d ⊕ j]`;
//! * the chooser removes `P[c]` from message `y` (`d ⊕ y = c`) and keeps
//!   `s ⊕ [x = y]`.
//!
//! That is an AND gate: for `r` shared wires `w_t = s_t ⊕ t_t` (the
//! leader's shares `s_t`, the chooser's `t_t`), the leader's `x = ¬(s_1
//! .. s_r)` and the chooser's `y = (t_1 .. t_r)` are equal exactly when
//! every `w_t` is 1. The tree's first wires are the values' bits, `[x_b =
//! y_b]` shared as `¬x_b` and `y_b` with no OT, so a first-level gate
//! compares 4-bit blocks of the values (a CGS leaf). One round per level
//! of the tree, `⌈log4 ℓ⌉` rounds with `⌈(ℓ - 1)/3⌉` gates ([`Layout`]),
//! the fewest for fan-in four.
//!
//! At `ℓ = 61`: 20 OTs per bin (15 leaves, 5 gates), where CGS's leaves
//! with GMW's two-input gates (one 2-bit small VOLE each) took 16 + 15
//! correlations and GMW bit by bit 60; the traffic is 20 bits per OT (16
//! masked messages, 4 bits of flip), about the two-input gates' openings
//! and fixes. The paper's Table 2 pairs CGS only with KK13 and GMW gates.
//!
//! The other messages carry pads of indices the chooser lacks; the flips
//! are uniformly random to the sender, and every gate's shares are
//! uniform to each party. Semi-honest, like the rest.

use std::ops::Range;

use psikit_transport::Channel;
use rand::Rng;
use rayon::prelude::*;

use super::bits::{nibble, Bits};
use super::cgs::{pack, BLOCK};
use super::gmw::{SmallTriples, Triples, TRIPLE_BITS};
use super::messages::{recv_exact, send, KIND_CHOSEN, KIND_FLIPS};
use super::rng::rng;
use super::rot::{recv_flips, Either, Rots, SmallPads};
use crate::error::{Error, Violation};

/// Wires one gate joins at most: the bits of its OT's input, and of the
/// small VOLE behind each 1-out-of-16 OT.
const FAN_IN: usize = BLOCK as usize;

/// The AND tree of one bin's equality: per level, how its wires are
/// grouped, and the 1-out-of-16 OT of each gate with its width `r`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Per level, the sizes of its groups of wires, in wire order: a group
    /// of two to four is a gate, a group of one passes up alone.
    groups: Vec<Vec<usize>>,
    /// Each gate's width in bits (`2^r` messages), level after level.
    widths: Vec<u32>,
    /// The gates of each level (one round each) among `widths`.
    levels: Vec<Range<usize>>,
}

impl Layout {
    /// The tree over values of `ell` bits: the fewest rounds, `⌈log4 ℓ⌉`,
    /// and in them the fewest gates, `⌈(ℓ - 1)/3⌉` (a gate of fan-in `r`
    /// takes `r - 1` wires away). Each level joins just enough wires that
    /// the levels above, all of fan-in four, can finish: so only the first
    /// level may have a narrower gate, and wires it leaves alone.
    pub fn new(ell: u32) -> Self {
        let (mut groups, mut widths, mut levels) = (Vec::new(), Vec::new(), Vec::new());
        let mut wires = ell as usize;
        while wires > 1 {
            let mut target = 1;
            while target * FAN_IN < wires {
                target *= FAN_IN;
            }
            let take = wires - target;
            let mut sizes = vec![FAN_IN; take / (FAN_IN - 1)];
            if !take.is_multiple_of(FAN_IN - 1) {
                sizes.push(take % (FAN_IN - 1) + 1);
            }
            let first = widths.len();
            widths.extend(sizes.iter().map(|&r| r as u32));
            levels.push(first..widths.len());
            sizes.resize(target, 1);
            groups.push(sizes);
            wires = target;
        }
        Self {
            groups,
            widths,
            levels,
        }
    }

    /// OTs per bin, each one forward correlation on silent OT.
    pub fn per_bin(&self) -> usize {
        self.widths.len()
    }

    /// Bits of all the OTs of a bin, each one forward random OT on IKNP.
    fn bits_per_bin(&self) -> usize {
        self.widths.iter().map(|&r| r as usize).sum()
    }
}

/// The equality's correlations for `bins` values of `ell` bits (on silent
/// OT one small VOLE of 4 bits per OT of the [`Layout`], on IKNP one
/// random OT per bit of each), and `triples` AND triples (rounded up to
/// whole words) for the application, on silent OT in the same pipeline.
pub async fn prepare(
    ch: &mut Channel,
    rots: &mut Rots,
    bins: usize,
    ell: u32,
    triples: usize,
) -> Result<(Triples, Keys), Error> {
    let (leader, layout) = (rots.leader(), Layout::new(ell));
    if !rots.has_small_voles() {
        let triples = Triples::generate(rots, ch, triples).await?;
        let keys = collect_from_rots(ch, rots, bins, &layout, leader).await?;
        return Ok((triples, keys));
    }
    let jobs = small_jobs(bins, ell, triples);
    let mut made = SmallTriples::new(jobs[1].0);
    let (mut sent, mut index, mut pads) = (Vec::new(), Vec::new(), Bits::default());
    rots.forward_small_chunks(ch, &jobs, |job, ots| match (job, ots.pads()) {
        (0, SmallPads::Sent(words)) => sent.extend(words),
        (0, SmallPads::Received { c, pads: p }) => {
            index.extend(c);
            pads.extend(&p);
        }
        (_, p) => made.add(p),
    })
    .await?;
    let keys = match leader {
        true => Keys::Sender(sent),
        false => Keys::Chooser { index, pads },
    };
    Ok((made.finish(ch, leader).await?, keys))
}

/// The small VOLEs [`prepare`] makes on silent OT, in order: a 4-bit one
/// per OT of the equality's [`Layout`], then a triple's per AND triple
/// (rounded up to whole words).
pub fn small_jobs(bins: usize, ell: u32, triples: usize) -> [(usize, u32); 2] {
    [
        (bins * Layout::new(ell).per_bin(), BLOCK),
        (triples.next_multiple_of(64), TRIPLE_BITS),
    ]
}

/// Shares of `[x_i = y_i]` for every bin, where this party holds the
/// `ell`-bit `values` (the leader's `x`, the other's `y`), on the OTs of
/// `keys` (from [`prepare`] for as many bins and bits).
pub async fn equal(
    ch: &mut Channel,
    keys: &Keys,
    values: &[u128],
    ell: u32,
) -> Result<Bits, Error> {
    let (bins, layout) = (values.len(), Layout::new(ell));
    let leader = matches!(keys, Keys::Sender(_));
    let mut wires: Vec<Wire> = (0..ell).map(Wire::Bit).collect();
    for (level, sizes) in layout.groups.iter().enumerate() {
        let mut rest = &wires[..];
        let groups: Vec<&[Wire]> = sizes
            .iter()
            .map(|&n| {
                let (group, after) = rest.split_at(n);
                rest = after;
                group
            })
            .collect();
        let gates: Vec<Gate> = groups
            .iter()
            .filter(|g| g.len() > 1)
            .map(|g| Gate::of(g))
            .collect();
        let inputs = gates.iter().map(|g| g.inputs(values, leader)).collect();
        let mut joined = round(ch, keys, &layout, level, bins, inputs)
            .await?
            .into_iter();
        wires = groups
            .iter()
            .map(|g| match g {
                [alone] => Some(alone.clone()),
                _ => joined.next().map(Wire::Shares),
            })
            .collect::<Option<_>>()
            .ok_or(Error::Internal("equality gates miscounted"))?;
    }
    match <[Wire; 1]>::try_from(wires) {
        Ok([Wire::Shares(all)]) => Ok(all),
        Ok([Wire::Bit(b)]) => Ok(Bits::from_bools(
            values.iter().map(|v| (v >> b & 1 == 1) ^ leader),
        )),
        Err(_) => Err(Error::Internal("equality tree not joined")),
    }
}

/// A wire of the AND tree, shared bin by bin.
#[derive(Clone)]
enum Wire {
    /// `[x_b = y_b]` for bit `b` of the values: the leader's share is
    /// `¬x_b`, the other's `y_b`, with no OT.
    Bit(u32),
    /// This party's shares from a gate.
    Shares(Bits),
}

impl Wire {
    /// This party's input to a gate for bin `i`: its share, negated at the
    /// leader (so a bit's wire gives either party its own bit, and the
    /// first gates are CGS's leaves, the equality of 4-bit blocks).
    fn input(&self, values: &[u128], i: usize, leader: bool) -> bool {
        match self {
            Wire::Bit(b) => values[i] >> b & 1 == 1,
            Wire::Shares(s) => s.get(i) ^ leader,
        }
    }
}

/// A gate's wires, read as this party's `r`-bit input to its OT.
enum Gate<'a> {
    /// Bits `start .. start + r` of the values, one shift per bin (every
    /// gate of the first level).
    Block { start: u32, r: u32 },
    /// Any other wires, one at a time.
    Wires(&'a [Wire]),
}

impl<'a> Gate<'a> {
    fn of(wires: &'a [Wire]) -> Self {
        let start = match wires.first() {
            Some(&Wire::Bit(b)) => b,
            _ => return Gate::Wires(wires),
        };
        let block = (start..)
            .zip(wires)
            .all(|(b, w)| matches!(w, Wire::Bit(c) if *c == b));
        match block {
            true => Gate::Block {
                start,
                r: wires.len() as u32,
            },
            false => Gate::Wires(wires),
        }
    }

    /// This party's input for every bin ([`Wire::input`] of each wire).
    fn inputs(&self, values: &[u128], leader: bool) -> Vec<u8> {
        match *self {
            Gate::Block { start, r } => {
                let mask = (1u8 << r) - 1;
                values
                    .par_iter()
                    .map(|v| (v >> start) as u8 & mask)
                    .collect()
            }
            Gate::Wires(wires) => (0..values.len())
                .into_par_iter()
                .map(|i| {
                    wires
                        .iter()
                        .enumerate()
                        .fold(0, |x, (t, w)| x | u8::from(w.input(values, i, leader)) << t)
                })
                .collect(),
        }
    }
}

/// One round of the layout: the OTs `layout.levels[level]` of every bin,
/// this party's input to OT `j` of the round for bin `i` being
/// `inputs[j][i]`; returns this party's shares, one plane of `bins` bits
/// per OT.
async fn round(
    ch: &mut Channel,
    keys: &Keys,
    layout: &Layout,
    level: usize,
    bins: usize,
    inputs: Vec<Vec<u8>>,
) -> Result<Vec<Bits>, Error> {
    let ots = Round {
        layout,
        range: layout.levels[level].clone(),
        bins,
    };
    match keys {
        Keys::Sender(pads) => {
            let words = ots.range.len() * bins.div_ceil(FLIPS_PER_WORD);
            let flips = recv_flips(ch, 64 * words).await?;
            offer(ch, &ots, pads, &flips, &inputs).await
        }
        Keys::Chooser { index, pads } => choose(ch, &ots, index, pads, &inputs).await,
    }
}

/// The OTs of one round, for [`offer`] and [`choose`].
struct Round<'a> {
    layout: &'a Layout,
    range: Range<usize>,
    bins: usize,
}

impl Round<'_> {
    /// The key of OT `j` of the round for bin `i`: OT-major, so that each
    /// OT's keys (and flips) are read in one sweep.
    fn key(&self, i: usize, j: usize) -> usize {
        (self.range.start + j) * self.bins + i
    }

    /// Width of OT `j` of the round.
    fn width(&self, j: usize) -> u32 {
        self.layout.widths[self.range.start + j]
    }
}

/// What each party keeps of every 1-out-of-16 OT, OT `k·bins + i` for
/// bin `i` and OT `k` of the [`Layout`].
pub enum Keys {
    /// Bit `e` of each word: bit 0 of message `e`.
    Sender(Vec<u16>),
    /// Each OT's index `c` and bit 0 of its message.
    Chooser { index: Vec<u8>, pads: Bits },
}

/// The OTs from four random OTs each (fewer for narrower ones), bin `i`'s
/// OT `k` of width `r` on random OTs `bins·offset(k) + i·r ..` (16 bits
/// kept of each message).
async fn collect_from_rots(
    ch: &mut Channel,
    rots: &mut Rots,
    bins: usize,
    layout: &Layout,
    leader: bool,
) -> Result<Keys, Error> {
    let (mut sent, mut choices, mut chosen) = (Vec::new(), Bits::default(), Vec::new());
    let low16 = |m: &u128| u64::from(*m as u16);
    let per = layout.bits_per_bin();
    rots.forward_chunks(ch, bins * per, |ots| match ots.whole() {
        Either::Sent(s) => sent.extend(s.m0.iter().zip(&s.m1).map(|(a, b)| (low16(a), low16(b)))),
        Either::Received(r) => {
            choices.extend(&r.choices);
            chosen.extend(r.chosen.iter().map(|m| *m as u16));
        }
    })
    .await?;
    let offsets: Vec<usize> = layout
        .widths
        .iter()
        .scan(0, |at, &r| {
            *at += r as usize;
            Some(*at - r as usize)
        })
        .collect();
    let ots = |i: usize, k: usize| {
        let first = bins * offsets[k] + i * layout.widths[k] as usize;
        first..first + layout.widths[k] as usize
    };
    let all = (0..layout.per_bin()).flat_map(|k| (0..bins).map(move |i| (i, k)));
    Ok(match leader {
        // P[e] = ⊕_t bit_e(K_t(e_t)): the messages e with e_t = 1 take
        // K_t(1), selected by SELECT[t].
        true => Keys::Sender(
            all.map(|(i, k)| {
                ots(i, k).enumerate().fold(0u64, |p, (t, ot)| {
                    let (k0, k1) = sent[ot];
                    p ^ (k0 & !SELECT[t]) ^ (k1 & SELECT[t])
                }) as u16
            })
            .collect(),
        ),
        false => {
            let (index, pads): (Vec<u8>, Vec<bool>) = all
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

/// OTs whose 4-bit flips share a word of the flips' bits.
const FLIPS_PER_WORD: usize = 64 / BLOCK as usize;
// A bin's flip is read back by `bits::nibble`, sixteen to a word.
const _: () = assert!(FLIPS_PER_WORD == 16);

/// The leader's side of a round: per OT, its share bits and the masked
/// messages.
async fn offer(
    ch: &mut Channel,
    ots: &Round<'_>,
    pads: &[u16],
    flips: &Bits,
    inputs: &[Vec<u8>],
) -> Result<Vec<Bits>, Error> {
    let bins = ots.bins;
    let per_ot = bins.div_ceil(FLIPS_PER_WORD);
    let mut rng = rng()?;
    let mut planes = Vec::with_capacity(ots.range.len());
    for j in 0..ots.range.len() {
        let r = ots.width(j);
        let words = (0..bins.div_ceil(64)).map(|_| rng.gen()).collect();
        let share = Bits::from_words(words, bins);
        let flips = &flips.words()[j * per_ot..(j + 1) * per_ot];
        let (pads, x) = (&pads[ots.key(0, j)..ots.key(0, j) + bins], &inputs[j]);
        let all = (1u64 << (1 << r)) - 1;
        let rows: Vec<u64> = (0..bins)
            .into_par_iter()
            .map(|i| {
                let masks = xor_permute(pads[i], nibble(flips, i));
                let eq = 1u64 << x[i];
                let shares = all & u64::from(share.get(i)).wrapping_neg();
                (shares ^ eq ^ masks) & all
            })
            .collect();
        send(ch, KIND_CHOSEN, &pack(&rows, 1 << r).to_bytes()).await?;
        planes.push(share);
    }
    Ok(planes)
}

/// The chooser's side of a round: it sends the flips that turn its OTs'
/// indices into its inputs (OT by OT, each OT's padded to whole words),
/// then unmasks the message of its input.
async fn choose(
    ch: &mut Channel,
    ots: &Round<'_>,
    index: &[u8],
    pads: &Bits,
    inputs: &[Vec<u8>],
) -> Result<Vec<Bits>, Error> {
    let (bins, len) = (ots.bins, ots.range.len());
    let per_ot = bins.div_ceil(FLIPS_PER_WORD);
    let words: Vec<u64> = (0..len * per_ot)
        .into_par_iter()
        .map(|w| {
            let (j, first) = (w / per_ot, w % per_ot * FLIPS_PER_WORD);
            (first..(first + FLIPS_PER_WORD).min(bins)).fold(0, |word, i| {
                let d = index[ots.key(i, j)] ^ inputs[j][i];
                word | u64::from(d) << (BLOCK as usize * (i - first))
            })
        })
        .collect();
    let flips = Bits::from_words(words, 64 * len * per_ot);
    send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
    let mut planes = Vec::with_capacity(len);
    for (j, y) in inputs.iter().enumerate() {
        let width = 1usize << ots.width(j);
        let bytes = recv_exact(ch, KIND_CHOSEN, (bins * width).div_ceil(8)).await?;
        let masked = Bits::from_bytes(&bytes, bins * width)
            .ok_or(Violation::Invalid("CGS equality messages"))?;
        let words = (0..bins.div_ceil(64))
            .into_par_iter()
            .map(|w| {
                (64 * w..(64 * w + 64).min(bins)).fold(0u64, |word, i| {
                    let bit = masked.get(i * width + usize::from(y[i])) ^ pads.get(ots.key(i, j));
                    word | u64::from(bit) << (i % 64)
                })
            })
            .collect();
        planes.push(Bits::from_words(words, bins));
    }
    Ok(planes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpsi::rot::test_rots;
    use psikit_transport::Limits;

    #[test]
    fn gates_join_four_wires_and_pass_a_lone_one() {
        let layout = |ell| {
            let l = Layout::new(ell);
            (l.widths.clone(), l.levels.clone(), l.bits_per_bin())
        };
        let one_leaf = 0..1;
        assert_eq!(layout(1), (vec![], vec![], 0));
        assert_eq!(layout(4), (vec![4], vec![one_leaf], 4));
        // 6 bits: a gate of three, three bits pass; then a gate of four.
        assert_eq!(layout(6), (vec![3, 4], vec![0..1, 1..2], 7));
        assert_eq!(Layout::new(6).groups, vec![vec![3, 1, 1, 1], vec![4]]);
        // 17 bits: a gate of two leaves 16 wires, then fours.
        assert_eq!(
            layout(17),
            (vec![2, 4, 4, 4, 4, 4], vec![0..1, 1..5, 5..6], 22)
        );
        let at61 = Layout::new(61);
        assert_eq!(at61.per_bin(), 20);
        assert_eq!(at61.levels, vec![0..15, 15..19, 19..20]);
        assert!(at61.widths.iter().all(|&r| r == 4));
        for ell in 1..=128u32 {
            let l = Layout::new(ell);
            assert_eq!(l.per_bin(), (ell as usize - 1).div_ceil(3), "ell {ell}");
            let rounds = (0..).find(|&k| 4usize.pow(k) >= ell as usize);
            assert_eq!(Some(l.levels.len() as u32), rounds, "ell {ell}");
            assert!(l.widths.iter().all(|r| (2..=4).contains(r)), "ell {ell}");
        }
    }

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
        let (triples, keys) = prepare(&mut ch, &mut rots, values.len(), ell, 0)
            .await
            .expect("correlations");
        assert_eq!(triples.remaining(), 0);
        equal(&mut ch, &keys, &values, ell).await.expect("equal")
    }

    /// Every pair of 4-bit values, and values one bit apart, for lengths
    /// with no gate (1 bit), one gate, narrower gates and bits passing a
    /// level alone (6, 7, 17) and three full levels (61): equal exactly
    /// when the values are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shares_of_equality_are_exact() {
        for (ell, silent) in [
            (1u32, true),
            (4, true),
            (6, true),
            (7, false),
            (17, true),
            (17, false),
            (61, true),
        ] {
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

    /// Each party's shares look uniform whatever the answer: with every
    /// bin equal, or every bin unequal, about half of either party's
    /// shares are ones (a constant share would tell the other party every
    /// answer).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn either_partys_shares_hide_the_answers() {
        let (bins, ell) = (4096usize, 61);
        let x: Vec<u128> = (0..bins as u128)
            .map(|i| i * 0x9e37_79b9_7f4a_7c15)
            .collect();
        let unequal: Vec<u128> = x.iter().map(|v| v ^ 1 << 60).collect();
        for y in [x.clone(), unequal] {
            let (a, b) = Channel::memory_pair(Limits::default());
            let task = tokio::spawn(party(a, true, x.clone(), ell, true));
            let chooser = party(b, false, y, ell, true).await;
            let leader = task.await.expect("task");
            for shares in [&leader, &chooser] {
                let ones = shares.count_ones();
                assert!(ones.abs_diff(bins / 2) < bins / 10, "{ones} ones of {bins}");
            }
        }
    }
}
