//! Computing on the membership shares (paper §3.3): weighted sums (the
//! cardinality and the sums of either party's values), the threshold
//! test, and the union.
//!
//! Weighted sums use one derandomised random OT per bin, with the party
//! holding the weights `x` as OT sender: the chooser's bit is its share
//! `s'`, the messages `(s ⊕ c)·x + r` for `c = 0, 1`, so the chooser gets
//! `b·x + r` with `b = s ⊕ s'` the membership bit and the holder keeps
//! `-r` (the method of Garimella et al. that the paper adapts). Summing
//! gives additive shares of `Σ b·x` mod 2^64 (sums wrap at 2^64).

use psikit_ot::aes_hash::Prg;
use psikit_transport::Channel;
use rand::Rng;

use super::bits::Bits;
use super::gmw::{self, Triples};
use super::messages::{self as msg, recv_exact, Share, KIND_FLIPS, KIND_PADS, KIND_UNION};
use super::rot::{Either, Rots};
use crate::{Error, Violation};

/// This party's additive share of `Σ_i b_i·x_i` mod 2^64, where `b_i` is
/// bin `i`'s membership (shared as `shares`) and the weights are held by
/// the leader if `leader_holds`: `x` is `Some` exactly at the holder.
pub async fn weighted_sum(
    ch: &mut Channel,
    rots: &mut Rots,
    shares: &Bits,
    x: Option<&[u64]>,
    leader_holds: bool,
) -> Result<u64, Error> {
    let n = shares.len();
    match rots.one_way(ch, n, leader_holds).await? {
        Either::Sent(ots) => {
            let x = x
                .filter(|x| x.len() == n)
                .ok_or_else(|| Error::Config("one weight per bin is needed".into()))?;
            let mut rng = super::rng()?;
            let flips = recv_flips(ch, n).await?;
            let mut pads = Vec::with_capacity(n * 16);
            let mut share = 0u64;
            for (i, &x) in x.iter().enumerate() {
                let r: u64 = rng.gen();
                share = share.wrapping_sub(r);
                let f = flips.get(i);
                let s = shares.get(i);
                for c in [false, true] {
                    let m = if c ^ f { ots.m1[i] } else { ots.m0[i] } as u64;
                    let weight = if s ^ c { x } else { 0 };
                    pads.extend_from_slice(&weight.wrapping_add(r).wrapping_add(m).to_le_bytes());
                }
            }
            msg::send(ch, KIND_PADS, &pads).await?;
            Ok(share)
        }
        Either::Received(ots) => {
            let mut flips = ots.choices.clone();
            flips.xor_assign(shares);
            msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
            let pads = recv_exact(ch, KIND_PADS, n * 16).await?;
            let mut share = 0u64;
            for i in 0..n {
                let at = 16 * i + 8 * usize::from(shares.get(i));
                let pad = u64::from_le_bytes(word(&pads[at..at + 8]));
                share = share.wrapping_add(pad.wrapping_sub(ots.chosen[i] as u64));
            }
            Ok(share)
        }
    }
}

fn word(b: &[u8]) -> [u8; 8] {
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
    let mut out = Vec::with_capacity(2 * n * slot);
    for (i, item) in items.iter().enumerate() {
        for c in [false, true] {
            let key = if c ^ flips.get(i) {
                ots.m1[i]
            } else {
                ots.m0[i]
            };
            let mut m = vec![0u8; slot];
            // Sent when the bin's membership is 0 for this choice.
            if let (Some(item), false) = (item, shares.get(i) ^ c) {
                m[0] = 1;
                m[1..3].copy_from_slice(&(item.len() as u16).to_le_bytes());
                m[3..3 + item.len()].copy_from_slice(item);
            }
            xor_stream(key, &mut m);
            out.extend_from_slice(&m);
        }
    }
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
    let all = recv_exact(ch, KIND_UNION, 2 * n * slot).await?;
    let mut items = Vec::new();
    for i in 0..n {
        let at = (2 * i + usize::from(shares.get(i))) * slot;
        let mut m = all[at..at + slot].to_vec();
        xor_stream(ots.chosen[i], &mut m);
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

/// XORs `data` with the AES-CTR stream keyed by `key`.
fn xor_stream(key: u128, data: &mut [u8]) {
    let stream = Prg::new(key).blocks(0, data.len().div_ceil(16));
    for (d, s) in data
        .iter_mut()
        .zip(stream.iter().flat_map(|b| b.to_le_bytes()))
    {
        *d ^= s;
    }
}
