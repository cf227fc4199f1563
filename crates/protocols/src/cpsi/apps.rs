//! Computing on the membership shares (paper §3.3): weighted sums (the
//! cardinality and the sums of either party's values), the threshold
//! test, and the union.
//!
//! Weighted sums use one derandomised random OT per bin (for all the
//! weight vectors at once), with the party
//! holding the weights `x` as OT sender: the chooser's bit is its share
//! `s'`, and it must get `(s ⊕ s')·x + r` while the holder keeps `-r`,
//! so that with `b = s ⊕ s'` the membership bit the two add up to `b·x`
//! (the method of Garimella et al. that the paper adapts). The two
//! outputs differ by the holder's own `(1 - 2s)·x`, a correlated OT: the
//! chooser's output for `s' = 0` is the key `k_0` of its OT message
//! itself (so `r = k_0 - s·x`), and the holder sends only `k_0 + (1 -
//! 2s)·x - k_1` for `s' = 1`, one word per bin and vector instead of two.
//! Summing gives additive shares of `Σ b·x` mod 2^64 (sums wrap at 2^64).
//!
//! The union is a shuffle-based private set union (Garimella et al.,
//! CRYPTO 2021; Jia et al., USENIX Security 2022): the receiver shuffles
//! the bins with both parties' membership shares by a permutation only it
//! knows (module `osn`), then sends one encrypted slot per shuffled bin
//! that the sender opens exactly when its item is outside the
//! intersection ([`union_provide`], [`union_learn`]). Without the shuffle
//! the slots that do not open would name the intersection's bins.

use psikit_ot::aes_hash;
use psikit_transport::Channel;
use rand::RngCore;
use rayon::prelude::*;

use super::bits::Bits;
use super::gmw::{self, Triples};
use super::messages::{self as msg, recv_exact, Share, KIND_FLIPS, KIND_PADS, KIND_UNION};
use super::outcome::{Output, Sums};
use super::rot::{recv_flips, Either, Rots};
use super::vocabulary::{Agreed, Reveal, Role, MAX_VALUE_COLUMNS};
use super::{osn, product};
use crate::error::{Error, Violation};

/// This party's additive shares of `Σ_i b_i·x_i` mod 2^64 for `k` weight
/// vectors `x` (at most [`MAX_WEIGHTS`]; one random OT per bin carries
/// them all), where `b_i` is bin `i`'s membership (shared as `shares`)
/// and the weights are held by the leader if `leader_holds`: `holder` is
/// `Some` exactly at the holder, with its `k` vectors.
pub async fn weighted_sums(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    holder: Option<&[&[u64]]>,
    k: usize,
    leader_holds: bool,
) -> Result<Vec<u64>, Error> {
    let n = shares.len();
    if !(1..=MAX_WEIGHTS).contains(&k) {
        return Err(Error::Internal("weight vectors per OT out of range"));
    }
    match rots.one_way(ch, n, leader_holds).await? {
        Either::Sent(ots) => {
            let xs = holder
                .filter(|xs| xs.len() == k && xs.iter().all(|x| x.len() == n))
                .ok_or_else(|| Error::Config("one weight per bin and vector is needed".into()))?;
            let flips = recv_flips(ch, n).await?;
            let mut pads = Vec::with_capacity(n * 8 * k);
            let mut sums = vec![0u64; k];
            let (mut k0, mut k1) = (vec![0u64; k], vec![0u64; k]);
            for i in 0..n {
                // The chooser's message for `s' = c` is OT message `c ⊕ f`.
                let (f, s) = (flips.get(i), shares.get(i));
                let (m0, m1) = (ots.m0[i], ots.m1[i]);
                key_words(if f { m1 } else { m0 }, &mut k0);
                key_words(if f { m0 } else { m1 }, &mut k1);
                // Its output is `k_0` for `s' = 0` and `k_0 + (1 - 2s)·x`
                // for `s' = 1`; this party keeps `s·x - k_0`.
                // By masks, not a branch: `s` is a secret share.
                let held = u64::from(s).wrapping_neg();
                for (((sum, x), k0), k1) in sums.iter_mut().zip(xs).zip(&k0).zip(&k1) {
                    let (mine, step) = (x[i] & held, x[i] ^ (held & (x[i] ^ x[i].wrapping_neg())));
                    *sum = sum.wrapping_add(mine).wrapping_sub(*k0);
                    let pad = k0.wrapping_add(step).wrapping_sub(*k1);
                    pads.extend_from_slice(&pad.to_le_bytes());
                }
            }
            msg::send(ch, KIND_PADS, &pads).await?;
            Ok(sums)
        }
        Either::Received(ots) => {
            let mut flips = ots.choices.clone();
            flips.xor_assign(shares);
            msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
            let pads = recv_exact(ch, KIND_PADS, n * 8 * k).await?;
            let mut sums = vec![0u64; k];
            let mut key = vec![0u64; k];
            for i in 0..n {
                let at = 8 * k * i;
                key_words(ots.chosen[i], &mut key);
                // The pad counts where the share is 1, by a mask.
                let held = u64::from(shares.get(i)).wrapping_neg();
                for (j, (sum, key)) in sums.iter_mut().zip(&key).enumerate() {
                    let pad = u64::from_le_bytes(bytes8(&pads[at + 8 * j..at + 8 * j + 8]));
                    let got = key.wrapping_add(pad & held);
                    *sum = sum.wrapping_add(got);
                }
            }
            Ok(sums)
        }
    }
}

