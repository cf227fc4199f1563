//! Step 3 of the framework (paper §3.1-3.2): Boolean GMW on packed shares.
//! Beaver AND triples come from the forward direction: on silent OT one
//! small VOLE of 2 bits each (a random 1-out-of-4 OT and one bit of
//! traffic, [`SmallTriples`]), on IKNP two random OTs each. The equality
//! circuit bit by bit is a tree of `ℓ - 1` ANDs per bin (KK-CGS's tree
//! over its leaves is `⌈ℓ/4⌉ - 1`), and the threshold test is an
//! adder's top bit.
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
//! AND gate; a small VOLE halves the correlations ([`Triples::add_small`]).
//! Triples let every layer of the circuit cost one round, and one
//! direction lets silent OT reuse the OPRF's session.

use psikit_transport::Channel;

use super::bits::Bits;
use super::messages::{recv_bits, recv_exact, send, send_bits, KIND_OPEN, KIND_TRIPLE_FIXES};
use super::rot::{LowBits, Rots, SmallPads};
use crate::error::Error;

/// This party's shares of Beaver triples, consumed in order.
pub struct Triples {
    a: Bits,
    b: Bits,
    c: Bits,
    used: usize,
}

impl Triples {
    /// `count` triples (rounded up to whole words), made a chunk at a time
    /// so memory stays at a few bits per triple: on silent OT one forward
    /// small VOLE of 2 bits and one bit of traffic each ([`Triples::add_small`]),
    /// on IKNP two forward random OTs each ([`Triples::add`]).
    pub async fn generate(rots: &mut Rots, ch: &mut Channel, count: usize) -> Result<Self, Error> {
        let count = count.next_multiple_of(64);
        if rots.has_small_voles() {
            let mut made = SmallTriples::new(count);
            rots.forward_small_chunks(ch, &[(count, TRIPLE_BITS)], |_, ots| made.add(ots.pads()))
                .await?;
            return made.finish(ch, rots.leader()).await;
        }
        let mut t = Self::empty();
        rots.forward_chunks(ch, 2 * count, |ots| t.add(ots.low_bits()))
            .await?;
        Ok(t)
    }

    fn empty() -> Self {
        Self::from_shares(Bits::default(), Bits::default(), Bits::default())
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

    /// Turns a chunk of small VOLEs of 2 bits (random 1-out-of-4 OTs:
    /// the receiver's index `(α, β)`, the sender's four pad bits `p_j`)
    /// into as many triples. Written as a polynomial in the index, the
    /// pads are `k0 ⊕ k1·α ⊕ k2·β ⊕ k3·α·β`; the sender sends the fix
    /// `f = k3 ⊕ 1` so that the messages `M(α, β) = pad ⊕ f·α·β` have
    /// `α·β` with coefficient 1, which makes them `c_S ⊕ (a_S ⊕ α)(b_S ⊕ β)`
    /// with `a_S = k2`, `b_S = k1`, `c_S = k0 ⊕ k1·k2`. The receiver keeps
    /// `a_R = α`, `b_R = β` and `c_R = M(α, β)`. Given its pad and `f`,
    /// two of the three pads it lacks stay free, so `a_S` and `b_S` remain
    /// uniform to it; the sender sees nothing of `(α, β)`.
    fn add_small(&mut self, ots: SmallPads, fixes: &mut Bits) {
        let (a, b, c) = match ots {
            SmallPads::Sent(pads) => {
                let n = pads.len();
                let planes = [0, 1, 2, 3].map(|j| Bits::plane(&pads, j));
                let [p0, p1, p2, p3] = planes.each_ref().map(Bits::words);
                let k1: Vec<u64> = p0.iter().zip(p1).map(|(x, y)| x ^ y).collect();
                let k2: Vec<u64> = p0.iter().zip(p2).map(|(x, y)| x ^ y).collect();
                let c = (0..p0.len()).map(|i| p0[i] ^ (k1[i] & k2[i])).collect();
                let fix = (0..p0.len()).map(|i| {
                    let valid = u64::MAX >> (64 - (n - 64 * i).min(64));
                    !(p0[i] ^ p1[i] ^ p2[i] ^ p3[i]) & valid
                });
                fixes.extend(&Bits::from_words(fix.collect(), n));
                let bits = |w| Bits::from_words(w, n);
                (bits(k2), bits(k1), bits(c))
            }
            SmallPads::Received { c: index, pads } => {
                (Bits::plane(&index, 0), Bits::plane(&index, 1), pads)
            }
        };
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

/// Bits of the small VOLE behind each triple (a random 1-out-of-4 OT).
pub const TRIPLE_BITS: u32 = 2;

/// Triples being made from forward small VOLEs of [`TRIPLE_BITS`] bits, a
/// chunk at a time ([`Triples::add_small`]); the OT sender's fixes are
/// sent once all are made.
pub struct SmallTriples {
    t: Triples,
    fixes: Bits,
    count: usize,
}

impl SmallTriples {
    /// For `count` triples, a multiple of 64.
    pub fn new(count: usize) -> Self {
        debug_assert!(count.is_multiple_of(64));
        Self {
            t: Triples::empty(),
            fixes: Bits::default(),
            count,
        }
    }

    /// The next chunk's pads.
    pub fn add(&mut self, ots: SmallPads) {
        self.t.add_small(ots, &mut self.fixes);
    }

    /// Sends (the leader, the OT sender) or applies the fixes (none for
    /// no triples).
    pub async fn finish(self, ch: &mut Channel, leader: bool) -> Result<Triples, Error> {
        let mut t = self.t;
        if t.a.len() != self.count {
            return Err(Error::Internal("small VOLE triples of the wrong count"));
        }
        match leader {
            _ if self.count == 0 => {}
            true => send_bits(ch, KIND_TRIPLE_FIXES, &[&self.fixes]).await?,
            false => {
                let [fixes] = recv_bits(ch, KIND_TRIPLE_FIXES, [self.count]).await?;
                let (a, b) = (t.a.words(), t.b.words());
                for (i, c) in t.c.words_mut().iter_mut().enumerate() {
                    *c ^= fixes.words()[i] & a[i] & b[i];
                }
            }
        }
        Ok(t)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpsi::rot::test_rots;
    use psikit_transport::Limits;

    /// One party's triples on silent OT (small VOLEs) or IKNP.
    async fn party(mut ch: Channel, leader: bool, count: usize, silent: bool) -> Triples {
        let mut rots = test_rots(&mut ch, b"triples test", leader, silent).await;
        Triples::generate(&mut rots, &mut ch, count)
            .await
            .expect("triples")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn triples_multiply_and_look_random() {
        for silent in [true, false] {
            let count = 5000;
            let (a, b) = Channel::memory_pair(Limits::default());
            let task = tokio::spawn(party(a, true, count, silent));
            let r = party(b, false, count, silent).await;
            let s = task.await.expect("task");
            assert_eq!((s.remaining(), r.remaining()), (5056, 5056));
            for i in 0..s.remaining() {
                let (a, b) = (s.a.get(i) ^ r.a.get(i), s.b.get(i) ^ r.b.get(i));
                assert_eq!(
                    s.c.get(i) ^ r.c.get(i),
                    a & b,
                    "triple {i} (silent {silent})"
                );
            }
            // Each share vector is about half ones (none is constant).
            for v in [&s.a, &s.b, &s.c, &r.a, &r.b, &r.c] {
                let ones = (0..v.len()).filter(|&i| v.get(i)).count();
                assert!(ones.abs_diff(v.len() / 2) < v.len() / 10, "{ones} ones");
            }
        }
    }
}
