//! EPC parameters for `(ℓ, ℓ_c)`: the plaintext prime, the word base, the
//! noise bounds and the ciphertext modulus, each derived as in the module
//! docs' table and checked exactly (integer arithmetic, worst-case bounds).

use std::fmt;
use std::ops::Range;

use psikit_he::{public_key_noise_bound, wire, HeParams, FRESH_NOISE_BOUND};

use crate::error::Error;

/// Ring degrees `n` tried, smallest first (§6.1: 4096 is the smallest with
/// a depth-1 plaintext product); `n` is also the number of slots, so the
/// batch size. 8192 is taken when the flooding of a large run needs a
/// modulus above what the 128-bit standard allows at 4096.
pub const DEGREES: [usize; 2] = [4096, 8192];

/// Safety margin, in bits, between the worst-case noise of a reply and
/// the decryption bound `q_1/(2p)`: the bounds are proven, so this is not
/// needed for correctness; it keeps a measured budget in the tests and
/// absorbs a mistake of a factor below 2 in our own accounting.
pub const MARGIN_BITS: u32 = 1;

/// Longest tag: tags are `u128`, and `2^ℓ` must fit one (a run's tags
/// have `σ + log2 M ≤ 64 + 31` bits).
pub const MAX_ELL: u32 = 127;

/// Smallest tag length accepted.
pub const MIN_ELL: u32 = 1;

/// Largest output length looked at: outputs are `u32`.
const MAX_ELL_C: u32 = 31;

/// The parameters of one EPC run. Both parties build them from the same
/// `(ℓ, ℓ_c)`; every number is a function of those two, so nothing here is
/// negotiated on the wire beyond `(ℓ, ℓ_c)` themselves.
#[derive(Clone)]
pub struct EpcParams {
    ell: u32,
    ell_c: u32,
    n: usize,
    flood_bits: u32,
    p: u64,
    w: u64,
    u: usize,
    he: HeParams,
    eval_bound: u128,
    flood_bound: u128,
    reply_bound: u128,
    drop_bits: u32,
    reply_bytes: usize,
}

impl EpcParams {
    /// Derives the parameters for `slots` tags of `ell` bits compressed to
    /// values mod a prime of `ell_c` bits, at statistical security `sigma`
    /// (§4.3, §6): the flooding hides each reply coefficient's noise up to
    /// statistical distance `2^-(σ + c)` with `2^c` coefficients in the
    /// run, so `B_fp = 2^(σ + c) · B*` and the run as a whole stays within
    /// `2^-σ` (the paper floods per coefficient, `c = 0`). Takes the
    /// smallest ring degree of [`DEGREES`] for which a ciphertext modulus
    /// both keeps decryption exact under that flooding and stays within
    /// the 128-bit bound. Refuses, with the rule broken, any other
    /// `(ℓ, ℓ_c)`.
    pub fn new(ell: u32, ell_c: u32, slots: usize, sigma: u32) -> Result<Self, Error> {
        let mut last = None;
        for n in DEGREES {
            let coefficients = (slots.max(1).div_ceil(n) * n) as u64;
            let flood_bits = sigma + coefficients.next_power_of_two().ilog2();
            match Self::with_degree(ell, ell_c, n, flood_bits) {
                Ok(params) => return Ok(params),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| config("no ring degree".into())))
    }

    /// The paper's parameters: `n = 4096`, flooding `2^-40` per
    /// coefficient (Table 3's setting), to compare with its figures.
    #[cfg(test)]
    pub(crate) fn per_coefficient(ell: u32, ell_c: u32) -> Result<Self, Error> {
        Self::with_degree(ell, ell_c, DEGREES[0], 40)
    }