/// Most weight vectors one batch of [`weighted_sums`] carries: the count,
/// every value column of both parties and the inner product.
pub const MAX_WEIGHTS: usize = 2 + 2 * MAX_VALUE_COLUMNS;

/// The 64-bit one-time keys an OT message `m` gives: its two halves for up
/// to two words, else the TCCR stream `H(0, m), H(1, m), ...`.
fn key_words(m: u128, out: &mut [u64]) {
    if out.len() <= 2 {
        out[0] = m as u64;
        if let Some(w) = out.get_mut(1) {
            *w = (m >> 64) as u64;
        }
        return;
    }
    let mut stream = [m; MAX_WEIGHTS.div_ceil(2)];
    let stream = &mut stream[..out.len().div_ceil(2)];
    aes_hash::tccr_many(stream, |i| i as u128);
    for (j, w) in out.iter_mut().enumerate() {
        *w = (stream[j / 2] >> (64 * (j % 2))) as u64;
    }
}

fn bytes8(b: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    w
}

/// Opens additive shares to the parties `reveal` names: a party that does
/// not learn sends its shares, a party that learns adds the peer's. The
/// sender sends first, so two learners never wait on each other.
pub async fn open(
    ch: &mut Channel,
    mine: &[u64],
    me: Role,
    reveal: Reveal,
) -> Result<Option<Vec<u64>>, Error> {
    let (i_learn, they_learn) = (reveal.to(me), reveal.to(me.other()));
    if they_learn && me == Role::Sender {
        ch.send_msg(&Share(mine.to_vec())).await?;
    }
    let opened = match i_learn {
        true => {
            let Share(theirs) = ch.recv_msg(mine.len()).await?;
            Some(
                mine.iter()
                    .zip(theirs)
                    .map(|(a, b)| a.wrapping_add(b))
                    .collect(),
            )
        }
        false => None,
    };
    if they_learn && me == Role::Receiver {
        ch.send_msg(&Share(mine.to_vec())).await?;
    }
    Ok(opened)
}

/// [`open`] of one value.
pub async fn open_one(
    ch: &mut Channel,
    mine: u64,
    me: Role,
    reveal: Reveal,
) -> Result<Option<u64>, Error> {
    Ok(open(ch, &[mine], me, reveal).await?.map(|v| v[0]))
}

/// Shares of `|X ∩ Y|`: a sum of ones held by the sender, so that it runs
/// on forward OTs.
pub async fn count(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    me: Role,
) -> Result<u64, Error> {
    let ones = vec![1u64; shares.len()];
    let weights = [&ones[..]];
    let holder = (me == Role::Sender).then_some(&weights[..]);
    Ok(weighted_sums(ch, rots, shares, holder, 1, true).await?[0])
}

