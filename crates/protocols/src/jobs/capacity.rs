//! How many buckets a job has and how many items each side pads a bucket
//! to, so that padding hides every bucket's real fill.
//!
//! Items go to buckets by a hash that is a random function independent of
//! the sets (keyed by the job id, agreed after both inputs are fixed), so
//! the load of a bucket is Binomial(n, 1/B) for n distinct items in B
//! buckets. The capacity C is the least value with
//!
//! ```text
//! B · Pr[Bin(n, 1/B) > C]  ≤  B · exp(-n · D((C+1)/n ‖ 1/B))  ≤  2^-40
//! ```
//!
//! (a union bound over the buckets and the Chernoff-Hoeffding bound in its
//! relative-entropy form, valid for (C+1)/n > 1/B). So an honest party
//! overflows a bucket with probability at most 2^-40, and an overflow is
//! refused, never run unpadded. n counts rows, an upper bound on the
//! distinct items (duplicates share a bucket), so the bound holds for the
//! distinct ones too: the tail only shrinks with fewer balls.

use crate::common::statistical;
use crate::error::Error;

/// Statistical security of the padding: the probability that an honest
/// party's bucket overflows is at most 2^-STATISTICAL_BITS.
pub const STATISTICAL_BITS: f64 = statistical::STATISTICAL_BITS as f64;

/// Most buckets a job may have (bucket ids and the journal's bitmap are
/// bounded by it; 2^16 buckets of 2^22 items hold 2^38 rows).
pub const MAX_BUCKETS: u64 = 1 << 16;

/// log2 of the union bound on an overflow: B buckets, n items, capacity
/// `cap` (an upper bound on `B · Pr[some bucket holds more than cap]`).
pub fn overflow_log2(n: u64, buckets: u64, cap: u64) -> f64 {
    if cap >= n {
        return f64::NEG_INFINITY;
    }
    let (n_f, b_f) = (n as f64, buckets as f64);
    let p = 1.0 / b_f;
    let a = (cap + 1) as f64 / n_f;
    if a <= p {
        return b_f.log2();
    }
    // D(a || p) in nats; the (1-a) term vanishes at a = 1.
    let mut divergence = a * (a / p).ln();
    if a < 1.0 {
        divergence += (1.0 - a) * ((1.0 - a) / (1.0 - p)).ln();
    }
    b_f.log2() - n_f * divergence / std::f64::consts::LN_2
}

/// The least capacity with [`overflow_log2`] at most -40 for n items in
/// `buckets` buckets (n itself for one bucket, which cannot overflow).
pub fn capacity(n: u64, buckets: u64) -> u64 {
    let buckets = buckets.max(1);
    let (mut lo, mut hi) = (n.div_ceil(buckets), n);
    // Invariant: hi is safe; the answer lies in [lo, hi].
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match overflow_log2(n, buckets, mid) <= -STATISTICAL_BITS {
            true => hi = mid,
            false => lo = mid + 1,
        }
    }
    hi
}

/// The agreed shape of a job: the bucket count and each side's padded
/// bucket size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub buckets: u64,
    pub sender_capacity: u64,
    pub receiver_capacity: u64,
}

impl Shape {
    /// σ of each bucket's run: its statistical events (false matches,
    /// failures, a cut-and-choose passed by cheating) add up over the
    /// buckets to at most 2^-40 ([`statistical::per_run`]).
    pub fn statistical_bits(&self) -> u32 {
        statistical::per_run(self.buckets)
    }
}

/// The fewest buckets (a power of two) whose padded buckets hold at most
/// `max_bucket_items` items on either side, for sets of `sender_rows` and
/// `receiver_rows` rows. Both parties compute it from the same numbers
/// (each side's row count and the smaller of their bucket limits), so
/// they agree without another round.
pub fn shape(sender_rows: u64, receiver_rows: u64, max_bucket_items: u64) -> Result<Shape, Error> {
    let mut buckets = 1u64;
    loop {
        let shape = Shape {
            buckets,
            sender_capacity: capacity(sender_rows, buckets).max(1),
            receiver_capacity: capacity(receiver_rows, buckets).max(1),
        };
        if shape.sender_capacity.max(shape.receiver_capacity) <= max_bucket_items {
            return Ok(shape);
        }
        if buckets >= MAX_BUCKETS {
            return Err(Error::Config(format!(
                "{sender_rows} and {receiver_rows} rows need more than {MAX_BUCKETS} buckets of \
                 at most {max_bucket_items} items: raise --memory"
            )));
        }
        buckets *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ln Pr[Bin(n, p) >= k], summed exactly (in log space) from the pmf.
    fn exact_tail_ln(n: u64, p: f64, k: u64) -> f64 {
        // ln pmf(k) = ln C(n, k) + k ln p + (n - k) ln(1 - p)
        let mut ln_c = 0.0;
        for i in 1..=k {
            ln_c += ((n - k + i) as f64).ln() - (i as f64).ln();
        }
        let mut ln_pmf = ln_c + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln();
        let (mut total, first) = (1.0f64, ln_pmf);
        for j in k..n {
            // pmf(j+1) / pmf(j) = (n - j) / (j + 1) · p / (1 - p)
            ln_pmf += ((n - j) as f64).ln() - ((j + 1) as f64).ln() + (p / (1.0 - p)).ln();
            let term = (ln_pmf - first).exp();
            total += term;
            if term < 1e-18 {
                break;
            }
        }
        first + total.ln()
    }

    #[test]
    fn the_bound_is_above_the_exact_union_bound() {
        for &(n, b) in &[(10_000u64, 4u64), (100_000, 16), (50_000, 64), (3_000, 2)] {
            let cap = capacity(n, b);
            let exact_log2 = ((b as f64).ln() + exact_tail_ln(n, 1.0 / b as f64, cap + 1))
                / std::f64::consts::LN_2;
            assert!(exact_log2 <= -STATISTICAL_BITS, "n={n} b={b}: {exact_log2}");
            assert!(exact_log2 <= overflow_log2(n, b, cap) + 1e-9);
            // The capacity is the least the bound allows: one less fails it.
            assert!(overflow_log2(n, b, cap - 1) > -STATISTICAL_BITS);
        }
    }

    #[test]
    fn capacity_is_close_to_the_mean_for_big_buckets() {
        let cap = capacity(1 << 30, 256);
        let mean = (1u64 << 30) / 256;
        assert!(cap > mean && cap < mean + mean / 100, "{cap} vs {mean}");
        assert_eq!(capacity(1000, 1), 1000);
        assert_eq!(capacity(0, 8), 0);
    }

    #[test]
    fn shape_doubles_buckets_until_both_sides_fit() {
        let s = shape(1 << 20, 1 << 18, 1 << 17).unwrap();
        assert!(s.sender_capacity <= 1 << 17 && s.receiver_capacity <= 1 << 17);
        assert_eq!(s.buckets, 16);
        let one = shape(1000, 10, 1 << 20).unwrap();
        assert_eq!((one.buckets, one.sender_capacity), (1, 1000));
        assert!(shape(1 << 40, 1, 16).is_err());
    }
}
