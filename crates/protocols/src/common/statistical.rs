//! The statistical security parameter σ of a run: each of its statistical
//! events (a false match between distinct items, a structure that fails to
//! build, a cheating party passing a cut-and-choose) has probability at
//! most 2^-σ. One run takes σ = 40, the project's bar. A job of B bucket
//! runs gives each [`per_run`]`(B)` = 40 + ⌈log2 B⌉, so that the union
//! bound over its buckets keeps the whole job within 2^-40 too.
//!
//! σ is not negotiated: both parties derive it from what they agreed (a
//! one-shot run's default, a job's bucket count), and a run whose peer
//! took another σ fails on the first length that differs.

use crate::error::Error;

/// The project's statistical security: 2^-40 for any run or job.
pub const STATISTICAL_BITS: u32 = 40;

/// The largest σ a run accepts: 40 + log2 of the most buckets a job may
/// have (2^16), with room; it keeps summary values and tags within 128
/// bits for the set sizes a run accepts.
pub const MAX_STATISTICAL_BITS: u32 = 64;

/// σ for each of `runs` runs whose failures must add up to at most 2^-40.
pub fn per_run(runs: u64) -> u32 {
    STATISTICAL_BITS + runs.max(1).next_power_of_two().ilog2()
}

/// Refuses a σ below the bar or above [`MAX_STATISTICAL_BITS`].
pub fn check(sigma: u32) -> Result<(), Error> {
    match (STATISTICAL_BITS..=MAX_STATISTICAL_BITS).contains(&sigma) {
        true => Ok(()),
        false => Err(Error::Config(format!(
            "statistical security σ = {sigma} bits is outside \
             {STATISTICAL_BITS}..={MAX_STATISTICAL_BITS}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_share_the_bound_of_one() {
        assert_eq!(per_run(0), 40);
        assert_eq!(per_run(1), 40);
        assert_eq!(per_run(2), 41);
        assert_eq!(per_run(3), 42);
        assert_eq!(per_run(64), 46);
        assert_eq!(per_run(1 << 16), 56);
        // B runs at 2^-σ each add up to at most 2^-40.
        for b in [1u64, 5, 64, 1000, 1 << 16] {
            assert!((b as f64).log2() - f64::from(per_run(b)) <= -40.0);
        }
        assert!(check(39).is_err() && check(65).is_err());
        assert!(check(40).is_ok() && check(per_run(1 << 16)).is_ok());
    }
}
