//! Server-side configuration of the filter protocol.

use crate::error::Error;

/// How the server builds and maintains its filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterConfig {
    /// Target false-positive probability per client item is `2^-fpr_log2`.
    pub fpr_log2: u32,
    /// Fingerprint slots per bucket (4 is the cuckoo filter's sweet spot: it
    /// reaches 95% load with few kicks).
    pub bucket_size: u32,
    /// Load at which a new filter is built. Below `rebuild_load` so that
    /// updates can insert for a while before the filter must be rebuilt.
    pub build_load: f64,
    /// Load past which an update rebuilds a larger filter.
    pub rebuild_load: f64,
    /// Epochs of change history kept for deltas; clients further behind get
    /// the full filter.
    pub history_epochs: u32,
}

impl Default for FilterConfig {
    fn default() -> Self {
        Self {
            fpr_log2: 30,
            bucket_size: 4,
            build_load: 0.90,
            rebuild_load: 0.95,
            history_epochs: 64,
        }
    }
}

impl FilterConfig {
    /// Rejects settings that would be insecure or unworkable.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: &str| Err(Error::Config(why.to_string()));
        if !(8..=60).contains(&self.fpr_log2) {
            return bad("false-positive exponent must be between 8 and 60");
        }
        if !(1..=8).contains(&self.bucket_size) {
            return bad("bucket size must be between 1 and 8");
        }
        if !(0.05..=0.98).contains(&self.build_load) {
            return bad("build load must be between 0.05 and 0.98");
        }
        if !(self.build_load..=0.98).contains(&self.rebuild_load) {
            return bad("rebuild load must be between the build load and 0.98");
        }
        if self.history_epochs == 0 {
            return bad("history must keep at least one epoch");
        }
        Ok(())
    }
}
