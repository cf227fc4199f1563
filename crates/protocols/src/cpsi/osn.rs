//! Permute+Share of a bit vector by an oblivious switching network (OSN;
//! Mohassel and Sadeghian, Eurocrypt 2013; the shape Garimella,
//! Mohassel, Rosulek, Sadeghian and Singh use for set operations, CRYPTO
//! 2021, and Jia, Sun, Liu, Zhang and Chen for their shuffle-based union,
//! USENIX Security 2022).
//!
//! The **permutation holder** (circuit PSI's receiver) has a permutation
//! `π` of `n` positions, the **learner** (the sender, the leader) bits
//! `l`. Afterwards the holder has `a` and the learner `b` with
//! `a_j ⊕ b_j = l_{π(j)}`, written `a ⊕ b = π(l)` (`π` as a slice:
//! output `j` takes input `perm[j]`). The learner sees only flips of
//! random OT choices (uniform bits); the holder only bits masked by the
//! learner's fresh wire masks. The union ([`super::apps`]) runs on such
//! permuted shares, so what the learner sees per slot is no longer tied
//! to a bin.
//!
//! # The network
//! An arbitrary-size Waksman network (Waksman, JACM 1968; for any `n`,
//! Beauquier and Darrot, Parallel Processing Letters 2002): `⌊n/2⌋` input
//! switches over the wire pairs `(2i, 2i+1)`, each feeding wire `i` of an
//! upper subnetwork on `⌊n/2⌋` wires and wire `i` of a lower one on
//! `⌈n/2⌉`; `⌊n/2⌋` output switches back (an odd last wire enters and
//! leaves the lower subnetwork directly); for even `n` the last output
//! switch is left out (always straight), Waksman's saving. That makes
//! `n - 1` switches per level and `n⌈log2 n⌉ - 2^⌈log2 n⌉ + 1` in all
//! ([`switches`]). Chosen over a Beneš network on `2^k` wires because the
//! cuckoo table has about `1.27·N` bins, which a power of two would pad
//! to up to twice as many wires (at `N = 2^20`: 2^21 wires and 43 M
//! switches, against 26 M here) and the union would send slots for the
//! padding. Switches are settled by the **looping algorithm** (Waksman
//! 1968; Opferman and Tsao-Wu, Bell System Technical Journal 1971):
//! [`route`].
//!
//! # The OTs
//! The learner draws a fresh mask bit for every wire a switch drives
//! (and for the inputs). For a switch with input masks `r_a, r_b` and
//! output masks `r_x, r_y`, the holder must learn `m_0 = (r_a ⊕ r_x,
//! r_b ⊕ r_y)` if the switch is straight and `m_1 = (r_b ⊕ r_x, r_a ⊕
//! r_y)` if crossed; then `swap_s(v_a, v_b) ⊕ m_s` carries its masked
//! values `v = l ⊕ r` through the switch. Since `m_1 = m_0 ⊕ (δ, δ)` with
//! `δ = r_a ⊕ r_b`, one forward random OT per switch and 4 bits carry it
//! (instead of the 5 of a plain derandomised OT of 2-bit messages): with
//! the OT's messages `k_0, k_1`, `t_i` the low bit of `k_i`, the holder's
//! random choice `c` and switch bit `s`,
//! * the holder sends the flip `f = c ⊕ s` (1 bit);
//! * the learner sends `z = δ ⊕ t_0 ⊕ t_1` and `u = m_0 ⊕ (β, β)` with
//!   `β = t_0 ⊕ f·δ` (3 bits; each as a plane of one bit per switch, so
//!   both sides compute on 64 switches a word);
//! * the holder computes `γ = t_c ⊕ c·z = t_0 ⊕ c·δ = β ⊕ s·δ` and
//!   `m_s = u ⊕ (γ, γ)`.
//!
//! The holder knows `t_c` alone: with `c = 0`, `z` is masked by `t_1`;
//! with `c = 1`, `z` gives it `δ ⊕ t_0`, masked by `t_0`. Either way it
//! learns `m_s` and not `δ`, hence nothing of `m_{1-s} = m_s ⊕ (δ, δ)`.
//! The learner also sends its inputs masked (`n` bits).
//! In all: `n + 3S` bits from the learner, `S` from the holder, plus `S`
//! forward random OTs (`S` switches: about `n log2 n`), in one round
//! trip after the OTs.
//!
//! Written by hand rather than taken from a crate: no Rust crate offers an
//! OSN, and this one is specific to psikit's random OTs ([`Rots`]), its
//! bit packing and its messages, and it is short (the network, its
//! routing and both sides in a few hundred lines).

