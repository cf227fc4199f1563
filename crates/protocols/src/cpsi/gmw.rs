//! Step 3 of the framework (paper §3.1-3.2): Boolean GMW on packed shares.
//! Beaver AND triples come from random OTs in both directions (two per
//! triple), the equality circuit is a tree of `ℓ - 1` ANDs per bin, and
//! the threshold test is an adder's top bit.
//!
//! A triple `c = a ∧ b` from two random OTs `i`, `j` in the same direction
//! (the sender sends both): a random OT computes shares of the receiver's
//! choice bit times the sender's `m0 ⊕ m1` (low bits), since
//! `m_choice = m0 ⊕ choice·(m0 ⊕ m1)`. Taking the receiver's
//! `a_R = choice_i`, `b_R = choice_j` and the sender's
//! `b_S = (m0 ⊕ m1)_i`, `a_S = (m0 ⊕ m1)_j`, both cross terms of
//! `a·b = a_S·b_S ⊕ a_R·b_R ⊕ a_R·b_S ⊕ a_S·b_R` are such products, so
//! `c_S = a_S·b_S ⊕ m0_i ⊕ m0_j` and `c_R = a_R·b_R ⊕ m_i ⊕ m_j`. The
//! paper's IKNP-GMW and Silent-GMW (Table 2) spend the same two OTs per
//! AND gate; triples let every layer of the circuit cost one round, and one
//! direction lets silent OT reuse the OPRF's session.

use psikit_transport::Channel;

use super::bits::Bits;
use super::messages::{recv_exact, send, KIND_OPEN};
use super::rot::{LowBits, Rots};
use crate::error::Error;

/// This party's shares of Beaver triples, consumed in order.
pub struct Triples {
    a: Bits,
    b: Bits,
    c: Bits,
    used: usize,
}

impl Triples {
    /// `count` triples (rounded up to whole words) from `2·count` forward
    /// random OTs, made a chunk at a time so memory stays at a few bits
    /// per triple.
    pub async fn generate(rots: &mut Rots, ch: &mut Channel, count: usize) -> Result<Self, Error> {
        let count = count.next_multiple_of(64);
        let mut t = Self {
            a: Bits::default(),
            b: Bits::default(),
            c: Bits::default(),
            used: 0,
        };
        rots.forward_chunks(ch, 2 * count, |ots| t.add(ots.low_bits()))
            .await?;
        Ok(t)
    }

    /// Triples made elsewhere (the CGS equality's, [`super::cgs`]): this
    /// party's shares `a`, `b`, `c` of equal lengths, a multiple of 64.
    pub fn from_shares(a: Bits, b: Bits, c: Bits) -> Self {
        debug_assert!(a.len() == b.len() && b.len() == c.len() && a.len().is_multiple_of(64));
        Self { a, b, c, used: 0 }
    }

    /// Turns a chunk of `2k` random OTs into `k` triples (OT `i` pairs
    /// with OT `k + i`).
    fn add(&mut self, ots: LowBits) {
        let halves = |x: &Bits| {
            let k = x.len() / 2;
            (x.slice_words(0, k), x.slice_words(k, k))
        };
        let (a, b, mut c) = match ots {
            LowBits::Sent { m0, mut m1 } => {
                m1.xor_assign(&m0);
                let (d0, d1) = halves(&m1);
                let (mut c, c1) = halves(&m0);
                c.xor_assign(&c1);
                (d1, d0, c)
            }
            LowBits::Received { choices, chosen } => {
                let (mut c, c1) = halves(&chosen);
                c.xor_assign(&c1);
                let (a, b) = halves(&choices);
                (a, b, c)
            }
        };
        for ((c, a), b) in c.words_mut().iter_mut().zip(a.words()).zip(b.words()) {
            *c ^= a & b;
        }
        self.a.extend(&a);
        self.b.extend(&b);
        self.c.extend(&c);
    }

    /// Triples still unused.
    pub fn remaining(&self) -> usize {
        self.a.len() - self.used
    }

    fn take(&mut self, n: usize) -> Result<(Bits, Bits, Bits), Error> {
        let n = n.next_multiple_of(64);
        if n > self.remaining() {
            return Err(Error::Config(format!(
                "circuit PSI ran out of AND triples ({} left, {n} needed)",
                self.remaining()
            )));
        }
        let start = self.used;
        self.used += n;
        Ok((
            self.a.slice_words(start, n),
            self.b.slice_words(start, n),
            self.c.slice_words(start, n),
        ))
    }
}

/// Number of triples [`and`] uses for vectors of `len` bits.
pub fn and_cost(len: usize) -> usize {
    len.next_multiple_of(64)
}

/// Shares of `x ∧ y` (same length), in one round: each party opens
/// `x ⊕ a` and `y ⊕ b`. The leader sends first and the other party
/// answers, so two large openings never wait on each other's buffers.
pub async fn and(
    ch: &mut Channel,
    triples: &mut Triples,
    x: &Bits,
    y: &Bits,
    leader: bool,
) -> Result<Bits, Error> {
    let len = x.len();
    let (a, b, c) = triples.take(len)?;
    let mut d = pad(x);
    d.xor_assign(&a);
    let mut e = pad(y);
    e.xor_assign(&b);
    let mut mine = d.clone();
    mine.extend(&e);
    let theirs = exchange(ch, &mine, leader).await?;
    let words = d.words().len();
    let mut z = c;
    for (i, z) in z.words_mut().iter_mut().enumerate() {
        let dd = d.words()[i] ^ theirs.words()[i];
        let ee = e.words()[i] ^ theirs.words()[words + i];
        *z ^= dd & b.words()[i] ^ ee & a.words()[i];
        if leader {
            *z ^= dd & ee;
        }
    }
    Ok(Bits::from_words(z.words().to_vec(), len))
}

