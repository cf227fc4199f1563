//! The bounds a selection holds a parameter set to: its false-positive
//! bound, the noise budget it must keep and the self-test runs that confirm
//! it. In a file of their own so that the search, the noise model and the
//! self-test read the same numbers.

/// The false-positive bound the paper targets: 2^-40 per query.
pub const DEFAULT_MAX_FPP_LOG2: f64 = -40.0;
/// Noise budget, in bits, that a parameter set must keep in the worst case.
/// Four bits is a factor 16 on the noise: room for unlucky keys and inputs
/// beyond the runs a self-test can afford.
pub const NOISE_MARGIN_BITS: i64 = 4;
/// Self-test runs [`select`] performs on its choice.
pub const SELECT_SELF_TEST_RUNS: usize = 2;
