//! Step 2 of the framework (paper §3.1, Fig. 2): the batch OPPRF, built
//! as Rindal-Schoppmann (Eurocrypt 2021) do: the VOLE-based OPRF of
//! VOLE-PSI on the receiver's `M` bin keys, then a "hint" OKVS from the
//! sender that programs the function at its own bin keys.
//!
//! The receiver gets `F(k)` for each of its keys; the sender can evaluate
//! `F` anywhere. The sender programs its `(key, value)` pairs by encoding
//! `key ↦ value ⊕ H_j(F(key))` into an OKVS and sending it; the receiver
//! decodes at its keys and removes its own `H_j(F(key))`: programmed keys
//! give the value, others a pseudorandom one. `H_0` masks tags and
//! `H_{1+j}` value column `j` (the TCCR hash of fixed-key AES with those
//! tweaks), so all can be programmed under one OPRF.
//!
//! The OKVS is GF(2)-linear (a decoded value is the XOR of table entries),
//! so the sender sends each hint entry truncated to the bytes the
//! receiver keeps: `⌈ℓ/8⌉` per tag and 8 per value ([`Layout`]).

use psikit_ot::silent::{Pending, SilentReceiver, SilentSender, Times};
use psikit_ot::{aes_hash, gf128};
use psikit_structures::okvs::{Okvs, OkvsError, OkvsParams};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;
use rayon::prelude::*;
use zeroize::Zeroizing;

use super::messages::{self as msg, HintSeed};
use crate::error::{Error, Violation};
use crate::vole_psi::oprf;

/// Blocks per parallel task.
const CHUNK: usize = 1 << 14;

/// Mask tweak of tags.
const TAGS: u128 = 0;
/// Mask tweak of value column 0 (column `j` uses `VALUES + j`).
const VALUES: u128 = 1;

/// `H_tweak(F(k))` for each OPRF output.
fn masks(outputs: &[u128], tweak: u128) -> Vec<u128> {
    let mut m = outputs.to_vec();
    m.par_chunks_mut(CHUNK)
        .for_each(|c| aes_hash::tccr_many(c, |_| tweak));
    m
}

/// Bits of the OPRF's VOLE values and OKVS entries (RR22's subfield VOLE,
/// as in VOLE-PSI's low-communication mode), for a sender that programs
/// `programmed` keys (three per item). The receiver learns `F(k)` at a
/// key `k` it did not encode only where its OKVS happens to decode to
/// `h(k)`, with probability `2^-bits` per key; knowing `F(k)` would unmask
/// `k`'s hint entry, its bin's tag, and so tell whether the receiver's own
/// item of that bin is shared. Over all programmed keys this stays below
/// `2^-σ` at `σ + ⌈log2 programmed⌉` bits: 62 at 2^20 items, half the
/// masked OKVS of full 128-bit values.
pub fn oprf_bits(programmed: u64, sigma: u32) -> u32 {
    oprf::subfield_bits(programmed, sigma)
}