use psikit_transport::Channel;
use rand::seq::SliceRandom;
use rand::RngCore;

use super::bits::Bits;
use super::messages::{self as msg, KIND_SWITCH_FLIPS, KIND_SWITCH_MASKS};
use super::rng::rng;
use super::rot::{LowBits, Rots};
use crate::error::Error;

/// Below this many wires a subnetwork is handled on the current thread.
const PARALLEL: usize = 1 << 13;

/// Switches of the network on `n` wires: `n - 1` per level, which solves
/// to `n⌈log2 n⌉ - 2^⌈log2 n⌉ + 1` (the worst case of merge sort).
pub(crate) fn switches(n: usize) -> usize {
    if n < 2 {
        return 0;
    }
    let k = n.next_power_of_two().trailing_zeros() as usize;
    n * k - (1 << k) + 1
}

/// A node's switches in network order: its input switches, the upper
/// subnetwork's, the lower's, its output switches.
fn parts<T>(n: usize, all: &[T]) -> [&[T]; 4] {
    let h = n / 2;
    let (inputs, rest) = all.split_at(h);
    let (upper, rest) = rest.split_at(switches(h));
    let (lower, outputs) = rest.split_at(switches(n - h));
    [inputs, upper, lower, outputs]
}

/// [`parts`], mutable.
fn parts_mut<T>(n: usize, all: &mut [T]) -> [&mut [T]; 4] {
    let h = n / 2;
    let (inputs, rest) = all.split_at_mut(h);
    let (upper, rest) = rest.split_at_mut(switches(h));
    let (lower, outputs) = rest.split_at_mut(switches(n - h));
    [inputs, upper, lower, outputs]
}

/// Both subnetworks of a node, side by side when it is large enough.
fn both<A: Send, B: Send>(
    n: usize,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    match n >= PARALLEL {
        true => rayon::join(a, b),
        false => (a(), b()),
    }
}

/// A uniformly random permutation of `n` positions (Fisher-Yates on a
/// CSPRNG seeded from the OS).
pub(crate) fn random_permutation(n: usize) -> Result<Vec<u32>, Error> {
    let n = u32::try_from(n).map_err(|_| Error::Internal("too many wires"))?;
    let mut perm: Vec<u32> = (0..n).collect();
    perm.shuffle(&mut rng()?);
    Ok(perm)
}

/// The switch settings (1: crossed) that make the network move input
/// `perm[j]` to output `j`, in network order.
pub(crate) fn route(perm: &[u32]) -> Vec<u8> {
    let mut settings = vec![0u8; switches(perm.len())];
    route_into(perm, &mut settings);
    settings
}

fn route_into(perm: &[u32], settings: &mut [u8]) {
    let n = perm.len();
    match n {
        0 | 1 => return,
        // One switch (the output switch is left out): a third of all
        // nodes, done without allocating.
        2 => {
            settings[0] = u8::from(perm[0] == 1);
            return;
        }
        _ => {}
    }
    let h = n / 2;
    let color = colors(perm);
    let [inputs, upper, lower, outputs] = parts_mut(n, settings);
    for (i, s) in inputs.iter_mut().enumerate() {
        *s = color[2 * i];
    }
    // Each element enters its subnetwork at wire `e/2` and leaves it at
    // wire `j/2`, `j` its output: output pair `i` takes wire `i` of both.
    // One colour lookup per pair (the pair's colours differ; that of the
    // left-out switch's pair is 0).
    let (mut up, mut low) = (vec![0u32; h], vec![0u32; n - h]);
    for (i, pair) in perm.chunks_exact(2).enumerate() {
        let (e0, e1) = (pair[0], pair[1]);
        let crossed = color[e0 as usize];
        if let Some(s) = outputs.get_mut(i) {
            *s = crossed;
        }
        (up[i], low[i]) = match crossed {
            0 => (e0 / 2, e1 / 2),
            _ => (e1 / 2, e0 / 2),
        };
    }
    if n % 2 == 1 {
        low[h] = perm[n - 1] / 2;
    }
    both(n, || route_into(&up, upper), || route_into(&low, lower));
}

