//! The benchmark's fixed settings, read both by the worker's measurements
//! and by the tables that describe them.

/// Blinded elements per timing of `blind_evaluate_batch`.
pub(super) const EVAL_ITEMS: u64 = 1 << 14;
/// Ids with this remainder mod 100 are removed by the 1% update.
pub(super) const REMOVED_RESIDUE: u64 = 37;
/// Load from other processes below which the machine counts as quiet.
pub(super) const QUIET_CORES: f64 = 0.25;
