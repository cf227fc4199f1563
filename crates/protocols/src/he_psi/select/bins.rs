//! Bin load statistics: how many server items a bin must hold so that all
//! bins stay under the budget with high probability (a Poisson tail).

/// Probability, over all bins together, that the server's items exceed the
/// budgeted bin load: the price is one more bin bundle somewhere (time,
/// bytes, slightly worse FPP), never correctness.
const OVERFLOW_PROBABILITY: f64 = 0.01;

/// Server items per bin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Load {
    pub(super) mean: f64,
    pub(super) max: u32,
}

/// Loads of one shard's bins when `items` are spread over `shards` shards
/// and go into `hashes` bins each out of a shard's `bins`.
///
/// A bin's load is binomial, close to Poisson with mean `λ = h·N/(S·T)`
/// (a shard's item count varies too, which the Poisson law of a fixed
/// mean already covers); the budget is the smallest `L` with
/// `S·T · P(X > L) <= 1%`, since every shard's bins must stay under it.
pub(super) fn bin_load(items: u64, hashes: u32, bins: u32, shards: u32) -> Load {
    let all_bins = f64::from(bins.max(1)) * f64::from(shards.max(1));
    let mean = items as f64 * f64::from(hashes) / all_bins;
    let per_bin = OVERFLOW_PROBABILITY / all_bins;
    Load {
        mean,
        max: poisson_quantile(mean, per_bin).max(1),
    }
}

/// Smallest `L >= mean` with `P(Poisson(mean) > L) <= p`.
///
/// Uses the bound `P(X > L) <= pmf(L+1) / (1 - mean/(L+2))` (above the
/// mean, successive terms shrink at least geometrically), which decreases
/// in `L`, so a doubling then a bisection find `L` in logarithmic time even
/// for huge means.
fn poisson_quantile(mean: f64, p: f64) -> u32 {
    if mean <= 0.0 {
        return 0;
    }
    let log_p = p.ln();
    let below = |l: f64| {
        let k = l + 1.0;
        let ratio = mean / (k + 1.0);
        ratio < 1.0 && -mean + k * mean.ln() - ln_factorial(k) - (1.0 - ratio).ln() <= log_p
    };
    let mut lo = mean.floor();
    let mut step = 1.0;
    while !below(lo + step) {
        lo += step;
        step *= 2.0;
    }
    let mut hi = lo + step;
    while hi - lo > 1.0 {
        let mid = ((lo + hi) / 2.0).floor();
        if below(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let l = if below(lo) { lo } else { hi };
    l.min(f64::from(u32::MAX)) as u32
}

/// `ln(k!)`: exact for small `k`, Stirling's series (error below 1e-10)
/// above.
fn ln_factorial(k: f64) -> f64 {
    if k < 20.0 {
        return (2..=k as u64).map(|i| (i as f64).ln()).sum();
    }
    k * k.ln() - k + 0.5 * (2.0 * std::f64::consts::PI * k).ln() + 1.0 / (12.0 * k)
        - 1.0 / (360.0 * k.powi(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_quantile_brackets_the_tail() {
        assert_eq!(poisson_quantile(0.0, 0.01), 0);
        // Mean 80, 1% over 819 bins: about 4.4 sigma above the mean.
        let l = poisson_quantile(80.0, 0.01 / 819.0);
        assert!((115..=125).contains(&l), "{l}");
        // Exact tail at and below the answer.
        let tail = |mean: f64, l: u32| -> f64 {
            let mut pmf = (-mean).exp();
            let mut below = pmf;
            for k in 1..=l {
                pmf *= mean / f64::from(k);
                below += pmf;
            }
            1.0 - below
        };
        assert!(tail(80.0, l) <= 0.01 / 819.0);
        assert!(tail(80.0, l - 3) > 0.01 / 819.0);
        let big = poisson_quantile(1e6, 1e-6);
        assert!((1_004_000..=1_006_000).contains(&big), "{big}");
        for k in [0.0, 1.0, 5.0, 19.0, 20.0, 50.0] {
            let exact: f64 = (2..=k as u64).map(|i| (i as f64).ln()).sum();
            assert!((ln_factorial(k) - exact).abs() < 1e-9, "{k}");
        }
    }
}
