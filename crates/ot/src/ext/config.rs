//! The extension's constants and settings: what its sender, receiver and
//! shared checks all read (here rather than in `mod.rs`, which only
//! declares and re-exports).

use std::sync::Arc;

use psikit_transport::frame::HEADER_LEN;
use psikit_transport::Channel;

use super::outputs::RowHash;
use crate::error::OtError;
use crate::matrix::SUB_BATCH;
use crate::messages::{Mode, KOS_CONFIRMED, KOS_UNCONFIRMED};

/// Base OTs (and matrix columns) of the 1-out-of-2 extension.
pub const BASE_OTS: usize = 128;

/// Extra rows a KOS extension adds for its consistency check.
pub const KOS_EXTRA_ROWS: usize = 128;

/// Default rows per matrix frame: 1 MiB of matrix per frame.
pub const DEFAULT_FRAME_ROWS: usize = 1 << 16;

/// Most OTs one extension call may produce.
pub const MAX_OTS: usize = 1 << 36;

/// Whether the sender of a KOS extension confirms a passed check with a
/// message of its own (`KOS_OK`), which the receiver waits for.
///
/// Both parties choose the same: the receiver announces its choice in the
/// extension header and the sender refuses a header that disagrees, so the
/// two flows never mix. Without confirmation the receiver goes on right
/// after sending its check; a failed check still reaches it, as the
/// sender's error frame in place of the next message it reads from the
/// sender. That suits a protocol whose receiver hears from the sender later
/// in any case, before anything depends on the check having passed (the
/// receiver's own security never does). IKNP has no check and ignores this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confirm {
    /// The sender confirms a passed check and the receiver waits for it.
    Yes,
    /// The sender stays silent unless the check fails.
    No,
}

/// Semi-honest (IKNP) or malicious (KOS) security.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    SemiHonest,
    Malicious,
}

impl Security {
    /// The header's mode and parameter (IKNP has no check, so no
    /// parameter).
    pub(super) fn header(self, confirm: Confirm) -> (Mode, u16) {
        match (self, confirm) {
            (Security::SemiHonest, _) => (Mode::Iknp, 0),
            (Security::Malicious, Confirm::Yes) => (Mode::Kos, KOS_CONFIRMED),
            (Security::Malicious, Confirm::No) => (Mode::Kos, KOS_UNCONFIRMED),
        }
    }

    pub(super) fn hash(self) -> RowHash {
        match self {
            Security::SemiHonest => RowHash::Cr,
            Security::Malicious => RowHash::Tccr,
        }
    }
}

/// Tuning that does not change the protocol's security.
#[derive(Clone, Debug)]
pub struct ExtConfig {
    /// Pool for the parallel parts; `None` uses rayon's global pool.
    pub pool: Option<Arc<rayon::ThreadPool>>,
    /// Rows per matrix frame the receiver sends (rounded down to a multiple
    /// of the 1024-row sub-batch and capped by the channel's frame limit).
    pub frame_rows: usize,
}

impl Default for ExtConfig {
    fn default() -> Self {
        Self {
            pool: None,
            frame_rows: DEFAULT_FRAME_ROWS,
        }
    }
}

impl ExtConfig {
    /// A configuration with its own pool of `threads` threads.
    pub fn with_threads(threads: usize) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        Ok(Self {
            pool: Some(Arc::new(pool)),
            ..Self::default()
        })
    }

    pub(crate) fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_deref()
    }

    /// Rows per frame for a matrix of `columns` columns on `chan`.
    pub(crate) fn frame_rows_for(&self, chan: &Channel, columns: usize) -> Result<usize, OtError> {
        let max_payload = (chan.limits().max_frame_bytes as usize).saturating_sub(HEADER_LEN);
        let fit = max_payload / (columns / 8);
        let rows = self.frame_rows.min(fit) / SUB_BATCH * SUB_BATCH;
        if rows == 0 {
            return Err(OtError::InvalidArgument(format!(
                "frames of {} bytes cannot hold one {SUB_BATCH}-row batch of the OT matrix",
                chan.limits().max_frame_bytes
            )));
        }
        Ok(rows)
    }
}
