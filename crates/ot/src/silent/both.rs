//! What the sender and the receiver of a silent extension both do: lay the
//! extension out (`plan`), pack a check share, join the parts' outputs,
//! run on the configured pool.

use std::time::Duration;

use super::ggm;
use super::params::{self, Noise, SilentParams};

/// Where one extension's time went at one party: wall time on the
/// calling task, so time spent waiting on the peer counts where it
/// happens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Times {
    /// The base correlations (IKNP or KOS), their round trips included.
    pub base: Duration,
    /// The GGM trees: the sender expanding them (twice for an extension of
    /// several parts: once to send, once to compress), the receiver
    /// rebuilding them.
    pub trees: Duration,
    /// The Expand-Convolute code (the receiver encodes twice: its leaves
    /// and its noise).
    pub code: Duration,
    /// The rest: sending the trees, the receiver waiting for them, the
    /// malicious check, copying outputs.
    pub other: Duration,
}

impl std::ops::AddAssign for Times {
    fn add_assign(&mut self, more: Times) {
        self.base += more.base;
        self.trees += more.trees;
        self.code += more.code;
        self.other += more.other;
    }
}

impl Times {
    /// `other` set so that the parts add up to `total`.
    pub(super) fn with_total(mut self, total: Duration) -> Self {
        self.other = total.saturating_sub(self.base + self.trees + self.code);
        self
    }
}

/// Runs `work`, adding its wall time to `into`.
pub(super) fn timed<T>(into: &mut Duration, work: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let out = work();
    *into += start.elapsed();
    out
}

/// An extension of `count` as both roles lay it out: its parts' shapes
/// ([`params::parts`]) and their trees' tweaks, under the next extension
/// number of the session (`extensions` counts them alike on both sides).
pub(super) fn plan(
    count: usize,
    noise: Noise,
    sid: &crate::session::SessionId,
    extensions: &mut u64,
) -> Result<(Vec<SilentParams>, Vec<ggm::Tweaks>), crate::error::OtError> {
    let shapes = params::parts(count)
        .into_iter()
        .map(|c| SilentParams::for_count(c, noise))
        .collect::<Result<Vec<_>, _>>()?;
    let tweaks = (0..shapes.len())
        .map(|k| ggm::Tweaks::new(sid, *extensions, k))
        .collect();
    *extensions += 1;
    Ok((shapes, tweaks))
}

/// `Σ_j v_j·X^j` over the correlated-OT values of one share (at most 128).
pub(super) fn pack_share(values: &[u128]) -> u128 {
    let powers: [u128; 128] = std::array::from_fn(|j| 1u128 << j);
    crate::gf128::reduce(crate::gf128::inner_product(values, &powers[..values.len()]))
}

/// Runs `work` on the configuration's pool, or where we are.
pub(super) fn run<T: Send>(config: &crate::ext::ExtConfig, work: impl FnOnce() -> T + Send) -> T {
    match config.pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}
