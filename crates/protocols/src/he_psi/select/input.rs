//! The workload parameters are chosen for, and what the choice optimizes.

use super::limits::DEFAULT_MAX_FPP_LOG2;
use super::outcome::CostEstimate;

/// What the selection optimizes: the estimated latency of one query
/// (server and client time plus transfer) on a fast, a slow or a given
/// link.
///
/// Pricing bytes as transfer time keeps every goal sensible: pure server
/// time would always prefer the smallest bins and dozens of result
/// ciphertexts, pure byte counts any depth to save one ciphertext. A larger
/// price per byte can only lower the byte count of the best candidate, so
/// `Comm` sends no more than `Time` (unless a self-test rejects one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// Latency with bytes at [`TIME_LINK_MBPS`] (100 Mbit/s).
    Time,
    /// Latency with bytes at [`COMM_LINK_MBPS`] (10 Mbit/s).
    Comm,
    /// Latency with bytes at this many Mbit/s (the user's own link).
    Link(f64),
}

/// Link speed the `Time` goal prices bytes at, in Mbit/s (a typical
/// wide-area link; at 1 Gbit/s the selection buys small speed-ups with many
/// megabytes of results).
pub const TIME_LINK_MBPS: f64 = 100.0;
/// Link speed the `Comm` goal prices bytes at, in Mbit/s.
pub const COMM_LINK_MBPS: f64 = 10.0;

impl Goal {
    /// The link speed bytes are priced at, in Mbit/s.
    pub fn link_mbps(self) -> f64 {
        match self {
            Goal::Time => TIME_LINK_MBPS,
            Goal::Comm => COMM_LINK_MBPS,
            Goal::Link(mbps) => mbps,
        }
    }

    /// The estimated query latency this goal minimizes, in ms.
    pub fn latency_ms(self, e: &CostEstimate) -> f64 {
        // 1 Mbit/s carries 125 bytes per ms.
        let bytes_per_ms = self.link_mbps() * 125.0;
        e.server_ms + e.client_ms + (e.bytes_up + e.bytes_down) as f64 / bytes_per_ms
    }
}

/// The workload parameters are chosen for.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectionInput {
    /// Items the server will hold, growth included: the bin bundles per
    /// bundle index, and with them FPP and response size, grow with it.
    pub server_items: u64,
    /// Items a client typically queries at once.
    pub client_items: u64,
    /// Longest label in bytes (0: unlabeled).
    pub label_bytes: usize,
    /// What to optimize.
    pub goal: Goal,
    /// Largest acceptable log2 false-positive probability per query.
    pub max_fpp_log2: f64,
    /// Shards the `server_items` are split into (1: one database). Each
    /// shard fills its own bin bundles, so every bundle index holds at
    /// least one bundle per shard: the client compares against (and
    /// receives) the bundles of every shard, which the FPP bound, the
    /// response size and the server's work must count.
    pub shards: u32,
}

impl SelectionInput {
    /// A time-optimized selection with the paper's 2^-40 FPP bound.
    pub fn new(server_items: u64, client_items: u64, label_bytes: usize) -> Self {
        Self {
            server_items,
            client_items,
            label_bytes,
            goal: Goal::Time,
            max_fpp_log2: DEFAULT_MAX_FPP_LOG2,
            shards: 1,
        }
    }
}