/// The sum application (paper §3.3, PSI-Sum) at `me`, up to this party's
/// additive shares: of the count, of each value column's sum over the
/// intersection (the sender's weights on forward OTs, the receiver's on
/// reverse ones), and of the inner product if one is agreed, in that
/// order. [`open_sums`] opens them.
///
/// `weights` are this party's weight vectors: at the sender, its shares of
/// its `k_s` columns; at the receiver, its shares of the sender's `k_s`
/// columns, then its own `k_r` columns.
///
/// With an inner product `Σ b·x·y` (sender's first column `x`, shared as
/// `u` at the receiver and `a` at the sender, receiver's first column
/// `y`): [`product::multiply`] gives shares `s + t = a·y` per bin, and
/// `b·x·y = b·(u·y + t) + b·s`, one more weight vector at each party.
pub async fn sum_shares(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    me: Role,
    weights: &[&[u64]],
    (k_s, k_r): (usize, usize),
    product_bits: u8,
) -> Result<Vec<u64>, Error> {
    let ones = vec![1u64; shares.len()];
    let sender = me == Role::Sender;
    let product = match product_bits {
        0 => None,
        bits => Some(product_weights(ch, rots, me, weights, k_s, bits).await?),
    };
    let p = usize::from(product.is_some());
    let mine: Vec<&[u64]> = weights.iter().copied().chain(product.as_deref()).collect();
    let forward: Vec<&[u64]> = std::iter::once(&ones[..])
        .chain(mine.iter().copied())
        .collect();
    let fwd_holder = sender.then_some(&forward[..]);
    let fwd = weighted_sums(ch, rots, shares, fwd_holder, 1 + k_s + p, true).await?;
    let rev = match k_s + k_r + p {
        0 => Vec::new(),
        k => weighted_sums(ch, rots, shares, (!sender).then_some(&mine[..]), k, false).await?,
    };
    // Count, sender's columns, receiver's columns, inner product.
    let mut results = vec![fwd[0]];
    results.extend((0..k_s).map(|j| fwd[1 + j].wrapping_add(rev[j])));
    results.extend_from_slice(&rev[k_s..k_s + k_r]);
    if p == 1 {
        results.push(fwd[1 + k_s].wrapping_add(rev[k_s + k_r]));
    }
    Ok(results)
}

/// Opens the sums from this party's shares `results` ([`sum_shares`]'s,
/// or their sums over a job's buckets): first, with a minimum
/// intersection, whether the count (at most `max_count`) reaches it, to
/// both parties (with `triples` for the adder), and the sums only if it
/// does.
pub async fn open_sums(
    ch: &mut Channel,
    triples: &mut Triples,
    results: &[u64],
    me: Role,
    (k_s, k_r): (usize, usize),
    agreed: &Agreed,
    max_count: u64,
) -> Result<Output, Error> {
    let p = usize::from(agreed.product_bits > 0);
    if results.len() != 1 + k_s + k_r + p {
        return Err(Error::Internal("sum shares per column"));
    }
    let min = agreed.min_intersection;
    if min > 0 {
        let max = max_count.max(min);
        let sender = me == Role::Sender;
        let reached = at_least(ch, triples, results[0], min, max, sender).await?;
        let reached = open_one(ch, u64::from(reached), me, Reveal::Both).await?;
        if reached.map(|b| b & 1) == Some(0) {
            return Ok(Output::SumWithheld(min));
        }
    }
    let opened = open(ch, results, me, agreed.reveal).await?;
    Ok(Output::Sum(opened.map(|v| Sums {
        cardinality: v[0],
        sender_values: v[1..1 + k_s].to_vec(),
        receiver_values: v[1 + k_s..1 + k_s + k_r].to_vec(),
        inner_product: v.get(1 + k_s + k_r).copied(),
    })))
}

/// The inner product's weight vector at `me`: the sender's share `s` of
/// `a·y` per bin, or the receiver's `u·y + t` (see [`sums`]).
async fn product_weights(
    ch: &mut Channel,
    rots: &mut Rots,
    me: Role,
    weights: &[&[u64]],
    k_s: usize,
    bits: u8,
) -> Result<Vec<u64>, Error> {
    let factor = match me {
        Role::Sender => weights[0],
        Role::Receiver => weights[k_s],
    };
    let mut mine = product::multiply(ch, rots, me, factor, u32::from(bits)).await?;
    if me == Role::Receiver {
        for (t, (u, y)) in mine.iter_mut().zip(weights[0].iter().zip(factor)) {
            *t = t.wrapping_add(u.wrapping_mul(*y));
        }
    }
    Ok(mine)
}

/// Bits of the adder for a threshold on a count of at most `max`: enough
/// that `count - t` never wraps into the top bit.
pub fn threshold_bits(max: u64) -> u32 {
    65 - max.leading_zeros()
}

