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
//! `δ = r_a ⊕ r_b`, it is enough that the holder learns `γ = β ⊕ s·δ`
//! for a bit `β` it does not know, and the learner sends `u = m_0 ⊕ (β,
//! β)`: then `m_s = u ⊕ (γ, γ)`.
//!
//! Four switches share one random 1-out-of-16 OT (a **bundle**; on
//! silent OT one small VOLE of 4 bits, on IKNP four random OTs): its
//! choice is the four switch bits, its messages masks of 4 bits. The
//! extension's correlations, not the hashing, are what an OT costs, so
//! this makes the shuffle about four times cheaper than one OT per
//! switch, for 16 more bits of traffic per switch. With the OT's message
//! masks `P[e]` (4 bits each), the holder's random index `c` and its
//! switch bits `s` (4 bits a bundle):
//! * the holder sends the flip `f = c ⊕ s` (1 bit per switch);
//! * the learner draws `β` (1 bit per switch) and sends, for each of the
//!   16 indices `e`, `V[e] = P[e] ⊕ β ⊕ ((e ⊕ f) ∧ δ)` (64 bits a
//!   bundle), and `u` (2 bits per switch);
//! * the holder computes `γ = V[c] ⊕ P[c] = β ⊕ (s ∧ δ)`, bit by bit the
//!   `γ` of each of its four switches.
//!
//! The holder knows `P[c]` alone, so of `V` it learns `γ`, where `β`
//! hides `δ`; the other entries are masked by messages it does not hold.
//! The learner sees only flips of a random index. In all: `n + 18S` bits
//! from the learner, `S` from the holder, plus `⌈S/4⌉` OTs (`S` switches:
//! about `n log2 n`), in one round trip after the OTs.
//!
//! Written by hand rather than taken from a crate: no Rust crate offers an
//! OSN, and this one is specific to psikit's random OTs ([`Rots`]), its
//! bit packing and its messages, and it is short (the network, its
//! routing and both sides in a few hundred lines).

use psikit_transport::Channel;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};

use super::bits::{nibble, Bits};
use super::messages::{self as msg, KIND_SWITCH_FLIPS, KIND_SWITCH_MASKS};
use super::rng::rng;
use super::rot::{Either, Rots, SmallMasks};
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
    let n = perm.len();
    let mut settings = vec![0u8; switches(n)];
    let mut perm = perm.to_vec();
    let (mut next, mut opp, mut color) = (vec![0u32; n], vec![0u32; n], vec![0u8; n]);
    route_into(&mut perm, &mut next, &mut opp, &mut color, &mut settings);
    settings
}

