//! The CGS equality's leaves on random 1-out-of-2 OTs: shares of "these
//! 4-bit blocks are equal" from a 1-out-of-16 OT built from four random
//! OTs, one per bit of the block (Naor and Pinkas's 1-out-of-N from
//! 1-out-of-2). Then [`gmw::and_tree`] joins the `⌈ℓ/4⌉` leaves.
//!
//! Against GMW bit by bit (two random OTs per AND gate, `ℓ - 1` gates),
//! this spends one random OT per bit plus the tree's `⌈ℓ/4⌉ - 1` gates:
//! at `ℓ = 17`, 25 OTs per bin instead of 32, for about 40 more bits of
//! traffic per bin (the 16-bit masked messages and the flips). The
//! paper's Table 2 pairs CGS only with KK13; built on the random OTs we
//! already have, the leaves cost fewer OTs than GMW's gates.
//!
//! Per bin and block of `r ≤ 4` bits, with the forward random OTs
//! `(m0_p, m1_p)` / `(c_p, m_{c_p})` for the block's bits `p`:
//! * the chooser (circuit PSI's receiver, holding `b`) sends flips
//!   `d_p = c_p ⊕ b_p`, so that its key of bit `p` is `K_p(b_p)` where
//!   `K_p(v) = m_{v ⊕ d_p}`;
//! * the OT sender (the leader, holding `a`) draws a share bit `s` and
//!   sends, for each `j < 2^r`, `s ⊕ [a = j] ⊕ pad_j` with
//!   `pad_j = ⊕_p bit_j(K_p(j_p))`;
//! * the chooser removes `pad_b` (it holds every `K_p(b_p)`) and keeps
//!   `s ⊕ [a = b]`.
//!
//! For `j ≠ b` some bit `p` has `j_p ≠ b_p`, so `pad_j` contains bit `j`
//! of a key the chooser lacks; distinct `j` use distinct bits of the
//! (hashed, pseudorandom) OT messages, so the pads are independent. The
//! flips are uniformly random to the sender. Semi-honest, like the rest.

use psikit_transport::Channel;
use rand::Rng;
use rayon::prelude::*;

use super::bits::Bits;
use super::cgs::{blocks, pack, BLOCK};
use super::gmw::{self, Triples};
use super::messages::{recv_exact, send, KIND_CHOSEN, KIND_FLIPS};
use super::rng::rng;
use super::rot::{recv_flips, Either, Rots};
use crate::error::{Error, Violation};

/// Forward random OTs the leaves of `bins` values of `ell` bits use: one
/// per bit. (The blocks and the tree's triples are CGS's: [`blocks`],
/// [`super::cgs::triples_needed`].)
pub fn leaf_ots(bins: usize, ell: u32) -> usize {
    bins * ell as usize
}

/// Shares of `[x_i = y_i]` for every bin, where this party holds the
/// `ell`-bit `values` (the leader's `x`, the other's `y`): the leaves on
/// [`leaf_ots`] forward random OTs, then the AND tree on `triples` (at
/// least [`super::cgs::triples_needed`]`(values.len(), ell)`).
pub async fn equal(
    ch: &mut Channel,
    rots: &mut Rots,
    triples: &mut Triples,
    values: &[u128],
    ell: u32,
    leader: bool,
) -> Result<Bits, Error> {
    let bins = values.len();
    let planes = match collect(ch, rots, leaf_ots(bins, ell), leader).await? {
        Keys::Sender(keys) => {
            let flips = recv_flips(ch, keys.len()).await?;
            offer(ch, &keys, &flips, values, ell).await?
        }
        Keys::Chooser { choices, chosen } => choose(ch, &choices, &chosen, values, ell).await?,
    };
    gmw::and_tree(ch, triples, planes, bins, leader).await
}

/// What the leaves keep of each random OT: the 16 low bits of each
/// message (one bit per message of a 1-out-of-16 OT).
enum Keys {
    /// `m0 | m1 << 16` per OT.
    Sender(Vec<u32>),
    Chooser {
        choices: Bits,
        chosen: Vec<u16>,
    },
}

/// `n` forward random OTs (the leader sends), chunk by chunk, keeping 16
/// bits per message.
async fn collect(ch: &mut Channel, rots: &mut Rots, n: usize, leader: bool) -> Result<Keys, Error> {
    let (mut sent, mut choices, mut chosen) = (Vec::new(), Bits::default(), Vec::new());
    let low16 = |m: &u128| u32::from(*m as u16);
    rots.forward_chunks(ch, n, |ots| match ots.whole() {
        Either::Sent(s) => {
            sent.extend(
                s.m0.iter()
                    .zip(&s.m1)
                    .map(|(a, b)| low16(a) | low16(b) << 16),
            );
        }
        Either::Received(r) => {
            choices.extend(&r.choices);
            chosen.extend(r.chosen.iter().map(|m| *m as u16));
        }
    })
    .await?;
    Ok(match leader {
        true => Keys::Sender(sent),
        false => Keys::Chooser { choices, chosen },
    })
}

/// `SELECT[t]` has bit `j` set for the messages `j` whose bit `t` is 1.
const SELECT: [u64; 4] = [0xaaaa, 0xcccc, 0xf0f0, 0xff00];

