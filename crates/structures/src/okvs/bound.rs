//! The analytical failure bound that chooses the parameters.
//!
//! Encoding fails only if the rows of the keys are linearly dependent (with
//! inconsistent values). For fixed band starts, the band bits being uniform
//! and independent, a set `S` of rows sums to zero with probability exactly
//! `2^-|U(S)|`, where `U(S)` is the union of the rows' windows (each covered
//! column is an XOR of fresh uniform bits, different columns of disjoint
//! bits). So, by the union bound over the non-zero combinations `x`,
//!
//! ```text
//! P(fail | starts) <= sum over non-empty S of 2^-|U(S)|.
//! ```
//!
//! Group every `S` by the maximal intervals ("components") of `U(S)`, taken
//! inside each bin (bins share no columns): the
//! rows of `S` in a component `I` lie inside `I`, so at most `2^rows(I)`
//! sets share a given family of components, each weighing `2^-sum |I|`, and
//!
//! ```text
//! sum_S 2^-|U(S)| <= prod_I (1 + a_I) - 1 <= exp(mu) - 1,
//! a_I = 2^(rows(I) - |I|),   mu = sum over intervals I inside a bin of a_I,
//! ```
//!
//! where `rows(I)` counts the rows whose window lies in `I`. The starts are
//! random too, so fix a threshold `t_L` per length `L` and split on the event
//! "some interval of length `L` holds more than `t_L` rows":
//!
//! ```text
//! P(fail) <= sum_L N_L * P(Bin(n, p_L) > t_L) + exp(sum_L N_L 2^(t_L - L)) - 1,
//! ```
//!
//! with `N_L = bins * (bin_len - L + 1)` intervals of length `L` and `p_L`
//! an upper bound on the probability that one key's window falls in a given
//! one (`L - w + 1` start positions, each of probability at most
//! `ceil(2^32 / bins) / 2^32 * ceil(2^32 / starts) / 2^32`, the bias of the
//! 32-bit multiply-high maps included). The binomial tail is bounded by
//! `P(X >= a) <= P(X = a) / (1 - r)` (successive terms shrink by at least
//! `r = (n - a) p / ((a + 1)(1 - p))`) with Stirling's bounds (Robbins)
//! giving `P(X = a) <= sqrt(n / (2 pi a (n - a))) exp(-n D(a/n || p))`, or
//! by Chernoff-Hoeffding `exp(-n D(a/n || p))` alone when smaller; `t_L` is
//! chosen where the two terms cross. Every step is an upper bound, so the
//! result is a proven bound on the failure probability of one encode of at
//! most `n` distinct keys in the random-oracle model for the row hash
//! (fixed-key AES), over the choice of the seed.
//! It is loose (the first moment over `S` is), which costs rate, not safety.

use std::f64::consts::{LN_2, PI};

/// `Bin(n, p)` with `ln p` and `ln(1 - p)` computed once: the bound takes
/// two or three tails of each of its twenty thousand laws.
struct Binomial {
    n: f64,
    p: f64,
    ln_p: f64,
    ln_1mp: f64,
}

impl Binomial {
    fn new(n: f64, p: f64) -> Self {
        Self {
            n,
            p,
            ln_p: p.ln(),
            ln_1mp: (-p).ln_1p(),
        }
    }

    /// `log2 P(X >= a)` bounded from above (0 when `a` is at most the mean,
    /// `-inf` when `a > n`): see the module docs.
    fn log2_tail(&self, a: f64) -> f64 {
        let (n, p) = (self.n, self.p);
        if a > n {
            return f64::NEG_INFINITY;
        }
        if a <= n * p || p >= 1.0 {
            return 0.0;
        }
        let q = a / n;
        if q >= 1.0 {
            return n * self.ln_p / LN_2;
        }
        let kl = q * (q.ln() - self.ln_p) + (1.0 - q) * ((-q).ln_1p() - self.ln_1mp);
        let chernoff = -n * kl / LN_2;
        let ratio = (n - a) * p / ((a + 1.0) * (1.0 - p));
        if ratio >= 1.0 {
            return chernoff;
        }
        let stirling = 0.5 * (n / (2.0 * PI * a * (n - a))).log2() - (-ratio).ln_1p() / LN_2;
        chernoff + stirling.min(0.0)
    }
}

/// `2^x` rounded up to at least `2^-1000`, so that a sum of such terms never
/// loses one to underflow: the sums below stay upper bounds.
fn exp2_up(x: f64) -> f64 {
    x.max(-1000.0).exp2()
}

/// Probability bound of one `w`-window falling at a given start of a given
/// bin, with the multiply-high maps' bias.
fn position_probability(bins: usize, starts: usize) -> f64 {
    let two32 = 2f64.powi(32);
    let per = |k: usize| (two32 / k as f64).ceil() / two32;
    per(bins) * per(starts)
}

