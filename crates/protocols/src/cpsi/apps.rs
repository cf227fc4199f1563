//! Computing on the membership shares (paper §3.3): weighted sums (the
//! cardinality and the sums of either party's values), the threshold
//! test, and the union.
//!
//! Weighted sums use one derandomised random OT per bin (for up to two
//! weight vectors at once), with the party
//! holding the weights `x` as OT sender: the chooser's bit is its share
//! `s'`, the messages `(s ⊕ c)·x + r` for `c = 0, 1`, so the chooser gets
//! `b·x + r` with `b = s ⊕ s'` the membership bit and the holder keeps
//! `-r` (the method of Garimella et al. that the paper adapts). Summing
//! gives additive shares of `Σ b·x` mod 2^64 (sums wrap at 2^64).

use psikit_ot::aes_hash;
use psikit_transport::Channel;
use rand::Rng;
use rayon::prelude::*;

use super::bits::Bits;
use super::gmw::{self, Triples};
use super::messages::{self as msg, recv_exact, Share, KIND_FLIPS, KIND_PADS, KIND_UNION};
use super::rot::{Either, Rots};
use crate::{Error, Violation};

/// This party's additive shares of `Σ_i b_i·x_i` mod 2^64 for `k` weight
/// vectors `x` (one or two: each random OT carries two 64-bit words),
/// where `b_i` is bin `i`'s membership (shared as `shares`) and the weights
/// are held by the leader if `leader_holds`: `holder` is `Some` exactly at
/// the holder, with its `k` vectors.
pub async fn weighted_sums(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    holder: Option<&[&[u64]]>,
    k: usize,
    leader_holds: bool,
) -> Result<Vec<u64>, Error> {
    let n = shares.len();
    if !(1..=2).contains(&k) {
        return Err(Error::Internal("one or two weight vectors per OT"));
    }
    let word = |m: u128, j: usize| (m >> (64 * j)) as u64;
    match rots.one_way(ch, n, leader_holds).await? {
        Either::Sent(ots) => {
            let xs = holder
                .filter(|xs| xs.len() == k && xs.iter().all(|x| x.len() == n))
                .ok_or_else(|| Error::Config("one weight per bin and vector is needed".into()))?;
            let mut rng = super::rng()?;
            let flips = recv_flips(ch, n).await?;
            let mut pads = Vec::with_capacity(n * 16 * k);
            let mut sums = vec![0u64; k];
            for i in 0..n {
                let (f, s) = (flips.get(i), shares.get(i));
                let r: Vec<u64> = (0..k).map(|_| rng.gen()).collect();
                for (sum, r) in sums.iter_mut().zip(&r) {
                    *sum = sum.wrapping_sub(*r);
                }
                for c in [false, true] {
                    let m = if c ^ f { ots.m1[i] } else { ots.m0[i] };
                    for (j, x) in xs.iter().enumerate() {
                        let weight = if s ^ c { x[i] } else { 0 };
                        let pad = weight.wrapping_add(r[j]).wrapping_add(word(m, j));
                        pads.extend_from_slice(&pad.to_le_bytes());
                    }
                }
            }
            msg::send(ch, KIND_PADS, &pads).await?;
            Ok(sums)
        }
        Either::Received(ots) => {
            let mut flips = ots.choices.clone();
            flips.xor_assign(shares);
            msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
            let pads = recv_exact(ch, KIND_PADS, n * 16 * k).await?;
            let mut sums = vec![0u64; k];
            for i in 0..n {
                let at = 8 * k * (2 * i + usize::from(shares.get(i)));
                for (j, sum) in sums.iter_mut().enumerate() {
                    let pad = u64::from_le_bytes(bytes8(&pads[at + 8 * j..at + 8 * j + 8]));
                    *sum = sum.wrapping_add(pad.wrapping_sub(word(ots.chosen[i], j)));
                }
            }
            Ok(sums)
        }
    }
}

fn bytes8(b: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    w
}

async fn recv_flips(ch: &mut Channel, n: usize) -> Result<Bits, Error> {
    let bytes = recv_exact(ch, KIND_FLIPS, n.div_ceil(8)).await?;
    Bits::from_bytes(&bytes, n).ok_or_else(|| Violation::Invalid("OT choice corrections").into())
}

