//! A proven bound on the failure of a [`Placement::Complete`] table, and
//! the table size it gives small sets.
//!
//! Each item has `d` distinct locations, a uniform `d`-subset of the `M`
//! bins (random-oracle model for the location hash,
//! [`super::distinct_locations`]). Items and bins form a bipartite graph,
//! and a complete placement inserts every item unless no placement of all
//! of them exists, which by Hall's theorem happens exactly when some set
//! `S` of `k` items has all its locations inside a set `T` of `k - 1`
//! bins. A fixed item falls inside a fixed `T` with probability
//! `C(k-1, d) / C(M, d)`, independently of the others, so by the union
//! bound over `(S, T)`
//!
//! ```text
//! P(fail) <= sum_{k = d+1}^{N} C(N, k) · C(M, k-1) · (C(k-1, d) / C(M, d))^k.
//! ```
//!
//! Every step is an upper bound, so the result is proven; it is loose for
//! large `k` (it needs about `M = 1.57·N` for `2^-40` at large `N`, where
//! experiments put the threshold near `1.27·N`). Callers therefore take
//! this bound for small sets, where it is tight (the `k = d + 1` term, `d +
//! 1` items on the same `d` bins, dominates) and where extrapolated
//! experiments say nothing, and the published experimental size for large
//! ones ([`min_bins`]).
//!
//! [`Placement::Complete`]: super::Placement::Complete

/// `log2` of the bound above for `n` items, `m` bins and `d` locations
/// each (`-inf` when it is zero: fewer than `d + 1` items, or `m < d` is
/// refused by the caller).
pub fn log2_failure(n: u64, m: u64, d: u64) -> f64 {
    if n <= d || m < d {
        return f64::NEG_INFINITY;
    }
    let ln_fact = LnFactorials::up_to(n.max(m));
    let ln_choose = |a: u64, b: u64| ln_fact.choose(a, b);
    let ln_all = ln_choose(m, d);
    let terms = (d + 1..=n)
        .map(|k| ln_choose(n, k) + ln_choose(m, k - 1) + k as f64 * (ln_choose(k - 1, d) - ln_all));
    log_sum_exp(terms) / std::f64::consts::LN_2
}

/// The fewest bins from `n` (and at least `d`) for which
/// [`log2_failure`] is at most `-sigma`, if at most `limit` bins do;
/// the bound falls as bins are added, so a binary search finds it.
pub fn proven_bins(n: u64, d: u64, sigma: f64, limit: u64) -> Option<u64> {
    let ok = |m: u64| log2_failure(n, m, d) <= -sigma;
    let mut lo = n.max(d);
    if !ok(limit) {
        return None;
    }
    let mut hi = limit;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match ok(mid) {
            true => hi = mid,
            false => lo = mid + 1,
        }
    }
    Some(lo)
}

/// The table size for `n` items, `d` locations each, failing with
/// probability at most `2^-sigma`: `expansion · max(n, large)` bins
/// (the experimental size, valid from `large` items on, and a table that
/// holds `large` items holds fewer), or fewer when the proven bound allows
/// it. Non-decreasing in `n`.
pub fn min_bins(n: u64, d: u64, sigma: f64, expansion: f64, large: u64) -> u64 {
    let experimental = (expansion * n.max(large) as f64).ceil() as u64;
    match n < large {
        true => proven_bins(n, d, sigma, experimental).unwrap_or(experimental),
        false => experimental,
    }
}

/// `ln k!` for `k` up to a limit, summed once.
struct LnFactorials(Vec<f64>);

impl LnFactorials {
    fn up_to(n: u64) -> Self {
        let mut t = Vec::with_capacity(n as usize + 1);
        t.push(0.0);
        for k in 1..=n {
            t.push(t[k as usize - 1] + (k as f64).ln());
        }
        Self(t)
    }

    /// `ln C(a, b)` (`-inf` for `b > a`).
    fn choose(&self, a: u64, b: u64) -> f64 {
        match b > a {
            true => f64::NEG_INFINITY,
            false => self.0[a as usize] - self.0[b as usize] - self.0[(a - b) as usize],
        }
    }
}

/// `ln Σ e^x` without overflow.
fn log_sum_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let top = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    top + xs.map(|x| (x - top).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_cases_match_their_exact_failure_probability() {
        // Four items, three locations each, in m bins: the only failure is
        // all four on one triple, probability C(m,3) · C(m,3)^-4, which is
        // the bound's single term.
        for m in [4u64, 5, 10, 100] {
            let triples = (m * (m - 1) * (m - 2) / 6) as f64;
            let exact = -3.0 * triples.log2();
            assert!((log2_failure(4, m, 3) - exact).abs() < 1e-9, "m {m}");
        }
        assert_eq!(log2_failure(3, 10, 3), f64::NEG_INFINITY);
    }

    #[test]
    fn the_bound_falls_with_bins_and_rises_with_items() {
        for n in [4u64, 10, 100, 1000] {
            let mut last = f64::INFINITY;
            for m in (n.max(3)..4 * n + 20).step_by(7) {
                let b = log2_failure(n, m, 3);
                assert!(b <= last, "n {n} m {m}");
                last = b;
            }
        }
        for m in [50u64, 500] {
            let mut last = f64::NEG_INFINITY;
            for n in 4..m / 2 {
                let b = log2_failure(n, m, 3);
                assert!(b >= last, "n {n} m {m}");
                last = b;
            }
        }
    }

    #[test]
    fn sizes_meet_sigma_and_never_shrink() {
        let mut last = 0;
        for n in (1u64..300).chain((300..9000).step_by(97)) {
            let m = min_bins(n, 3, 40.0, 1.27, 8192);
            assert!(m >= last, "n {n}: {m} < {last}");
            last = m;
            if n < 8192 {
                assert!(log2_failure(n, m, 3) <= -40.0 || m == 10404, "n {n} m {m}");
            }
        }
        assert_eq!(min_bins(1 << 20, 3, 40.0, 1.27, 8192), 1_331_692);
    }

    #[test]
    fn the_published_estimate_is_not_proven_by_the_bound() {
        // At 1.27·N the union bound is useless for large N (hence the
        // experimental size there), but fine at small N with more bins.
        assert!(log2_failure(4096, 5202, 3) > 0.0);
        assert!(log2_failure(100, 230, 3) <= -40.0);
    }
}