/// The looping algorithm: the subnetwork (0 upper, 1 lower) of each
/// element (input index), such that the two inputs of an input switch
/// and the two outputs of an output switch use different ones. The
/// constraints pair each element with its input partner and its output
/// partner: the graph is even cycles, plus for odd `n` one path from the
/// last input to the last output's element, both of which must go lower
/// (the path has an even number of edges, so they agree). For even `n`
/// the left-out output switch is straight: the element bound for output
/// `n - 2` goes upper.
fn colors(perm: &[u32]) -> Vec<u8> {
    let n = perm.len();
    // Each element's output partner: the walk then follows one random
    // read per two elements (memory latency is most of the routing).
    let mut opp = vec![NONE; n];
    for pair in perm.chunks_exact(2) {
        opp[pair[0] as usize] = pair[1];
        opp[pair[1] as usize] = pair[0];
    }
    let mut color = vec![UNSET; n];
    match n % 2 {
        // The path: from the last input, by its output partner first.
        1 => {
            color[n - 1] = 1;
            if opp[n - 1] != NONE {
                cycle(&opp, &mut color, opp[n - 1] as usize, 0, None);
            }
        }
        _ => cycle(&opp, &mut color, perm[n - 2] as usize, 0, Some(perm[n - 2])),
    }
    for e in 0..n {
        if color[e] == UNSET {
            cycle(&opp, &mut color, e, 0, Some(e as u32));
        }
    }
    color
}

/// No output partner (the last output of an odd `n`).
const NONE: u32 = u32::MAX;
const UNSET: u8 = 2;

/// Colours the chain from `e` (colour `c`): its input partner, that
/// one's output partner, and so on, until the output partner is `end`
/// (the cycle closed on its start) or missing (the path's end).
fn cycle(opp: &[u32], color: &mut [u8], e: usize, c: u8, end: Option<u32>) {
    let mut e = e;
    loop {
        color[e] = c;
        color[e ^ 1] = c ^ 1;
        match opp[e ^ 1] {
            next if next == NONE || Some(next) == end => return,
            next => e = next as usize,
        }
    }
}

/// Carries `v` through the network: `codes[k]` holds switch `k`'s setting
/// (bit 2) and the masks it applies to its two outputs (bits 0 and 1).
/// On plain values with zero masks this is the permutation itself.
pub(crate) fn eval<T>(mut v: Vec<T>, codes: &[u8]) -> Vec<T>
where
    T: Copy + Send + Sync + From<u8> + std::ops::BitXor<Output = T>,
{
    let n = v.len();
    match n {
        0 | 1 => return v,
        2 => {
            (v[0], v[1]) = switch(codes[0], v[0], v[1]);
            return v;
        }
        _ => {}
    }
    let h = n / 2;
    let [inputs, upper, lower, outputs] = parts(n, codes);
    let (mut up, mut low) = (Vec::with_capacity(h), Vec::with_capacity(n - h));
    for (i, &c) in inputs.iter().enumerate() {
        let (a, b) = switch(c, v[2 * i], v[2 * i + 1]);
        up.push(a);
        low.push(b);
    }
    if n % 2 == 1 {
        low.push(v[n - 1]);
    }
    // `v`'s buffer takes the outputs (one allocation less per node).
    let mut out = v;
    out.clear();
    let (up, low) = both(n, || eval(up, upper), || eval(low, lower));
    for (i, &c) in outputs.iter().enumerate() {
        let (a, b) = switch(c, up[i], low[i]);
        out.extend([a, b]);
    }
    match n % 2 {
        0 => out.extend([up[h - 1], low[h - 1]]),
        _ => out.push(low[h]),
    }
    out
}