/// Opens additive shares to the parties that learn: the other party sends
/// its share to the receiver (and, if `both`, the receiver sends its own
/// back). `learner` says whether this party is the receiver of the result.
pub async fn open(
    ch: &mut Channel,
    mine: u64,
    learner: bool,
    both: bool,
) -> Result<Option<u64>, Error> {
    match learner {
        true => {
            let Share(theirs) = ch.recv_msg(()).await?;
            if both {
                ch.send_msg(&Share(mine)).await?;
            }
            Ok(Some(mine.wrapping_add(theirs)))
        }
        false => {
            ch.send_msg(&Share(mine)).await?;
            match both {
                true => {
                    let Share(theirs) = ch.recv_msg(()).await?;
                    Ok(Some(mine.wrapping_add(theirs)))
                }
                false => Ok(None),
            }
        }
    }
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

/// The union's side of the party providing items (the cuckoo side): for
/// each bin, the chooser gets its item if it is not in the intersection,
/// nothing otherwise. `items[bin]` is the bin's item or `None`; every item
/// is sent padded to `width` bytes, with a presence byte and its length.
pub async fn union_provide(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    items: &[Option<&[u8]>],
    width: usize,
) -> Result<(), Error> {
    let n = shares.len();
    let Either::Sent(ots) = rots.one_way(ch, n, false).await? else {
        return Err(Error::Config("union roles out of step".into()));
    };
    let flips = recv_flips(ch, n).await?;
    let slot = width + 3;
    let mut out = vec![0u8; 2 * n * slot];
    out.par_chunks_mut(2 * slot)
        .zip(items.par_iter())
        .enumerate()
        .for_each(|(i, (pair, item))| {
            for (c, m) in [false, true].into_iter().zip(pair.chunks_mut(slot)) {
                // Sent when the bin's membership is 0 for this choice.
                if let (Some(item), false) = (item, shares.get(i) ^ c) {
                    m[0] = 1;
                    m[1..3].copy_from_slice(&(item.len() as u16).to_le_bytes());
                    m[3..3 + item.len()].copy_from_slice(item);
                }
                let key = if c ^ flips.get(i) {
                    ots.m1[i]
                } else {
                    ots.m0[i]
                };
                xor_stream(key, m);
            }
        });
    msg::send(ch, KIND_UNION, &out).await
}

/// The learner's side of the union: the provider's items outside the
/// intersection.
pub async fn union_learn(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    width: usize,
) -> Result<Vec<Vec<u8>>, Error> {
    let n = shares.len();
    let Either::Received(ots) = rots.one_way(ch, n, false).await? else {
        return Err(Error::Config("union roles out of step".into()));
    };
    let mut flips = ots.choices.clone();
    flips.xor_assign(shares);
    msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
    let slot = width + 3;
    let mut all = recv_exact(ch, KIND_UNION, 2 * n * slot).await?;
    all.par_chunks_mut(2 * slot)
        .enumerate()
        .for_each(|(i, pair)| {
            let at = usize::from(shares.get(i)) * slot;
            xor_stream(ots.chosen[i], &mut pair[at..at + slot]);
        });
    let mut items = Vec::new();
    for (i, pair) in all.chunks(2 * slot).enumerate() {
        let at = usize::from(shares.get(i)) * slot;
        let m = &pair[at..at + slot];
        if m[0] == 1 {
            let len = u16::from_le_bytes([m[1], m[2]]) as usize;
            if len > width {
                return Err(Violation::Invalid("union item length").into());
            }
            items.push(m[3..3 + len].to_vec());
        }
    }
    Ok(items)
}

/// XORs `data` with the stream `H(0, key), H(1, key), ...` of the TCCR
/// hash of fixed-key AES (two AES calls per block, no key schedule per
/// message: the union sends two keyed messages per bin).
fn xor_stream(key: u128, data: &mut [u8]) {
    // A slot is at most MAX_UNION_ITEM + 3 bytes: 65 blocks on the stack.
    let mut stream = [0u128; (msg::MAX_UNION_ITEM as usize + 3).div_ceil(16)];
    let stream = &mut stream[..data.len().div_ceil(16)];
    stream.fill(key);
    aes_hash::tccr_many(stream, |i| i as u128);
    for (d, s) in data.chunks_mut(16).zip(stream.iter()) {
        for (d, s) in d.iter_mut().zip(s.to_le_bytes()) {
            *d ^= s;
        }
    }
}