/// Bytes of a masked OKVS entry of `bits`-bit values.
fn masked_width(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// The receiver's first step of the OPRF over its silent session `vole`,
/// on values of [`oprf_bits`] bits: the VOLE's base correlations, which
/// need only the table's size (public), so the receiver can hash its
/// items while the sender makes the VOLE.
pub async fn oprf_start(
    ch: &mut Channel,
    vole: &mut SilentReceiver,
    okvs: &Okvs,
    bits: u32,
) -> Result<Pending<u128>, Error> {
    let m = okvs.params().table_len();
    Ok(vole.start_vole(ch, m, bits, &mut OsRng).await?)
}

/// The rest of the receiver's OPRF ([`oprf_start`]): its outputs `F(k)`
/// at `keys`, and where its VOLE's time went.
pub async fn oprf_receive(
    ch: &mut Channel,
    mut pending: Pending<u128>,
    okvs: &Okvs,
    keys: &[u128],
    bits: u32,
) -> Result<(Vec<u128>, Times), Error> {
    pending.receive_trees(ch).await?;
    // Every entry cut to `bits`: decoding XORs entries, so each bit is a
    // system of its own and the cut table still decodes to the values; the
    // encoder's random free entries are cut with it.
    let mut table = encode(okvs, keys, &oprf::okvs_values(keys, bits))?;
    let mask = u128::MAX >> (128 - bits);
    table.iter_mut().for_each(|p| *p &= mask);
    let v = pending.finish(ch).await?;
    let mut masked = table;
    masked
        .par_iter_mut()
        .zip(v.c.par_iter())
        .for_each(|(p, c)| *p ^= c);
    let width = masked_width(bits);
    msg::send(ch, msg::KIND_MASKED, &msg::pack_blocks(&masked, width)).await?;
    drop(masked);
    let mut out = vec![0u128; keys.len()];
    okvs.decode(&v.a, keys, &mut out)?;
    oprf::output_hash(&mut out);
    Ok((out, v.times))
}

/// The sender's side of the OPRF: a key with which to evaluate `F`.
pub struct OprfKey {
    okvs: Okvs,
    delta: u128,
    k: Vec<u128>,
    /// Bits of the VOLE's values ([`oprf_bits`]).
    bits: u32,
}

/// The sender's VOLE for the OPRF, its first step ([`oprf_vole`]).
pub struct OprfVole {
    b: Zeroizing<Vec<u128>>,
    delta: u128,
    bits: u32,
}

/// The sender's first step of the OPRF over its silent session `vole`:
/// the VOLE for the receiver's `okvs`, on values of `bits` bits. It needs
/// none of the sender's items, which it can hash while the receiver
/// encodes its table.
pub async fn oprf_vole(
    ch: &mut Channel,
    vole: &mut SilentSender,
    okvs: &Okvs,
    bits: u32,
) -> Result<OprfVole, Error> {
    let m = okvs.params().table_len();
    let b = vole.vole(ch, m, bits, &mut OsRng).await?;
    Ok(OprfVole {
        b,
        delta: vole.delta(),
        bits,
    })
}

/// The rest of the sender's OPRF ([`oprf_vole`]): receives the
/// receiver's masked table for `okvs` and makes the key.
pub async fn oprf_send(ch: &mut Channel, vole: OprfVole, okvs: Okvs) -> Result<OprfKey, Error> {
    let OprfVole { b, delta, bits } = vole;
    let m = okvs.params().table_len();
    let width = masked_width(bits);
    let masked = msg::recv_exact(ch, msg::KIND_MASKED, m * width).await?;
    let masked = msg::unpack_blocks(&masked, width);
    if masked.iter().any(|p| bits < 128 && p >> bits != 0) {
        return Err(Violation::Invalid("OPRF table entry wider than its bits").into());
    }
    // K = B + Δ·(P + C) = A + Δ·P.
    let mut k = b.to_vec();
    k.par_chunks_mut(CHUNK)
        .zip(masked.par_chunks(CHUNK))
        .for_each(|(k, pc)| gf128::mul_acc(delta, pc, k));
    Ok(OprfKey {
        okvs,
        delta,
        k,
        bits,
    })
}

impl OprfKey {
    /// `F(k)` at each key: `H(Decode(K, k) + Δ·h(k))`.
    pub fn eval(&self, keys: &[u128]) -> Result<Vec<u128>, Error> {
        let mut out = vec![0u128; keys.len()];
        self.okvs.decode(&self.k, keys, &mut out)?;
        let hashed = oprf::okvs_values(keys, self.bits);
        out.par_chunks_mut(CHUNK)
            .zip(hashed.par_chunks(CHUNK))
            .for_each(|(d, h)| gf128::mul_acc(self.delta, h, d));
        oprf::output_hash(&mut out);
        Ok(out)
    }
}

/// What the sender programs: per key its tag (`ℓ` bits) and, per value
/// column, a 64-bit value.
pub struct Program<'a> {
    pub keys: &'a [u128],
    pub tags: &'a [u128],
    /// Value columns, each with one value per key.
    pub values: &'a [Vec<u64>],
}

/// Bytes of a tag hint entry.
pub fn tag_width(ell: u32) -> usize {
    ell.div_ceil(8) as usize
}

/// The hint OKVS for `capacity` programmed keys (the receiver's bound is
/// three per sender item), failing with probability at most `2^-sigma`.
pub fn hint_okvs(capacity: usize, seed: [u8; 16], sigma: u32) -> Result<Okvs, Error> {
    let params = OkvsParams::with_security(capacity.max(1), sigma)?;
    Ok(Okvs::new(params, seed))
}

/// How a hint of `ℓ`-bit tags and `k` 64-bit value columns fills its OKVS
/// tables (128-bit entries over the same keys and OKVS): values go two per
/// table after the tags' table, except that a tag of at most 64 bits
/// shares its table with the first value (tag below bit 64, value above).
#[derive(Clone, Copy)]
struct Layout {
    ell: u32,
    k: usize,
}

impl Layout {
    /// Whether the tag and the first value share table 0.
    fn shared(self) -> bool {
        self.k > 0 && self.ell <= 64
    }

    /// Value columns in tables after the first.
    fn apart(self) -> usize {
        self.k - usize::from(self.shared())
    }

    fn tables(self) -> usize {
        1 + self.apart().div_ceil(2)
    }

    /// Where value column `j` lives: its table and the bit it starts at.
    fn slot(self, j: usize) -> (usize, u32) {
        match self.shared() {
            true if j == 0 => (0, 64),
            true => (1 + (j - 1) / 2, 64 * ((j - 1) % 2) as u32),
            false => (1 + j / 2, 64 * (j % 2) as u32),
        }
    }

    /// The bits of table 0 the tag holds.
    fn tag_mask(self) -> u128 {
        match self.shared() {
            true => u128::from(u64::MAX),
            false => u128::MAX,
        }
    }

    /// Bytes sent per entry of table `t`.
    fn width(self, t: usize) -> usize {
        match t {
            0 if self.shared() => 16,
            0 => tag_width(self.ell),
            _ if 2 * t <= self.apart() => 16,
            _ => 8,
        }
    }
}

