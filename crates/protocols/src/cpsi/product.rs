//! Oblivious products for the inner product over the intersection: per
//! bin, additive shares mod 2^64 of `a_i·y_i`, where the sender holds
//! `a_i` (its share of its own value in the bin) and the receiver
//! `y_i < 2^B` (its own value in the bin).
//!
//! Gilboa's multiplication on forward random OTs, one per bit of `y_i`:
//! the receiver chooses with bit `y_ij` (a flip turns the random choice
//! into it); the sender, with `K_0`, `K_1` the keys of choices 0 and 1,
//! keeps `r_j = K_0 mod 2^(64-j)` and sends the correction
//! `e_j = r_j + a_i - K_1 mod 2^(64-j)`, so the receiver gets
//! `r_j + y_ij·a_i mod 2^(64-j)`. Shifted by `j` and summed over the bits,
//! the two parties hold `-Σ 2^j r_j` and `Σ 2^j (r_j + y_ij·a_i)`: shares
//! of `a_i·y_i` mod 2^64 (the bits above `64 - j` of term `j` fall off the
//! word, which is why correction `j` needs only `64 - j` bits).
//!
//! Cost per bin: `B` random OTs and `Σ_j ⌈(64-j)/8⌉` bytes (208 bytes for
//! `B = 32`). Semi-honest: the flips are uniformly random to the sender,
//! and each correction is masked by the hash of a key the receiver lacks.

use psikit_transport::Channel;
use rayon::prelude::*;

use super::bits::Bits;
use super::messages::{self as msg, recv_exact, KIND_CORRECTIONS, KIND_FLIPS};
use super::rot::{recv_flips, Either, Rots, CHUNK};
use super::vocabulary::Role;
use crate::error::Error;

/// Bytes of correction `j` (`64 - j` bits).
fn width(j: u32) -> usize {
    (64 - j as usize).div_ceil(8)
}

/// `2^(64-j) - 1`.
fn mask(j: u32) -> u64 {
    u64::MAX >> j
}

/// Bytes of one bin's corrections for `bits`-bit factors.
fn bin_bytes(bits: u32) -> usize {
    (0..bits).map(width).sum()
}

/// This party's shares of `a_i·y_i` for every bin: `factors` are the
/// sender's `a` or the receiver's `y` (each below `2^bits`).
pub async fn multiply(
    ch: &mut Channel,
    rots: &mut Rots,
    me: Role,
    factors: &[u64],
    bits: u32,
) -> Result<Vec<u64>, Error> {
    if !(1..=64).contains(&bits) {
        return Err(Error::Internal("product bits out of range"));
    }
    let per_chunk = (CHUNK / bits as usize).max(1);
    let mut shares = Vec::with_capacity(factors.len());
    for chunk in factors.chunks(per_chunk) {
        let n = chunk.len() * bits as usize;
        shares.extend(match (me, rots.one_way(ch, n, true).await?) {
            (Role::Sender, Either::Sent(ots)) => {
                let flips = recv_flips(ch, n).await?;
                let (shares, corrections) = sender_chunk(&ots.m0, &ots.m1, &flips, chunk, bits);
                msg::send(ch, KIND_CORRECTIONS, &corrections).await?;
                shares
            }
            (Role::Receiver, Either::Received(ots)) => {
                let mut flips = ots.choices.clone();
                flips.xor_assign(&choices(chunk, bits));
                msg::send(ch, KIND_FLIPS, &flips.to_bytes()).await?;
                let len = chunk.len() * bin_bytes(bits);
                let corrections = recv_exact(ch, KIND_CORRECTIONS, len).await?;
                receiver_chunk(&ots.chosen, &corrections, chunk, bits)
            }
            _ => return Err(Error::Config("product roles out of step".into())),
        });
    }
    Ok(shares)
}

/// The receiver's choice bits: bit `j` of `y_i` at OT `i·bits + j`.
fn choices(ys: &[u64], bits: u32) -> Bits {
    Bits::from_bools(
        ys.iter()
            .flat_map(|y| (0..bits).map(move |j| y >> j & 1 == 1)),
    )
}