    fn with_degree(ell: u32, ell_c: u32, n: usize, flood_bits: u32) -> Result<Self, Error> {
        if !(MIN_ELL..=MAX_ELL).contains(&ell) {
            return Err(config(format!(
                "tag length ℓ = {ell} bits is outside {MIN_ELL}..={MAX_ELL}"
            )));
        }
        if ell_c > MAX_ELL_C {
            return Err(config(format!(
                "output length ℓ_c = {ell_c} bits is above {MAX_ELL_C}"
            )));
        }
        // §6.1: the largest prime of ℓ_c bits that is 1 mod 2n (batching).
        let p = HeParams::plain_modulus_for_bits(n, ell_c as usize).map_err(|e| {
            config(format!(
                "no plaintext prime of ℓ_c = {ell_c} bits that is 1 mod {}: {e}",
                2 * n
            ))
        })?;
        let (w, u) = word_base(p, ell).ok_or_else(|| {
            config(format!(
                "p = {p} is too small for any word base at ℓ = {ell} (needs p > ℓ)"
            ))
        })?;
        let eval_bound = eval_noise_bound(p, u, n);
        let flood_bound = eval_bound
            .checked_shl(flood_bits)
            .filter(|b| b >> flood_bits == eval_bound)
            .ok_or_else(|| config(format!("{flood_bits} bits of flooding overflow")))?;
        let before_switch = eval_bound + flood_bound + u128::from(public_key_noise_bound(n));
        let he = choose_moduli(p, before_switch, n, ell, ell_c)?;
        let q = he.moduli();
        let (q1, q2) = (u128::from(q[0]), u128::from(q[1]));
        let switched = before_switch.div_ceil(q2) + n as u128 + 1;
        let drop_bits = (0..64 - q[0].leading_zeros())
            .rev()
            .find(|&d| reply_fits(p, q1, switched + rounding_bound(d, n)))
            .ok_or_else(|| {
                config(format!(
                    "internal: ciphertext modulus for ℓ = {ell}, ℓ_c = {ell_c} leaves no budget"
                ))
            })?;
        let reply_bytes = wire::result_ct_size_dropped(&he, drop_bits)?;
        Ok(Self {
            ell,
            ell_c,
            n,
            flood_bits,
            p,
            w,
            u,
            he,
            eval_bound,
            flood_bound,
            reply_bound: switched + rounding_bound(drop_bits, n),
            drop_bits,
            reply_bytes,
        })
    }

    /// Tag length ℓ in bits.
    pub fn ell(&self) -> u32 {
        self.ell
    }

    /// Output length ℓ_c in bits (of the prime `p`).
    pub fn ell_c(&self) -> u32 {
        self.ell_c
    }

    /// Plaintext prime `p`: outputs are in `Z_p`.
    pub fn plain_modulus(&self) -> u64 {
        self.p
    }

    /// Word base `w` of the decomposition.
    pub fn word_base(&self) -> u64 {
        self.w
    }

    /// Digits per tag, `u = ceil(ℓ / log2 w)`.
    pub fn digits(&self) -> usize {
        self.u
    }

    /// Slots per batch, `n`.
    pub fn batch_slots(&self) -> usize {
        self.n
    }

    /// Batches for `m` tags, `ceil(m / n)`.
    pub fn batches(&self, m: usize) -> usize {
        m.div_ceil(self.n)
    }

    /// Positions of batch `index` among `m` tags.
    pub fn batch_range(&self, index: usize, m: usize) -> Range<usize> {
        let start = index.saturating_mul(self.n).min(m);
        start..(start + self.n).min(m)
    }

    /// `σ + c`: the flooding hides each coefficient's noise up to
    /// statistical distance `2^-(σ + c)`.
    pub fn flood_bits(&self) -> u32 {
        self.flood_bits
    }

    /// The HE parameters (no key-switching prime; the moduli `q_1, q_2`).
    pub fn he(&self) -> &HeParams {
        &self.he
    }

    /// `log2 Q` of the ciphertext modulus `Q = q_1·q_2`.
    pub fn log_q(&self) -> f64 {
        self.he.moduli().iter().map(|&q| (q as f64).log2()).sum()
    }

    /// `B*`: worst-case noise of the receiver's evaluation before flooding.
    pub fn eval_noise_bound(&self) -> u128 {
        self.eval_bound
    }

    /// `B_fp = 2^(σ + c)·B*`: the flooding noise is uniform in
    /// `[-B_fp, B_fp]`.
    pub fn flood_bound(&self) -> u128 {
        self.flood_bound
    }

    /// Worst-case noise of a reply as the sender decrypts it (after the
    /// switch to `q_1` and the dropped low bits); at most
    /// `q_1 / (2^(1 + MARGIN_BITS)·p)`.
    pub fn reply_noise_bound(&self) -> u128 {
        self.reply_bound
    }

    /// Low bits dropped from each reply coefficient.
    pub fn reply_drop_bits(&self) -> u32 {
        self.drop_bits
    }

    /// Bytes of the `u + 1` ciphertexts of one sender batch.
    pub fn sender_batch_bytes(&self) -> usize {
        (self.u + 1) * wire::query_ct_size(&self.he)
    }

    /// Bytes of one reply ciphertext.
    pub fn reply_bytes(&self) -> usize {
        self.reply_bytes
    }

    /// Bytes of the public key.
    pub fn public_key_bytes(&self) -> usize {
        wire::public_key_size(&self.he)
    }
}

impl fmt::Debug for EpcParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpcParams")
            .field("ell", &self.ell)
            .field("ell_c", &self.ell_c)
            .field("p", &self.p)
            .field("w", &self.w)
            .field("u", &self.u)
            .field("n", &self.n)
            .field("flood_bits", &self.flood_bits)
            .field("moduli", &self.he.moduli())
            .field("drop_bits", &self.drop_bits)
            .finish()
    }
}