/// Shares of `[count ≥ t]` from additive shares of `count ≤ max` (the
/// leader's and the other's), with `t ≤ max` public: the other party
/// subtracts `t` from its share, and `count - t < 0` exactly when the top
/// bit of the `k`-bit sum is set.
pub async fn at_least(
    ch: &mut Channel,
    triples: &mut Triples,
    share: u64,
    t: u64,
    max: u64,
    leader: bool,
) -> Result<bool, Error> {
    let k = threshold_bits(max);
    let mine = match leader {
        true => share,
        false => share.wrapping_sub(t),
    };
    let mine = mine & (u64::MAX >> (64 - k));
    let negative = gmw::top_bit_of_sum(ch, triples, mine, k, leader).await?;
    // The leader's share of the complement.
    Ok(negative ^ leader)
}

/// Zero bytes ahead of each union slot: a slot decrypted under the wrong
/// key passes with probability `2^-96` per bin, far below `2^-40` over
/// any table psikit builds.
const CHECK: usize = 12;

/// Bytes of a union slot carrying items of up to `width` bytes: the check,
/// a presence byte, the length, the padded item.
const fn union_slot(width: usize) -> usize {
    CHECK + 3 + width
}

/// What a union slot carries, bin by bin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill<'a> {
    /// The bin's item (revealed if it is outside the intersection).
    Item(&'a [u8]),
    /// An empty bin: its slot opens empty.
    Empty,
    /// A job's padding item: its slot never opens, as an item in the
    /// intersection's does not, so the learner cannot count the padding.
    Padding,
}

/// The union's side of the party providing items (the cuckoo side, the
/// permutation holder). First the bins are shuffled: a fresh uniformly
/// random `π`, known to this party alone, permutes both parties' shares
/// through the switching network (module `osn`), this party's items with
/// them (its share of slot `j` is `p_{π(j)} ⊕ a_j`); then one slot per
/// permuted bin (`fill_slots`). `items[bin]` is what the bin's slot carries.
pub async fn union_provide(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    items: &[Fill<'_>],
    width: usize,
) -> Result<(), Error> {
    if items.len() != shares.len() {
        return Err(Error::Internal("one union item slot per bin"));
    }
    if items
        .iter()
        .any(|f| matches!(f, Fill::Item(i) if i.len() > width))
    {
        return Err(Error::Internal("a union item wider than its slot"));
    }
    let perm = osn::random_permutation(shares.len())?;
    let mut mine = osn::permute(ch, rots, &perm).await?;
    mine.xor_assign(&Bits::from_bools(
        perm.iter().map(|&bin| shares.get(bin as usize)),
    ));
    let items: Vec<Fill<'_>> = perm.iter().map(|&bin| items[bin as usize]).collect();
    fill_slots(ch, rots, &mine, &items, width).await
}

/// The learner's side of the union: the provider's items outside the
/// intersection, in the shuffled order.
pub async fn union_learn(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    width: usize,
) -> Result<Vec<Vec<u8>>, Error> {
    let slots = union_view(ch, rots, shares, width).await?;
    Ok(slots
        .into_iter()
        .filter_map(|slot| match slot {
            Slot::Item(item) => Some(item),
            Slot::Empty | Slot::Closed => None,
        })
        .collect())
}

/// What the learner sees of one union slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// It opened on an item: an item outside the intersection.
    Item(Vec<u8>),
    /// It opened without an item: an empty bin.
    Empty,
    /// It did not open: its item is in the intersection.
    Closed,
}

/// The learner's whole view of the union's outcome, slot by slot in the
/// order received (after the shuffle): what [`union_learn`] keeps the
/// items of, and what the tests check tells nothing of the bins.
///
/// That a slot opens *empty* rather than not at all is visible; after the
/// shuffle it only gives the number of empty bins, `M - |Y|`, which the
/// learner knows from the hellos anyway.
pub(crate) async fn union_view(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    width: usize,
) -> Result<Vec<Slot>, Error> {
    let permuted = osn::share(ch, rots, shares).await?;
    open_slots(ch, rots, &permuted, width).await
}