/// One switch of [`eval`].
fn switch<T: From<u8> + std::ops::BitXor<Output = T>>(code: u8, a: T, b: T) -> (T, T) {
    let (a, b) = match code >> 2 & 1 {
        0 => (a, b),
        _ => (b, a),
    };
    (a ^ T::from(code & 1), b ^ T::from(code >> 1 & 1))
}

/// The learner's wire masks: from its input masks `r` and two fresh bits
/// per switch (`fresh[k]`, bits 0 and 1: the masks of the wires switch
/// `k` drives), writes per switch into `msgs` the straight message's two
/// bits (bits 0 and 1) and `δ`, the XOR of its input masks (bit 2), and
/// returns the output masks.
fn garble(mut r: Vec<u8>, fresh: &[u8], msgs: &mut [u8]) -> Vec<u8> {
    let n = r.len();
    match n {
        0 | 1 => return r,
        2 => {
            let (x, y) = (fresh[0] & 1, fresh[0] >> 1 & 1);
            msgs[0] = message(r[0], r[1], x, y);
            (r[0], r[1]) = (x, y);
            return r;
        }
        _ => {}
    }
    let h = n / 2;
    let [f_in, f_up, f_low, f_out] = parts(n, fresh);
    let [m_in, m_up, m_low, m_out] = parts_mut(n, msgs);
    let (mut up, mut low) = (Vec::with_capacity(h), Vec::with_capacity(n - h));
    for (i, (m, &f)) in m_in.iter_mut().zip(f_in).enumerate() {
        let (x, y) = (f & 1, f >> 1 & 1);
        *m = message(r[2 * i], r[2 * i + 1], x, y);
        up.push(x);
        low.push(y);
    }
    if n % 2 == 1 {
        low.push(r[n - 1]);
    }
    let mut out = r;
    out.clear();
    let (up, low) = both(n, || garble(up, f_up, m_up), || garble(low, f_low, m_low));
    for (i, (m, &f)) in m_out.iter_mut().zip(f_out).enumerate() {
        let (x, y) = (f & 1, f >> 1 & 1);
        *m = message(up[i], low[i], x, y);
        out.extend([x, y]);
    }
    match n % 2 {
        0 => out.extend([up[h - 1], low[h - 1]]),
        _ => out.push(low[h]),
    }
    out
}

/// A switch's straight message and `δ` (see [`garble`]) for input masks
/// `a, b` and output masks `x, y`.
fn message(a: u8, b: u8, x: u8, y: u8) -> u8 {
    (a ^ x) | (b ^ y) << 1 | (a ^ b) << 2
}

/// The permutation holder's side: `a` with `a ⊕ b = π(l)`, for the
/// learner's `b` and `l` ([`share`]), `π` given as `perm` (output `j`
/// takes input `perm[j]`).
pub(crate) async fn permute(
    ch: &mut Channel,
    rots: &mut Rots,
    perm: &[u32],
) -> Result<Bits, Error> {
    let (n, k) = (perm.len(), switches(perm.len()));
    let Lows::Chooser { choices, chosen } = collect(ch, rots, k, false).await? else {
        return Err(Error::Internal("the permutation holder chooses in the OTs"));
    };
    // Routed after the OTs, while the learner draws its masks.
    let mut codes = route(perm);
    let mut flips = plane(&codes, 0);
    flips.xor_assign(&choices);
    msg::send_bits(ch, KIND_SWITCH_FLIPS, &[&flips]).await?;
    let [masked, z, mut m0, mut m1] = msg::recv_bits(ch, KIND_SWITCH_MASKS, [n, k, k, k]).await?;
    // γ = t_c ⊕ c·z, then m_s = u ⊕ (γ, γ).
    let gamma = words3(&chosen, &choices, &z, |t, c, z| t ^ (c & z));
    m0.xor_assign(&gamma);
    m1.xor_assign(&gamma);
    codes.iter_mut().for_each(|s| *s <<= 2);
    unpack_into(&m0, 0, &mut codes);
    unpack_into(&m1, 1, &mut codes);
    let mut values = vec![0u8; n];
    unpack_into(&masked, 0, &mut values);
    Ok(plane(&eval(values, &codes), 0))
}

