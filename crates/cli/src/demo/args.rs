//! The demo's command-line arguments, read by every family's demo.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Unbalanced PSI: DH OPRF + updatable cuckoo filter.
    #[cfg(feature = "filter")]
    Filter,
    /// Balanced PSI: silent VOLE + OKVS (VOLE-PSI).
    #[cfg(feature = "vole")]
    Psi,
    /// Malicious-secure PSI: OT extension + garbled Bloom filter (RR16).
    #[cfg(feature = "rr16")]
    Rr16,
    /// Circuit PSI: cardinality, sum, threshold, union and shares.
    #[cfg(feature = "cpsi")]
    Cpsi,
    /// Unbalanced labeled PSI: homomorphic encryption (APSI design).
    #[cfg(feature = "he")]
    He,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Which protocol to demonstrate (default: all).
    pub protocol: Option<Protocol>,
    /// Server set size.
    #[arg(long, default_value_t = 1 << 16)]
    pub server_items: u64,
    /// Client set size.
    #[arg(long, default_value_t = 1024)]
    pub client_items: u64,
    /// How many client items are in the server's set.
    #[arg(long, default_value_t = 100)]
    pub overlap: u64,
    /// Server set size of the HE demo.
    #[arg(long, default_value_t = 4096)]
    pub he_server_items: u64,
    /// Client set size of the HE demo.
    #[arg(long, default_value_t = 256)]
    pub he_client_items: u64,
    /// How many HE client items are in the server's set.
    #[arg(long, default_value_t = 64)]
    pub he_overlap: u64,
    /// Keep generated files here instead of a temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
}