/// Sends our opening and receives the peer's (same length).
async fn exchange(ch: &mut Channel, mine: &Bits, leader: bool) -> Result<Bits, Error> {
    if leader {
        send(ch, KIND_OPEN, &mine.to_bytes()).await?;
    }
    let bytes = recv_exact(ch, KIND_OPEN, mine.len().div_ceil(8)).await?;
    let theirs = Bits::from_bytes(&bytes, mine.len())
        .ok_or(crate::error::Violation::Invalid("AND opening"))?;
    if !leader {
        send(ch, KIND_OPEN, &mine.to_bytes()).await?;
    }
    Ok(theirs)
}

/// `x` padded with zeros to whole words (the triples are word-aligned).
fn pad(x: &Bits) -> Bits {
    Bits::from_words(x.words().to_vec(), x.len().next_multiple_of(64))
}

/// Triples [`equal`] uses for `bins` tags of `ell` bits.
pub fn equality_cost(bins: usize, ell: u32) -> usize {
    tree_cost(bins, ell as usize)
}

/// Triples [`and_tree`] uses for `leaves` planes of `bins` bits.
pub fn tree_cost(bins: usize, leaves: usize) -> usize {
    leaves.saturating_sub(1) * and_cost(bins)
}

/// Shares of `[v_i = v*_i]` for every bin, from the parties' `ell`-bit
/// tags (the leader's `v`, the other's `v*`): each party's share of bit
/// `j`'s equality is its own bit (the leader's negated), then a balanced
/// AND tree over the `ell` bits, one round per level (`⌈log2 ℓ⌉` rounds).
pub async fn equal(
    ch: &mut Channel,
    triples: &mut Triples,
    tags: &[u128],
    ell: u32,
    leader: bool,
) -> Result<Bits, Error> {
    let bins = tags.len();
    let width = bins.next_multiple_of(64);
    let layer: Vec<Bits> = (0..ell)
        .map(|j| {
            let mut plane = Bits::zeros(width);
            for (w, chunk) in plane.words_mut().iter_mut().zip(tags.chunks(64)) {
                for (k, t) in chunk.iter().enumerate() {
                    *w |= ((t >> j) as u64 & 1) << k;
                }
            }
            if leader {
                plane.not_assign();
            }
            plane
        })
        .collect();
    and_tree(ch, triples, layer, bins, leader).await
}

/// Shares of the AND over `planes` (each of `bins` bits padded to whole
/// words), bin by bin: a balanced tree, one round per level (`⌈log2⌉` of
/// the number of planes), all of a level's gates in one [`and`].
pub async fn and_tree(
    ch: &mut Channel,
    triples: &mut Triples,
    mut layer: Vec<Bits>,
    bins: usize,
    leader: bool,
) -> Result<Bits, Error> {
    let width = bins.next_multiple_of(64);
    while layer.len() > 1 {
        let pairs = layer.len() / 2;
        let odd = (layer.len() % 2 == 1).then(|| layer[2 * pairs].clone());
        let (mut x, mut y) = (Bits::default(), Bits::default());
        for p in 0..pairs {
            x.extend(&layer[2 * p]);
            y.extend(&layer[2 * p + 1]);
        }
        let z = and(ch, triples, &x, &y, leader).await?;
        layer = (0..pairs)
            .map(|p| z.slice_words(p * width, width))
            .collect();
        layer.extend(odd);
    }
    let all = layer.pop().unwrap_or_else(|| Bits::zeros(width));
    Ok(Bits::from_words(all.words().to_vec(), bins))
}

/// Triples [`top_bit_of_sum`] uses for `k`-bit words.
pub fn adder_cost(k: u32) -> usize {
    k as usize * and_cost(1)
}

/// Shares of the top bit of `(x + y) mod 2^k`, where the leader holds `x`
/// and the other party `y` in the clear: a ripple-carry adder on shares,
/// one AND (and one round) per bit,
/// `carry' = (x_j ⊕ carry)(y_j ⊕ carry) ⊕ carry`.
pub async fn top_bit_of_sum(
    ch: &mut Channel,
    triples: &mut Triples,
    mine: u64,
    k: u32,
    leader: bool,
) -> Result<bool, Error> {
    // Shares of x_j: (x_j, 0); of y_j: (0, y_j).
    let mut carry = false;
    for j in 0..k - 1 {
        let (x, y) = shares(mine, j, leader);
        let u = Bits::from_bools([x ^ carry]);
        let v = Bits::from_bools([y ^ carry]);
        let p = and(ch, triples, &u, &v, leader).await?;
        carry ^= p.get(0);
    }
    let (x, y) = shares(mine, k - 1, leader);
    Ok(x ^ y ^ carry)
}

/// This party's shares of bit `j` of the leader's and the other's word.
fn shares(mine: u64, j: u32, leader: bool) -> (bool, bool) {
    let bit = mine >> j & 1 == 1;
    match leader {
        true => (bit, false),
        false => (false, bit),
    }
}
