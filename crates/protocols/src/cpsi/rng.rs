//! The per-bin randomness of a run (tags, masks, shuffles, OT pads).

use crate::error::Error;

/// A fast CSPRNG (ChaCha, `StdRng`) seeded from the OS: per-bin
/// randomness (tags, masks) would cost a system call per value with
/// `OsRng`.
pub(super) fn rng() -> Result<rand::rngs::StdRng, Error> {
    use rand::SeedableRng;
    rand::rngs::StdRng::from_rng(rand::rngs::OsRng)
        .map_err(|e| Error::task("seeding the random generator", e))
}