/// The learner's side: `b` with `a ⊕ b = π(l)` for the holder's `a`
/// ([`permute`]).
pub(crate) async fn share(ch: &mut Channel, rots: &mut Rots, l: &Bits) -> Result<Bits, Error> {
    let (n, k) = (l.len(), switches(l.len()));
    let Lows::Sender(lows) = collect(ch, rots, k, true).await? else {
        return Err(Error::Internal("the learner sends in the OTs"));
    };
    let mut rng = rng()?;
    let (mut r, mut fresh) = (vec![0u8; n], vec![0u8; k]);
    rng.fill_bytes(&mut r);
    rng.fill_bytes(&mut fresh);
    let mut masked = plane(&r, 0);
    masked.xor_assign(l);
    r.iter_mut().for_each(|b| *b &= 1);
    let mut msgs = vec![0u8; k];
    let out = garble(r, &fresh, &mut msgs);
    drop(fresh);
    let [mut u0, mut u1, delta] = [0, 1, 2].map(|bit| plane(&msgs, bit));
    drop(msgs);
    let [t0, t1] = [0, 1].map(|bit| plane(&lows, bit));
    let [flips] = msg::recv_bits(ch, KIND_SWITCH_FLIPS, [k]).await?;
    // z = δ ⊕ t_0 ⊕ t_1, β = t_0 ⊕ f·δ, u = m_0 ⊕ (β, β).
    let z = words3(&delta, &t0, &t1, |d, t0, t1| d ^ t0 ^ t1);
    let beta = words3(&t0, &flips, &delta, |t, f, d| t ^ (f & d));
    u0.xor_assign(&beta);
    u1.xor_assign(&beta);
    msg::send_bits(ch, KIND_SWITCH_MASKS, &[&masked, &z, &u0, &u1]).await?;
    Ok(plane(&out, 0))
}

/// Bit `bit` of every byte, packed: the network works on a byte per wire
/// or switch, the OT arithmetic and the wire on 64 switches a word.
fn plane(bytes: &[u8], bit: u32) -> Bits {
    let words = bytes
        .chunks(64)
        .map(|c| {
            c.iter()
                .rev()
                .fold(0u64, |w, &b| w << 1 | u64::from(b >> bit & 1))
        })
        .collect();
    Bits::from_words(words, bytes.len())
}

/// ORs `bits` into bit `bit` of the bytes (the inverse of [`plane`]).
fn unpack_into(bits: &Bits, bit: u32, bytes: &mut [u8]) {
    for (c, &w) in bytes.chunks_mut(64).zip(bits.words()) {
        for (i, b) in c.iter_mut().enumerate() {
            *b |= (((w >> i) & 1) as u8) << bit;
        }
    }
}

/// `f` word by word over three bit vectors of `a`'s length.
fn words3(a: &Bits, b: &Bits, c: &Bits, f: impl Fn(u64, u64, u64) -> u64) -> Bits {
    let words = (a.words().iter().zip(b.words()).zip(c.words()))
        .map(|((&a, &b), &c)| f(a, b, c))
        .collect();
    Bits::from_words(words, a.len())
}

/// What the network keeps of each random OT: the low bit of each message.
enum Lows {
    /// `t_0 | t_1 << 1` per OT.
    Sender(Vec<u8>),
    Chooser {
        choices: Bits,
        chosen: Bits,
    },
}