/// The sender programs `F` and sends the hint: OKVS tables whose entries
/// hold the masked tag and the masked values (`H_{1+j}` masks column `j`).
pub async fn program(
    ch: &mut Channel,
    key: &OprfKey,
    p: &Program<'_>,
    capacity: usize,
    ell: u32,
    sigma: u32,
) -> Result<(), Error> {
    let layout = Layout {
        ell,
        k: p.values.len(),
    };
    let okvs = hint_okvs(capacity, OsRng.gen(), sigma)?;
    ch.send_msg(&HintSeed(okvs.seed())).await?;
    let f = key.eval(p.keys)?;
    let mut blocks = vec![masks(&f, TAGS)];
    let low = layout.tag_mask();
    blocks[0]
        .par_iter_mut()
        .zip(p.tags.par_iter())
        .for_each(|(m, t)| *m = (*m ^ t) & low);
    blocks.resize_with(layout.tables(), || vec![0u128; p.keys.len()]);
    for (j, column) in p.values.iter().enumerate() {
        let (t, shift) = layout.slot(j);
        blocks[t]
            .par_iter_mut()
            .zip(
                masks(&f, VALUES + j as u128)
                    .par_iter()
                    .zip(column.par_iter()),
            )
            .for_each(|(b, (m, x))| *b |= u128::from(*m as u64 ^ x) << shift);
    }
    let mut hint = Vec::new();
    for (t, values) in blocks.iter().enumerate() {
        let table = encode(&okvs, p.keys, values)?;
        hint.extend(msg::pack_blocks(&table, layout.width(t)));
    }
    msg::send(ch, msg::KIND_HINT, &hint).await
}

/// What the receiver gets per bin: the programmed tag (`ℓ` bits) and
/// values where its key was programmed, pseudorandom ones elsewhere.
pub struct Programmed {
    pub tags: Vec<u128>,
    /// Per value column, one value per key.
    pub values: Vec<Vec<u64>>,
}

/// The receiver reads the hint of `k` value columns and evaluates it at
/// its keys.
pub async fn receive_program(
    ch: &mut Channel,
    keys: &[u128],
    f: &[u128],
    capacity: usize,
    ell: u32,
    k: usize,
    sigma: u32,
) -> Result<Programmed, Error> {
    let layout = Layout { ell, k };
    let HintSeed(seed) = ch.recv_msg(()).await?;
    let okvs = hint_okvs(capacity, seed, sigma)?;
    let len = okvs.params().table_len();
    let widths: Vec<usize> = (0..layout.tables()).map(|t| layout.width(t)).collect();
    let hint = msg::recv_exact(ch, msg::KIND_HINT, len * widths.iter().sum::<usize>()).await?;
    let mut at = 0;
    let mut decoded = Vec::with_capacity(widths.len());
    for w in widths {
        let table = msg::unpack_blocks(&hint[at..at + len * w], w);
        decoded.push(decode(&okvs, &table, keys)?);
        at += len * w;
    }
    let tag_mask = (1u128 << ell) - 1;
    let tags = decoded[0]
        .par_iter()
        .zip(masks(f, TAGS).par_iter())
        .map(|(t, m)| (t ^ m) & tag_mask)
        .collect();
    let values = (0..k)
        .map(|j| {
            let (t, shift) = layout.slot(j);
            decoded[t]
                .par_iter()
                .zip(masks(f, VALUES + j as u128).par_iter())
                .map(|(v, m)| (v >> shift) as u64 ^ *m as u64)
                .collect()
        })
        .collect();
    Ok(Programmed { tags, values })
}

fn decode(okvs: &Okvs, table: &[u128], keys: &[u128]) -> Result<Vec<u128>, Error> {
    let mut out = vec![0u128; keys.len()];
    okvs.decode(table, keys, &mut out)?;
    Ok(out)
}

/// An OKVS encoding; a failure (probability below `2^-40`) ends the run
/// with an error asking to run again (fresh seeds then).
fn encode(okvs: &Okvs, keys: &[u128], values: &[u128]) -> Result<Vec<u128>, Error> {
    match okvs.encode(keys, values, &mut OsRng) {
        Ok(table) => Ok(table),
        Err(OkvsError::EncodeFailed(why)) => Err(Error::Config(format!(
            "the OKVS could not encode this set ({why}; probability below 2^-40): run again"
        ))),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oprf_bits_cover_every_programmed_key_at_sigma() {
        // 3·2^20 keys: 22 bits of them, plus σ.
        assert_eq!(oprf_bits(3 << 20, 40), 62);
        assert_eq!(oprf_bits(1 << 20, 40), 61);
        assert_eq!(oprf_bits(0, 40), 41);
        assert_eq!(oprf_bits(u64::MAX, 80), 128);
        for programmed in [1u64, 7, 1000, 3 << 20, 1 << 40] {
            let bits = oprf_bits(programmed, 40);
            assert!(programmed as f64 * 2f64.powi(-(bits as i32)) <= 2f64.powi(-40));
        }
    }
}