fn config(message: String) -> Error {
    Error::Config(format!("EPC parameters: {message}"))
}

/// Digits needed in base `w` for every `ell`-bit value: the least `u` with
/// `w^u ≥ 2^ell`, which is `ceil(ell / log2 w)` computed exactly.
fn digit_count(w: u64, ell: u32) -> usize {
    let target = 1u128 << ell;
    let mut power = 1u128;
    let mut u = 0;
    while power < target {
        power = power.saturating_mul(u128::from(w));
        u += 1;
    }
    u
}

/// §4.1, (3): the largest `w` with `p > u·(w-1)²`, `u = ceil(ℓ / log2 w)`,
/// so that `D = Σ (v_i - v*_i)² ≤ u·(w-1)² < p` is zero mod `p` only when
/// it is zero. `u` falls as `w` grows, so the condition is not monotone in
/// `w`: every `w` up to `sqrt(p) + 1` (beyond, even `u = 1` fails) is tried.
fn word_base(p: u64, ell: u32) -> Option<(u64, usize)> {
    let mut best = None;
    let mut w = 2u64;
    while (w - 1) * (w - 1) < p {
        let u = digit_count(w, ell);
        if u128::from(p) > (u as u128) * u128::from((w - 1) * (w - 1)) {
            best = Some((w, u));
        }
        w += 1;
    }
    best
}

/// `B*` of Theorem 1, made exact for this implementation (module docs):
/// `B_fresh·(1 + u·n·(p-1)/2) + 1`, the sender's `Σ v_i²` ciphertext plus
/// `u` products by centered plaintexts, plus the plaintext addition.
fn eval_noise_bound(p: u64, u: usize, n: usize) -> u128 {
    let per_product = n as u128 * u128::from((p - 1) / 2);
    u128::from(FRESH_NOISE_BOUND) * (1 + u as u128 * per_product) + 1
}

/// Noise added by rounding `d` low bits off both reply polynomials:
/// `|e0 + e1·s| ≤ 2^(d-1)·(1 + n)` for a ternary secret.
fn rounding_bound(d: u32, n: usize) -> u128 {
    if d == 0 {
        0
    } else {
        (1u128 << (d - 1)) * (n as u128 + 1)
    }
}

/// Decryption mod `q_1` is exact while the noise is below `q_1/(2p)`; with
/// the margin: `2^(1 + MARGIN_BITS)·p·noise ≤ q_1`.
fn reply_fits(p: u64, q1: u128, noise: u128) -> bool {
    noise
        .checked_mul(u128::from(p) << (1 + MARGIN_BITS))
        .is_some_and(|need| need <= q1)
}

/// Largest prime of a ciphertext modulus ([`HeParams`] generates 10 to 62
/// bits).
const MAX_PRIME_BITS: usize = 62;

/// Theorem 1's modulus: the smallest `Q = q_1·q_2` (two primes `= 1 mod
/// 2n` of `ceil(b/2)` and `floor(b/2)` bits, generated as
/// [`HeParams::without_key_switching`] does) for which a reply switched to
/// `q_1` still decrypts exactly with the margin, and whose total size
/// passes the 128-bit check of [`psikit_he::security`].
fn choose_moduli(
    p: u64,
    before_switch: u128,
    n: usize,
    ell: u32,
    ell_c: u32,
) -> Result<HeParams, Error> {
    // Two primes of at most 62 bits each (the HE wrapper's largest), and
    // within the 128-bit standard's total for `n`.
    let max_bits = psikit_he::security::max_bits_128(n)
        .unwrap_or(0)
        .min(2 * MAX_PRIME_BITS);
    let needed = u128::BITS - before_switch.leading_zeros() + ell_c + 1 + MARGIN_BITS;
    let first = (needed as usize).saturating_sub(2);
    for total in first..=max_bits {
        let bits = [total.div_ceil(2), total / 2];
        let Ok(he) = HeParams::without_key_switching(n, p, &bits) else {
            continue;
        };
        let (q1, q2) = (u128::from(he.moduli()[0]), u128::from(he.moduli()[1]));
        let switched = before_switch.div_ceil(q2) + n as u128 + 1;
        if he.plain_modulus() == p && reply_fits(p, q1, switched) {
            return Ok(he);
        }
    }
    Err(config(format!(
        "ℓ = {ell}, ℓ_c = {ell_c}: exact decryption after the run's flooding needs a \
         ciphertext modulus of about {needed} bits, above the {max_bits} bits of two primes \
         within the 128-bit HE standard at n = {n} (choose fewer EPC bits or EPC off)"
    )))
}
