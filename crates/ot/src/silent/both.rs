//! What the sender and the receiver of a silent extension both do: lay the
//! extension out (`plan`), pack a check share, join the parts' outputs,
//! run on the configured pool.

use super::ggm;
use super::params::{self, Noise, SilentParams};

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