/// The sender's shares and corrections for the bins of one chunk.
fn sender_chunk(
    m0: &[u128],
    m1: &[u128],
    flips: &Bits,
    a: &[u64],
    bits: u32,
) -> (Vec<u64>, Vec<u8>) {
    let b = bits as usize;
    let mut corrections = vec![0u8; a.len() * bin_bytes(bits)];
    let shares = corrections
        .par_chunks_mut(bin_bytes(bits))
        .zip(a.par_iter())
        .enumerate()
        .map(|(i, (out, &a))| {
            let (mut share, mut at) = (0u64, 0);
            for j in 0..bits {
                let ot = i * b + j as usize;
                let (k0, k1) = match flips.get(ot) {
                    false => (m0[ot] as u64, m1[ot] as u64),
                    true => (m1[ot] as u64, m0[ot] as u64),
                };
                let r = k0 & mask(j);
                let e = r.wrapping_add(a).wrapping_sub(k1) & mask(j);
                share = share.wrapping_sub(r << j);
                out[at..at + width(j)].copy_from_slice(&e.to_le_bytes()[..width(j)]);
                at += width(j);
            }
            share
        })
        .collect();
    (shares, corrections)
}

/// The receiver's shares for the bins of one chunk.
fn receiver_chunk(chosen: &[u128], corrections: &[u8], ys: &[u64], bits: u32) -> Vec<u64> {
    let b = bits as usize;
    corrections
        .par_chunks(bin_bytes(bits))
        .zip(ys.par_iter())
        .enumerate()
        .map(|(i, (row, &y))| {
            let (mut share, mut at) = (0u64, 0);
            for j in 0..bits {
                let mut e = [0u8; 8];
                e[..width(j)].copy_from_slice(&row[at..at + width(j)]);
                at += width(j);
                let k = chosen[i * b + j as usize] as u64;
                // Bit `j` of the value is secret: added by a mask.
                let bit = u64::from(y >> j & 1 == 1);
                let v = k.wrapping_add(u64::from_le_bytes(e) & bit.wrapping_neg());
                share = share.wrapping_add((v & mask(j)) << j);
            }
            share
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The chunk arithmetic on hand-made random OTs: shares add up to the
    /// products, for edge values and every bit width.
    #[test]
    fn shares_add_up_to_the_products() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for bits in [1, 7, 32, 63, 64] {
            let n = 40;
            let top = u64::MAX >> (64 - bits);
            let a: Vec<u64> = (0..n)
                .map(|i| match i {
                    0 => 0,
                    1 => u64::MAX,
                    _ => rng.gen(),
                })
                .collect();
            let y: Vec<u64> = (0..n)
                .map(|i| match i {
                    2 => 0,
                    3 => top,
                    _ => rng.gen::<u64>() & top,
                })
                .collect();
            let ots = n * bits as usize;
            let (m0, m1): (Vec<u128>, Vec<u128>) = (0..ots)
                .map(|_| (rng.gen::<u128>(), rng.gen::<u128>()))
                .unzip();
            let random_choices = Bits::from_bools((0..ots).map(|_| rng.gen::<bool>()));
            let chosen: Vec<u128> = (0..ots)
                .map(|k| match random_choices.get(k) {
                    true => m1[k],
                    false => m0[k],
                })
                .collect();
            let mut flips = random_choices.clone();
            flips.xor_assign(&choices(&y, bits));
            let (s, corrections) = sender_chunk(&m0, &m1, &flips, &a, bits);
            assert_eq!(corrections.len(), n * bin_bytes(bits));
            let t = receiver_chunk(&chosen, &corrections, &y, bits);
            for i in 0..n {
                assert_eq!(
                    s[i].wrapping_add(t[i]),
                    a[i].wrapping_mul(y[i]),
                    "bits {bits} bin {i}"
                );
            }
        }
    }

    #[test]
    fn corrections_of_32_bit_factors_take_208_bytes() {
        assert_eq!(bin_bytes(32), 208);
        assert_eq!(bin_bytes(64), 288);
    }
}