/// Bits `[start, start + r)` of a value, the block.
fn block(v: u128, start: u32, r: u32) -> usize {
    (v >> start) as usize & ((1 << r) - 1)
}

/// The leader's side: per block, its share bits and the masked messages.
async fn offer(
    ch: &mut Channel,
    keys: &[u32],
    flips: &Bits,
    values: &[u128],
    ell: u32,
) -> Result<Vec<Bits>, Error> {
    let (bins, l) = (values.len(), ell as usize);
    let mut rng = rng()?;
    let mut planes = Vec::with_capacity(blocks(ell));
    for k in 0..blocks(ell) as u32 {
        let (start, r) = (k * BLOCK, (ell - k * BLOCK).min(BLOCK));
        let share: Vec<bool> = (0..bins).map(|_| rng.gen()).collect();
        let all = (1u64 << (1 << r)) - 1;
        let rows: Vec<u64> = (0..bins)
            .into_par_iter()
            .map(|i| {
                // All 2^r pads at once: bit j of K_t(j_t) for each bit t,
                // the messages j with j_t = 1 selected by `SELECT[t]`.
                let pads = (0..r).fold(0u64, |pads, t| {
                    let ot = i * l + (start + t) as usize;
                    let (k0, k1) = (u64::from(keys[ot] & 0xffff), u64::from(keys[ot] >> 16));
                    let (k0, k1) = if flips.get(ot) { (k1, k0) } else { (k0, k1) };
                    pads ^ (k0 & !SELECT[t as usize]) ^ (k1 & SELECT[t as usize])
                });
                let eq = 1u64 << block(values[i], start, r);
                let shares = if share[i] { all } else { 0 };
                (shares ^ eq ^ pads) & all
            })
            .collect();
        send(ch, KIND_CHOSEN, &pack(&rows, 1 << r).to_bytes()).await?;
        planes.push(plane(share));
    }
    Ok(planes)
}

/// The chooser's side: it sends the flips that make its OT keys those of
/// its blocks' bits, then unmasks the message of its block.
async fn choose(
    ch: &mut Channel,
    choices: &Bits,
    chosen: &[u16],
    values: &[u128],
    ell: u32,
) -> Result<Vec<Bits>, Error> {
    let (bins, l) = (values.len(), ell as usize);
    let mut flips = choices.clone();
    flips.xor_assign(&Bits::from_bools(
        values
            .iter()
            .flat_map(|v| (0..ell).map(move |p| v >> p & 1 == 1)),
    ));
    send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
    let mut planes = Vec::with_capacity(blocks(ell));
    for k in 0..blocks(ell) as u32 {
        let (start, r) = (k * BLOCK, (ell - k * BLOCK).min(BLOCK));
        let width = 1usize << r;
        let bytes = recv_exact(ch, KIND_CHOSEN, (bins * width).div_ceil(8)).await?;
        let masked = Bits::from_bytes(&bytes, bins * width)
            .ok_or(Violation::Invalid("CGS leaf messages"))?;
        let share: Vec<bool> = (0..bins)
            .into_par_iter()
            .map(|i| {
                let b = block(values[i], start, r);
                let pad = (0..r as usize).fold(0, |pad, t| {
                    pad ^ chosen[i * l + start as usize + t] >> b & 1
                });
                masked.get(i * width + b) ^ (pad == 1)
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
    use crate::cpsi::rot::Side;
    use crate::cpsi::vocabulary::OtKind;
    use psikit_ot::silent::{SilentReceiver, SilentSender};
    use psikit_ot::{ExtConfig, Security, SessionId};
    use psikit_transport::Limits;
    use rand::rngs::OsRng;

    /// One party's equality shares of its `values` on fresh silent OTs.
    async fn party(mut ch: Channel, leader: bool, values: Vec<u128>, ell: u32) -> Bits {
        let (sid, ext) = (SessionId::new(b"leaves test"), ExtConfig::default());
        let s = Security::SemiHonest;
        let side = match leader {
            true => Side::SilentSender(
                SilentSender::setup(&mut ch, &sid, s, ext.clone(), &mut OsRng)
                    .await
                    .expect("silent sender"),
            ),
            false => Side::SilentReceiver(
                SilentReceiver::setup(&mut ch, &sid, s, ext.clone(), &mut OsRng)
                    .await
                    .expect("silent receiver"),
            ),
        };
        let mut rots = Rots::new(&mut ch, &sid, OtKind::Silent, leader, &ext, side)
            .await
            .expect("OTs");
        let needed = super::super::cgs::triples_needed(values.len(), ell);
        let mut triples = Triples::generate(&mut rots, &mut ch, needed)
            .await
            .expect("triples");
        equal(&mut ch, &mut rots, &mut triples, &values, ell, leader)
            .await
            .expect("equal")
    }

    /// Every pair of 4-bit values, and values one bit apart, for lengths
    /// with a full, a short and no short last block: equal exactly when
    /// the values are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shares_of_equality_are_exact() {
        for ell in [4u32, 6, 7, 17] {
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
            let task = tokio::spawn(party(a, true, x.clone(), ell));
            let mut shares = party(b, false, y.clone(), ell).await;
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