/// `log2` of the proven bound on the probability that encoding `n` keys
/// into `bins` bins of `bin_len` columns with bands of `width` bits fails.
/// `+inf` when the bound is useless (at least 1).
///
/// Both sums are kept as plain numbers rather than logarithms (a useful
/// bound keeps every term below `2^4` times an interval count, far inside
/// the floating-point range; a larger one only makes the result `+inf`):
/// the interval counts are then exact integers, and a term costs an
/// `exp2` where a sum of logarithms costs a logarithm and an `exp2`. This
/// halved the parameter search (15 to 7 ms at every size), which both
/// VOLE-PSI parties run before their first message.
pub(crate) fn failure_log2(n: usize, bins: usize, bin_len: usize, width: usize) -> f64 {
    if width == 0 || bin_len < width || bins == 0 {
        return f64::INFINITY;
    }
    let starts = bin_len - width + 1;
    let p_pos = position_probability(bins, starts);
    let n_f = n as f64;
    let (mut overload, mut mu) = (0.0, 0.0);
    let mut t = 0usize;
    for len in width..=bin_len {
        let law = Binomial::new(n_f, ((len - width + 1) as f64 * p_pos).min(1.0));
        let count = (bins * (bin_len - len + 1)) as f64;
        // The crossing threshold only grows with the length: walk it up,
        // keeping the tails at `t + 1` and (if computed) at `t`.
        let mut above = law.log2_tail((t + 1) as f64);
        let mut at_t = None;
        while above > t as f64 - len as f64 {
            t += 1;
            at_t = Some(above);
            above = law.log2_tail((t + 1) as f64);
        }
        let at_t = || at_t.unwrap_or_else(|| law.log2_tail(t as f64));
        let (tail, weight) = best_split(len, t, above, at_t);
        overload += count * tail;
        mu += count * weight;
    }
    let mu = mu.log2();
    if mu > 4.0 {
        return f64::INFINITY;
    }
    let dependent = mu.exp2().exp_m1().log2();
    log2_add(overload.log2(), dependent)
}

/// `log2(2^a + 2^b)`.
fn log2_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (1.0 + (lo - hi).exp2()).log2()
}

/// The better of thresholds `t` and `t - 1` for intervals of `len`
/// columns, as (tail, weight) probabilities (see [`exp2_up`]), given
/// `above`, the log2 tail at `t + 1`, and `at_t()`, the log2 tail at `t`.
fn best_split(len: usize, t: usize, above: f64, at_t: impl Fn() -> f64) -> (f64, f64) {
    let weight = t as f64 - len as f64;
    let a = (exp2_up(above), exp2_up(weight));
    if t == 0 {
        return a;
    }
    let b = (exp2_up(at_t()), exp2_up(weight - 1.0));
    if b.0 + b.1 < a.0 + a.1 {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log2_tail(n: f64, p: f64, a: f64) -> f64 {
        Binomial::new(n, p).log2_tail(a)
    }

    #[test]
    fn dense_single_bin_is_the_classical_bound() {
        // One start position: n uniform rows of m bits are dependent with
        // probability below 2^(n-m); the bound gives log2(expm1(2^(n-m))).
        let b = failure_log2(100, 1, 141, 141);
        assert!((b + 41.0).abs() < 1e-6, "{b}");
    }

    /// `log2 P(Bin(n, p) >= a)`, summed exactly.
    fn exact_log2_tail(n: u32, p: f64, a: u32) -> f64 {
        let mut pmf = (1.0 - p).powi(n as i32);
        let mut tail = 0.0;
        for k in 0..=n {
            if k >= a {
                tail += pmf;
            }
            pmf *= f64::from(n - k) * p / (f64::from(k + 1) * (1.0 - p));
        }
        tail.log2()
    }

    #[test]
    fn tail_bound_is_an_upper_bound() {
        // P(Bin(100, 0.1) >= 30) is 2.4e-8 (log2 -25.285); Chernoff alone
        // says -22.2.
        let b = log2_tail(100.0, 0.1, 30.0);
        assert!((-25.285..-25.0).contains(&b), "{b}");
        for (n, p) in [(50u32, 0.3), (200, 0.05), (300, 0.5), (1000, 0.01)] {
            for a in 1..=n {
                let (bound, exact) = (
                    log2_tail(f64::from(n), p, f64::from(a)),
                    exact_log2_tail(n, p, a),
                );
                assert!(
                    bound >= exact - 1e-9,
                    "n {n} p {p} a {a}: {bound} < {exact}"
                );
            }
        }
        assert_eq!(log2_tail(100.0, 0.1, 5.0), 0.0);
        assert_eq!(log2_tail(100.0, 0.1, 101.0), f64::NEG_INFINITY);
    }

    #[test]
    fn more_columns_lower_the_bound() {
        let tight = failure_log2(8192, 1, 10_000, 192);
        let loose = failure_log2(8192, 1, 10_600, 192);
        assert!(loose < tight, "{loose} vs {tight}");
    }
}