/// The slots themselves, in the order of `shares` (the bins' before the
/// shuffle, which is why they are only sent after it): slot `i` holds
/// `items[i]` (or none), encrypted under the key of this party's
/// membership share `shares[i]`, with the provider as OT sender on
/// reverse random OTs. The learner holds the key of its share, so it
/// decrypts the slot exactly when the shares agree, i.e. when the item is
/// not in the intersection; otherwise it reads noise that fails the
/// check.
pub(crate) async fn fill_slots(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    items: &[Fill<'_>],
    width: usize,
) -> Result<(), Error> {
    let n = shares.len();
    let Either::Sent(ots) = rots.one_way(ch, n, false).await? else {
        return Err(Error::Config("union roles out of step".into()));
    };
    let flips = recv_flips(ch, n).await?;
    let slot = union_slot(width);
    let mut out = vec![0u8; n * slot];
    out.par_chunks_mut(slot)
        .zip(items.par_iter())
        .for_each(|(m, item)| match item {
            Fill::Item(item) => {
                m[CHECK] = 1;
                m[CHECK + 1..CHECK + 3].copy_from_slice(&(item.len() as u16).to_le_bytes());
                m[CHECK + 3..CHECK + 3 + item.len()].copy_from_slice(item);
            }
            Fill::Empty => {}
            // Fresh random bytes (still so once encrypted): noise under
            // either key, as a slot under the key the learner lacks.
            Fill::Padding => rand::rngs::OsRng.fill_bytes(m),
        });
    // The key chosen by a mask: the share is secret.
    xor_streams(&mut out, slot, |i| {
        let pick = u128::from(shares.get(i) ^ flips.get(i)).wrapping_neg();
        ots.m0[i] ^ (pick & (ots.m0[i] ^ ots.m1[i]))
    });
    msg::send(ch, KIND_UNION, &out).await
}

/// The learner's side of [`fill_slots`]: each slot decrypted under the key
/// of its share, and what it holds.
pub(crate) async fn open_slots(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    width: usize,
) -> Result<Vec<Slot>, Error> {
    let n = shares.len();
    let Either::Received(ots) = rots.one_way(ch, n, false).await? else {
        return Err(Error::Config("union roles out of step".into()));
    };
    let mut flips = ots.choices.clone();
    flips.xor_assign(shares);
    msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
    let slot = union_slot(width);
    let mut all = recv_exact(ch, KIND_UNION, n * slot).await?;
    xor_streams(&mut all, slot, |i| ots.chosen[i]);
    all.chunks(slot).map(|m| read_slot(m, width)).collect()
}

/// A decrypted slot's content: closed unless the check bytes are zero and
/// the presence byte is 0 or 1; an item longer than `width` is the peer's
/// error.
fn read_slot(m: &[u8], width: usize) -> Result<Slot, Error> {
    if m[..CHECK].iter().any(|&b| b != 0) {
        return Ok(Slot::Closed);
    }
    match m[CHECK] {
        0 => Ok(Slot::Empty),
        1 => {
            let len = u16::from_le_bytes([m[CHECK + 1], m[CHECK + 2]]) as usize;
            if len > width {
                return Err(Violation::Invalid("union item length").into());
            }
            Ok(Slot::Item(m[CHECK + 3..CHECK + 3 + len].to_vec()))
        }
        _ => Ok(Slot::Closed),
    }
}

/// XORs slot `i` (the `i`-th `slot` bytes of `data`) with the stream
/// `H(0, key(i)), H(1, key(i)), ...` of the TCCR hash of fixed-key AES
/// (two AES calls per block, no key schedule per message: the union
/// sends a keyed message per bin). Slots go sixteen at a time through
/// one hash call: a slot is a few blocks, too few for the wide AES
/// kernel alone (one slot a call took 0.4 s at 2^20 bins).
fn xor_streams(data: &mut [u8], slot: usize, key: impl Fn(usize) -> u128 + Sync) {
    const GROUP: usize = 16;
    let blocks = slot.div_ceil(16);
    data.par_chunks_mut(slot * GROUP).enumerate().for_each_init(
        || vec![0u128; GROUP * blocks],
        |stream, (g, group)| {
            let stream = &mut stream[..group.len().div_ceil(slot) * blocks];
            for (i, s) in stream.chunks_mut(blocks).enumerate() {
                s.fill(key(g * GROUP + i));
            }
            aes_hash::tccr_many(stream, |j| (j % blocks) as u128);
            for (m, s) in group.chunks_mut(slot).zip(stream.chunks(blocks)) {
                for (d, s) in m.chunks_mut(16).zip(s) {
                    for (d, s) in d.iter_mut().zip(s.to_le_bytes()) {
                        *d ^= s;
                    }
                }
            }
        },
    );
}