/// `k` forward random OTs (the leader, the learner, sends), chunk by
/// chunk, keeping one bit per message.
async fn collect(ch: &mut Channel, rots: &mut Rots, k: usize, leader: bool) -> Result<Lows, Error> {
    let (mut sent, mut choices, mut chosen) = (Vec::new(), Bits::default(), Bits::default());
    let mut out_of_step = false;
    rots.forward_chunks(ch, k, |ots| match ots.low_bits() {
        LowBits::Sent { m0, m1 } => {
            out_of_step |= !leader;
            let pair = |(a, b): (bool, bool)| u8::from(a) | u8::from(b) << 1;
            sent.extend(m0.iter().zip(m1.iter()).map(pair));
        }
        LowBits::Received {
            choices: mine,
            chosen: got,
        } => {
            out_of_step |= leader;
            choices.extend(&mine);
            chosen.extend(&got);
        }
    })
    .await?;
    match (out_of_step, leader) {
        (true, _) => Err(Error::Internal(
            "the learner must lead the switching network's OTs",
        )),
        (false, true) => Ok(Lows::Sender(sent)),
        (false, false) => Ok(Lows::Chooser { choices, chosen }),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cpsi::rot::test_rots;
    use psikit_transport::Limits;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A party's random OTs on a fresh silent session (the leader sends
    /// the forward OTs), as circuit PSI has them after the comparison.
    pub(in crate::cpsi) async fn rots(ch: &mut Channel, leader: bool) -> Rots {
        test_rots(ch, b"osn test", leader, true).await
    }

    /// The network on plain indices with every switch as routed.
    fn apply(perm: &[u32]) -> Vec<u32> {
        let codes: Vec<u8> = route(perm).iter().map(|s| s << 2).collect();
        eval((0..perm.len() as u32).collect(), &codes)
    }

    /// Every permutation of `0..n` (Heap's algorithm).
    fn all_permutations(n: u32) -> Vec<Vec<u32>> {
        fn heap(k: usize, p: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
            if k <= 1 {
                out.push(p.clone());
                return;
            }
            for i in 0..k {
                heap(k - 1, p, out);
                p.swap(if k.is_multiple_of(2) { i } else { 0 }, k - 1);
            }
        }
        let mut out = Vec::new();
        heap(n as usize, &mut (0..n).collect(), &mut out);
        out
    }

    #[test]
    fn switch_count_follows_the_recurrence() {
        let mut count = vec![0usize, 0];
        for n in 2..2000 {
            count.push(n - 1 + count[n / 2] + count[n - n / 2]);
        }
        for (n, &c) in count.iter().enumerate() {
            assert_eq!(switches(n), c, "n {n}");
        }
        // At 2^20 items: 1.27·2^20 + 128 bins, about 26 M switches.
        let bins = crate::cpsi::hashing::bins(1 << 20, 40).expect("bins");
        assert_eq!(switches(bins), bins * 21 - (1 << 21) + 1);
    }

    #[test]
    fn routing_realises_every_small_permutation() {
        for n in 0..=7 {
            for perm in all_permutations(n) {
                assert_eq!(apply(&perm), perm, "n {n}");
            }
        }
    }

    #[test]
    fn routing_realises_random_permutations() {
        let mut rng = StdRng::seed_from_u64(3);
        for n in [
            8usize, 9, 31, 100, 1000, 4097, 8191, 8192, 8193, 20_000, 100_003,
        ] {
            for _ in 0..3 {
                let mut perm: Vec<u32> = (0..n as u32).collect();
                perm.shuffle(&mut rng);
                assert_eq!(apply(&perm), perm, "n {n}");
            }
            let reversed: Vec<u32> = (0..n as u32).rev().collect();
            assert_eq!(apply(&reversed), reversed, "n {n} reversed");
        }
        let perm = random_permutation(5000).expect("permutation");
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        assert!(sorted.iter().enumerate().all(|(i, &e)| e as usize == i));
        assert_eq!(apply(&perm), perm);
    }

    /// Permute+Share on random bits and permutations of many sizes (below
    /// and above the parallel cut-off, odd and even, one and two wires):
    /// `a ⊕ b = π(l)` every time, over one pair of OT sessions.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shares_recombine_to_the_permuted_bits() {
        let sizes = [1usize, 2, 3, 4, 5, 64, 129, 1000, 4099, 8192, 20_001];
        let mut rng = StdRng::seed_from_u64(8);
        let cases: Vec<(Bits, Vec<u32>)> = sizes
            .iter()
            .map(|&n| {
                let l = Bits::from_bools((0..n).map(|_| rng.gen::<bool>()));
                let mut perm: Vec<u32> = (0..n as u32).collect();
                perm.shuffle(&mut rng);
                (l, perm)
            })
            .collect();
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let bits: Vec<Bits> = cases.iter().map(|(l, _)| l.clone()).collect();
        let learner = tokio::spawn(async move {
            let mut rots = rots(&mut a, true).await;
            let mut out = Vec::new();
            for l in &bits {
                out.push(share(&mut a, &mut rots, l).await.expect("learner"));
            }
            out
        });
        let mut holder = rots(&mut b, false).await;
        let mut held = Vec::new();
        for (_, perm) in &cases {
            held.push(permute(&mut b, &mut holder, perm).await.expect("holder"));
        }
        let learned = learner.await.expect("learner task");
        for (((l, perm), a), b) in cases.iter().zip(&held).zip(&learned) {
            assert_eq!((a.len(), b.len()), (l.len(), l.len()));
            for (j, &e) in perm.iter().enumerate() {
                assert_eq!(
                    a.get(j) ^ b.get(j),
                    l.get(e as usize),
                    "n {} j {j}",
                    l.len()
                );
            }
        }
    }

    /// A learner whose masks come cut short, or with a bit set past a
    /// vector's end, is refused (no panic).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn malformed_masks_are_refused() {
        for cut in [true, false] {
            let (mut a, mut b) = Channel::memory_pair(Limits::default());
            let n = 5usize;
            let k = switches(n);
            let fake = tokio::spawn(async move {
                let mut r = rots(&mut a, true).await;
                let _ = collect(&mut a, &mut r, k, true).await.expect("OTs");
                let _ = msg::recv_bits(&mut a, KIND_SWITCH_FLIPS, [k]).await;
                let mut bytes = vec![0u8; n.div_ceil(8) + 3 * k.div_ceil(8)];
                match cut {
                    true => bytes.truncate(bytes.len() - 1),
                    false => bytes[0] = 0x80,
                }
                let _ = msg::send(&mut a, KIND_SWITCH_MASKS, &bytes).await;
                a
            });
            let mut r = rots(&mut b, false).await;
            let perm: Vec<u32> = (0..n as u32).collect();
            let err = permute(&mut b, &mut r, &perm).await.expect_err("refused");
            let want = match cut {
                true => "bytes in a circuit-PSI transfer",
                false => "a bit set past its length",
            };
            assert!(err.to_string().contains(want), "{err}");
            drop(fake.await.expect("fake"));
        }
    }

    /// Times of the network's local work at 2^20 items' bins on one
    /// thread (routing, the learner's masks, the holder's evaluation), then
    /// of a whole Permute+Share on silent OTs. Run with `cargo test
    /// --release -p psikit-protocols osn_measure -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore]
    async fn osn_measure() {
        use std::time::Instant;
        let m = crate::cpsi::hashing::bins(1 << 20, 40).expect("bins");
        let k = switches(m);
        let single = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let perm = random_permutation(m).expect("permutation");
        let t = Instant::now();
        let settings = single.install(|| route(&perm));
        let routed = t.elapsed();
        let (fresh, mut msgs) = (vec![3u8; k], vec![0u8; k]);
        let t = Instant::now();
        single.install(|| garble(vec![1u8; m], &fresh, &mut msgs));
        let garbled = t.elapsed();
        let t = Instant::now();
        single.install(|| eval(vec![1u8; m], &settings));
        println!(
            "{m} wires, {k} switches: route {routed:?}, garble {garbled:?}, eval {:?}",
            t.elapsed()
        );
        let l = Bits::zeros(m);
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let learner = tokio::spawn(async move {
            let mut r = rots(&mut a, true).await;
            let t = Instant::now();
            share(&mut a, &mut r, &l).await.expect("learner");
            (t.elapsed(), a.bytes_sent())
        });
        let mut r = rots(&mut b, false).await;
        let t = Instant::now();
        permute(&mut b, &mut r, &perm).await.expect("holder");
        let (learned, sent) = learner.await.expect("task");
        println!(
            "Permute+Share: holder {:?}, learner {learned:?}; learner sent {sent} bytes, holder {}",
            t.elapsed(),
            b.bytes_sent()
        );
    }
}