/// Routes `perm` (its contents are used up). `next`, `opp` and `color`
/// are scratch of `perm`'s length: a node writes its subnetworks'
/// permutations into `next` and hands them its own `perm` as theirs, so
/// the whole routing runs in four buffers allocated once (a node's own
/// vectors made it allocate about 9 bytes per wire at each of the
/// `log2 n` levels).
fn route_into(
    perm: &mut [u32],
    next: &mut [u32],
    opp: &mut [u32],
    color: &mut [u8],
    settings: &mut [u8],
) {
    let n = perm.len();
    match n {
        0 | 1 => return,
        // One switch (the output switch is left out): a third of all
        // nodes.
        2 => {
            settings[0] = u8::from(perm[0] == 1);
            return;
        }
        _ => {}
    }
    let h = n / 2;
    colors(perm, opp, color);
    let [inputs, upper, lower, outputs] = parts_mut(n, settings);
    for (i, s) in inputs.iter_mut().enumerate() {
        *s = color[2 * i];
    }
    // Each element enters its subnetwork at wire `e/2` and leaves it at
    // wire `j/2`, `j` its output: output pair `i` takes wire `i` of both.
    // One colour lookup per pair (the pair's colours differ; that of the
    // left-out switch's pair is 0).
    let (up, low) = next.split_at_mut(h);
    for (i, pair) in perm.chunks_exact(2).enumerate() {
        let (e0, e1) = (pair[0], pair[1]);
        let crossed = color[e0 as usize];
        if let Some(s) = outputs.get_mut(i) {
            *s = crossed;
        }
        // A swap by mask: a branch on the colour, a random bit, was
        // mispredicted half the time (a fifth of the routing's samples).
        let swap = (e0 ^ e1) & 0u32.wrapping_sub(u32::from(crossed));
        (up[i], low[i]) = ((e0 ^ swap) / 2, (e1 ^ swap) / 2);
    }
    if n % 2 == 1 {
        low[h] = perm[n - 1] / 2;
    }
    let (p_up, p_low) = perm.split_at_mut(h);
    let (o_up, o_low) = opp.split_at_mut(h);
    let (c_up, c_low) = color.split_at_mut(h);
    both(
        n,
        || route_into(up, p_up, o_up, c_up, upper),
        || route_into(low, p_low, o_low, c_low, lower),
    );
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
fn colors(perm: &[u32], opp: &mut [u32], color: &mut [u8]) {
    let n = perm.len();
    // Each element's output partner: the walk then follows one random
    // read per two elements (memory latency is most of the routing).
    for pair in perm.chunks_exact(2) {
        opp[pair[0] as usize] = pair[1];
        opp[pair[1] as usize] = pair[0];
    }
    color.fill(UNSET);
    match n % 2 {
        // The path, from both ends: the last input, whose output partner
        // goes upper, and the last output's element, which goes lower.
        1 => {
            let end = perm[n - 1] as usize;
            opp[end] = NONE;
            color[n - 1] = 1;
            if end != n - 1 {
                walk(opp, color, [opp[n - 1] as usize, end], [0, 1]);
            }
        }
        _ => {
            let e = perm[n - 2] as usize;
            walk(opp, color, [e, opp[e] as usize], [0, 1]);
        }
    }
    // Elements of a pair are coloured together.
    for e in (0..n).step_by(2) {
        if color[e] == UNSET {
            walk(opp, color, [e, opp[e] as usize], [0, 1]);
        }
    }
}

/// No output partner (the last output of an odd `n`).
const NONE: u32 = u32::MAX;
const UNSET: u8 = 2;

/// Colours a cycle or the path from both ends at once, `at[0]` with
/// colour `c[0]` and `at[1]` with `c[1]`: each end colours the element
/// it stands on and its input partner, then moves to that partner's
/// output partner, until it reaches an element already coloured (where
/// the two walks met). Two walks are two independent chains of reads, so
/// one's memory latency hides the other's. On the path, the first walk
/// can step past the last element (to `NONE`) only when the path is one
/// pair; the second walk, starting on that pair, then returns in the same
/// round, before the first walk's position is read.
fn walk(opp: &[u32], color: &mut [u8], mut at: [usize; 2], c: [u8; 2]) {
    loop {
        for (at, c) in at.iter_mut().zip(c) {
            if color[*at] != UNSET {
                return;
            }
            color[*at] = c;
            color[*at ^ 1] = c ^ 1;
            *at = opp[*at ^ 1] as usize;
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
    let mut scratch = v.clone();
    eval_in(&mut v, &mut scratch, codes);
    v
}

/// [`eval`] in place: a node's switches write its subnetworks' wires into
/// `scratch` (as long as `v`) and lend them its own `v` as theirs, as in
/// [`route_into`].
fn eval_in<T>(v: &mut [T], scratch: &mut [T], codes: &[u8])
where
    T: Copy + Send + Sync + From<u8> + std::ops::BitXor<Output = T>,
{
    let n = v.len();
    match n {
        0 | 1 => return,
        2 => {
            (v[0], v[1]) = switch(codes[0], v[0], v[1]);
            return;
        }
        _ => {}
    }
    let h = n / 2;
    let [inputs, upper, lower, outputs] = parts(n, codes);
    let (up, low) = scratch.split_at_mut(h);
    for (i, &c) in inputs.iter().enumerate() {
        (up[i], low[i]) = switch(c, v[2 * i], v[2 * i + 1]);
    }
    if n % 2 == 1 {
        low[h] = v[n - 1];
    }
    let (v_up, v_low) = v.split_at_mut(h);
    both(
        n,
        || eval_in(up, v_up, upper),
        || eval_in(low, v_low, lower),
    );
    for (i, &c) in outputs.iter().enumerate() {
        (v[2 * i], v[2 * i + 1]) = switch(c, up[i], low[i]);
    }
    match n % 2 {
        0 => (v[n - 2], v[n - 1]) = (up[h - 1], low[h - 1]),
        _ => v[n - 1] = low[h],
    }
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
    let mut scratch = vec![0u8; r.len()];
    garble_in(&mut r, &mut scratch, fresh, msgs);
    r
}

/// [`garble`] in place, its scratch used as [`eval_in`] uses its own.
fn garble_in(r: &mut [u8], scratch: &mut [u8], fresh: &[u8], msgs: &mut [u8]) {
    let n = r.len();
    match n {
        0 | 1 => return,
        2 => {
            let (x, y) = (fresh[0] & 1, fresh[0] >> 1 & 1);
            msgs[0] = message(r[0], r[1], x, y);
            (r[0], r[1]) = (x, y);
            return;
        }
        _ => {}
    }
    let h = n / 2;
    let [f_in, f_up, f_low, f_out] = parts(n, fresh);
    let [m_in, m_up, m_low, m_out] = parts_mut(n, msgs);
    let (up, low) = scratch.split_at_mut(h);
    for (i, (m, &f)) in m_in.iter_mut().zip(f_in).enumerate() {
        let (x, y) = (f & 1, f >> 1 & 1);
        *m = message(r[2 * i], r[2 * i + 1], x, y);
        (up[i], low[i]) = (x, y);
    }
    if n % 2 == 1 {
        low[h] = r[n - 1];
    }
    let (r_up, r_low) = r.split_at_mut(h);
    both(
        n,
        || garble_in(up, r_up, f_up, m_up),
        || garble_in(low, r_low, f_low, m_low),
    );
    for (i, (m, &f)) in m_out.iter_mut().zip(f_out).enumerate() {
        let (x, y) = (f & 1, f >> 1 & 1);
        *m = message(up[i], low[i], x, y);
        (r[2 * i], r[2 * i + 1]) = (x, y);
    }
    match n % 2 {
        0 => (r[n - 2], r[n - 1]) = (up[h - 1], low[h - 1]),
        _ => r[n - 1] = low[h],
    }
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
    let Masks::Chooser { index, masks } = collect(ch, rots, k, false).await? else {
        return Err(Error::Internal("the permutation holder chooses in the OTs"));
    };
    // Routed after the OTs, while the learner draws its masks.
    let mut codes = route(perm);
    let mut flips = Bits::plane(&codes, 0);
    flips.xor_assign(&nibbles(&index, k));
    msg::send_bits(ch, KIND_SWITCH_FLIPS, &[&flips]).await?;
    let lens = [n, 64 * k.div_ceil(BUNDLE), k, k];
    let [masked, table, mut m0, mut m1] = msg::recv_bits(ch, KIND_SWITCH_MASKS, lens).await?;
    // m_s = u ⊕ (γ, γ).
    let gamma = gammas(&table, &index, &masks, k);
    m0.xor_assign(&gamma);
    m1.xor_assign(&gamma);
    codes.iter_mut().for_each(|s| *s <<= 2);
    unpack_into(&m0, 0, &mut codes);
    unpack_into(&m1, 1, &mut codes);
    let mut values = vec![0u8; n];
    unpack_into(&masked, 0, &mut values);
    Ok(Bits::plane(&eval(values, &codes), 0))
}

/// The holder's `γ = V[c] ⊕ P[c]` of each of `k` switches, from the
/// learner's masked tables `V`, its indices `c` and its masks `P[c]`.
fn gammas(table: &Bits, index: &[u8], masks: &[u8], k: usize) -> Bits {
    let gamma: Vec<u8> = (table.words().iter().zip(index).zip(masks))
        .map(|((v, &c), &p)| (v >> (4 * c)) as u8 & 15 ^ p)
        .collect();
    nibbles(&gamma, k)
}

/// The learner's side: `b` with `a ⊕ b = π(l)` for the holder's `a`
/// ([`permute`]).
pub(crate) async fn share(ch: &mut Channel, rots: &mut Rots, l: &Bits) -> Result<Bits, Error> {
    let (n, k) = (l.len(), switches(l.len()));
    let Masks::Sender(pads) = collect(ch, rots, k, true).await? else {
        return Err(Error::Internal("the learner sends in the OTs"));
    };
    let mut rng = rng()?;
    let (mut r, mut fresh) = (vec![0u8; n], vec![0u8; k]);
    rng.fill_bytes(&mut r);
    rng.fill_bytes(&mut fresh);
    let mut masked = Bits::plane(&r, 0);
    masked.xor_assign(l);
    r.iter_mut().for_each(|b| *b &= 1);
    let mut msgs = vec![0u8; k];
    let out = garble(r, &fresh, &mut msgs);
    drop(fresh);
    let [mut u0, mut u1, delta] = [0, 1, 2].map(|bit| Bits::plane(&msgs, bit));
    drop(msgs);
    let mut beta = vec![0u64; k.div_ceil(64)];
    rng.fill(&mut beta[..]);
    let beta = Bits::from_words(beta, k);
    let [flips] = msg::recv_bits(ch, KIND_SWITCH_FLIPS, [k]).await?;
    // V[e] = P[e] ⊕ β ⊕ ((e ⊕ f) ∧ δ) for the 16 indices e, u = m_0 ⊕ (β, β).
    let table: Vec<u64> = (pads.iter().enumerate())
        .map(|(g, p)| {
            let [b, f, d] = [&beta, &flips, &delta].map(|bits| nibble(bits.words(), g));
            p ^ (EVERY_NIBBLE * u64::from(b)) ^ flipped_and(f, d)
        })
        .collect();
    u0.xor_assign(&beta);
    u1.xor_assign(&beta);
    let table = Bits::from_words(table, 64 * pads.len());
    msg::send_bits(ch, KIND_SWITCH_MASKS, &[&masked, &table, &u0, &u1]).await?;
    Ok(Bits::plane(&out, 0))
}

/// Switches per bundle: one random 1-out-of-16 OT, whose index is the
/// four switch bits and whose 16 message masks of 4 bits fill a word.
const BUNDLE: usize = 4;

/// A 1 in each nibble of a word: a nibble times it fills all 16.
const EVERY_NIBBLE: u64 = 0x1111_1111_1111_1111;

/// Every index `e` of a bundle's table (nibble `e` of a word holds `e`).
const INDICES: u64 = 0xfedc_ba98_7654_3210;

/// `(e ⊕ f) ∧ δ` in nibble `e`, for all 16 indices `e`: `(e ∧ δ) ⊕ (f ∧
/// δ)`. Arithmetic rather than a table read at `f`, `δ`: `δ` is the XOR
/// of the learner's secret wire masks.
fn flipped_and(f: u8, delta: u8) -> u64 {
    (INDICES & (EVERY_NIBBLE * u64::from(delta))) ^ (EVERY_NIBBLE * u64::from(f & delta))
}

/// The nibbles as a bit vector of `len` bits, nibble `g` at bits `4g ..`
/// (the inverse of [`nibble`]).
fn nibbles(nibbles: &[u8], len: usize) -> Bits {
    let words = nibbles
        .chunks(16)
        .map(|c| (c.iter().rev()).fold(0u64, |w, &x| w << 4 | u64::from(x & 15)))
        .collect();
    Bits::from_words(words, len)
}

/// ORs `bits` into bit `bit` of the bytes (the inverse of [`Bits::plane`]).
fn unpack_into(bits: &Bits, bit: u32, bytes: &mut [u8]) {
    for (c, &w) in bytes.chunks_mut(64).zip(bits.words()) {
        for (i, b) in c.iter_mut().enumerate() {
            *b |= (((w >> i) & 1) as u8) << bit;
        }
    }
}

/// What the network keeps of each bundle's OT ([`BUNDLE`]).
enum Masks {
    /// The 16 message masks, message `e` at bits `4e ..`.
    Sender(Vec<u64>),
    /// The index and its message's mask.
    Chooser { index: Vec<u8>, masks: Vec<u8> },
}

/// The OTs of `k` switches' bundles (the leader, the learner, sends):
/// small VOLEs of 4 bits on silent OT, else four random OTs a bundle,
/// whose message `e` is masked by the XOR of the low 4 bits of OT `t`'s
/// message `e_t` (`t < 4`), its index the four choices.
async fn collect(
    ch: &mut Channel,
    rots: &mut Rots,
    k: usize,
    leader: bool,
) -> Result<Masks, Error> {
    let bundles = k.div_ceil(BUNDLE);
    let (mut sent, mut index, mut masks) = (Vec::new(), Vec::new(), Vec::new());
    let mut out_of_step = false;
    if rots.has_small_voles() {
        let jobs = [(bundles, BUNDLE as u32)];
        rots.forward_small_chunks(ch, &jobs, |_, ots| match ots.masks() {
            SmallMasks::Sent(words) => {
                out_of_step |= !leader;
                sent.extend(words);
            }
            SmallMasks::Received { c, masks: m } => {
                out_of_step |= leader;
                index.extend(c);
                masks.extend(m);
            }
        })
        .await?;
    } else {
        let (mut pairs, mut choices, mut chosen) = (Vec::new(), Bits::default(), Vec::new());
        let low = |m: &u128| *m as u8 & 15;
        rots.forward_chunks(ch, BUNDLE * bundles, |ots| match ots.whole() {
            Either::Sent(s) => {
                out_of_step |= !leader;
                pairs.extend(s.m0.iter().zip(&s.m1).map(|(a, b)| (low(a), low(b))));
            }
            Either::Received(r) => {
                out_of_step |= leader;
                choices.extend(&r.choices);
                chosen.extend(r.chosen.iter().map(low));
            }
        })
        .await?;
        sent = pairs.chunks(BUNDLE).map(bundle_masks).collect();
        index = (0..chosen.len() / BUNDLE)
            .map(|g| (0..BUNDLE).fold(0, |c, t| c | u8::from(choices.get(BUNDLE * g + t)) << t))
            .collect();
        masks = chosen
            .chunks(BUNDLE)
            .map(|c| c.iter().fold(0, |m, x| m ^ x))
            .collect();
    }
    match (out_of_step, leader) {
        (true, _) => Err(Error::Internal(
            "the learner must lead the switching network's OTs",
        )),
        (false, true) => Ok(Masks::Sender(sent)),
        (false, false) => Ok(Masks::Chooser { index, masks }),
    }
}

/// The 16 message masks of a bundle made of four random OTs, from the
/// low 4 bits of each OT's two messages: message `e` takes OT `t`'s
/// message `e_t`.
fn bundle_masks(ots: &[(u8, u8)]) -> u64 {
    (0..16u64).fold(0, |w, e| {
        let mask = (ots.iter().enumerate()).fold(0, |m, (t, &(k0, k1))| {
            m ^ if e >> t & 1 == 1 { k1 } else { k0 }
        });
        w | u64::from(mask) << (4 * e)
    })
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
        for silent in [true, false] {
            let (mut a, mut b) = Channel::memory_pair(Limits::default());
            let bits: Vec<Bits> = cases.iter().map(|(l, _)| l.clone()).collect();
            let learner = tokio::spawn(async move {
                let mut rots = test_rots(&mut a, b"osn", true, silent).await;
                let mut out = Vec::new();
                for l in &bits {
                    out.push(share(&mut a, &mut rots, l).await.expect("learner"));
                }
                out
            });
            let mut holder = test_rots(&mut b, b"osn", false, silent).await;
            let mut held = Vec::new();
            for (_, perm) in &cases {
                held.push(permute(&mut b, &mut holder, perm).await.expect("holder"));
            }
            let learned = learner.await.expect("learner task");
            for (((l, perm), a), b) in cases.iter().zip(&held).zip(&learned) {
                assert_eq!((a.len(), b.len()), (l.len(), l.len()));
                for (j, &e) in perm.iter().enumerate() {
                    let n = l.len();
                    assert_eq!(
                        a.get(j) ^ b.get(j),
                        l.get(e as usize),
                        "{silent} n {n} j {j}"
                    );
                }
            }
        }
    }

    /// A bundle of four random OTs masks message `e` with OT `t`'s message
    /// `e_t`: the chooser's mask (of its choices) is its message's.
    #[test]
    fn flipped_and_fills_every_index() {
        for (f, d) in (0..16u8).flat_map(|f| (0..16u8).map(move |d| (f, d))) {
            for e in 0..16u8 {
                let got = (flipped_and(f, d) >> (4 * e)) as u8 & 15;
                assert_eq!(got, (e ^ f) & d, "f {f}, δ {d}, index {e}");
            }
        }
    }

    #[test]
    fn bundles_of_random_ots_mask_each_index() {
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..50 {
            let ots: Vec<(u8, u8)> = (0..BUNDLE)
                .map(|_| (rng.gen::<u8>() & 15, rng.gen::<u8>() & 15))
                .collect();
            let word = bundle_masks(&ots);
            for e in 0..16usize {
                let chosen = (0..BUNDLE).fold(0, |m, t| {
                    m ^ if e >> t & 1 == 1 { ots[t].1 } else { ots[t].0 }
                });
                assert_eq!((word >> (4 * e)) as u8 & 15, chosen, "index {e}");
            }
        }
        let nibs: Vec<u8> = (0..37).map(|_| rng.gen::<u8>() & 15).collect();
        let bits = nibbles(&nibs, 4 * 37 - 2);
        for (g, &x) in nibs.iter().enumerate() {
            let want = if g == 36 { x & 3 } else { x };
            assert_eq!(nibble(bits.words(), g), want, "nibble {g}");
        }
    }

    /// The fraction of ones in `bits` is within 0.03 of a half (for the
    /// tens of thousands of bits below, over 8 standard deviations).
    fn balanced(bits: &Bits) -> bool {
        (bits.count_ones() as f64 / bits.len() as f64 - 0.5).abs() < 0.03
    }

    /// What the holder receives hides the learner's bits: with the
    /// learner's input all zeros, the masked input, both halves of `u` and
    /// `γ = V[c] ⊕ P[c]` on the switches the holder sets straight (where
    /// `γ = β`) are balanced. Without the wire masks `r` the masked input
    /// would be all zeros; without `β`, `γ` would be 0 on straight
    /// switches and `δ` on crossed ones.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_holders_view_is_masked() {
        let n = 1 << 12;
        let k = switches(n);
        for silent in [true, false] {
            let (mut a, mut b) = Channel::memory_pair(Limits::default());
            let learner = tokio::spawn(async move {
                let mut r = test_rots(&mut a, b"osn view", true, silent).await;
                share(&mut a, &mut r, &Bits::zeros(n))
                    .await
                    .expect("learner")
            });
            let mut r = test_rots(&mut b, b"osn view", false, silent).await;
            let Masks::Chooser { index, masks } =
                collect(&mut b, &mut r, k, false).await.expect("OTs")
            else {
                panic!("the holder chooses");
            };
            let mut rng = StdRng::seed_from_u64(9);
            let s = Bits::from_bools((0..k).map(|_| rng.gen::<bool>()));
            let mut flips = s.clone();
            flips.xor_assign(&nibbles(&index, k));
            msg::send_bits(&mut b, KIND_SWITCH_FLIPS, &[&flips])
                .await
                .expect("flips");
            let lens = [n, 64 * k.div_ceil(BUNDLE), k, k];
            let [masked, table, u0, u1] = msg::recv_bits(&mut b, KIND_SWITCH_MASKS, lens)
                .await
                .expect("masks");
            learner.await.expect("learner task");
            let gamma = gammas(&table, &index, &masks, k);
            let straight = Bits::from_bools((0..k).filter(|&j| !s.get(j)).map(|j| gamma.get(j)));
            for (name, bits) in [
                ("masked input", &masked),
                ("u_0", &u0),
                ("u_1", &u1),
                ("γ", &straight),
            ] {
                assert!(
                    balanced(bits),
                    "{silent} {name}: {} of {}",
                    bits.count_ones(),
                    bits.len()
                );
            }
        }
    }

    /// What the learner receives hides the permutation: with every switch
    /// straight (the identity), the holder's flips are balanced (they are
    /// its switch bits masked by its random OT indices).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_learners_view_is_masked() {
        let n = 1 << 12;
        let k = switches(n);
        assert!(route(&(0..n as u32).collect::<Vec<_>>())
            .iter()
            .all(|&s| s == 0));
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let fake = tokio::spawn(async move {
            let mut r = rots(&mut a, true).await;
            let _ = collect(&mut a, &mut r, k, true).await.expect("OTs");
            let [flips] = msg::recv_bits(&mut a, KIND_SWITCH_FLIPS, [k])
                .await
                .expect("flips");
            let table = 8 * k.div_ceil(BUNDLE);
            let bytes = vec![0u8; n.div_ceil(8) + table + 2 * k.div_ceil(8)];
            msg::send(&mut a, KIND_SWITCH_MASKS, &bytes)
                .await
                .expect("masks");
            flips
        });
        let mut r = rots(&mut b, false).await;
        let perm: Vec<u32> = (0..n as u32).collect();
        permute(&mut b, &mut r, &perm).await.expect("holder");
        let flips = fake.await.expect("fake");
        assert!(
            balanced(&flips),
            "{} of {}",
            flips.count_ones(),
            flips.len()
        );
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
                let table = 8 * k.div_ceil(BUNDLE);
                let mut bytes = vec![0u8; n.div_ceil(8) + table + 2 * k.div_ceil(8)];
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
