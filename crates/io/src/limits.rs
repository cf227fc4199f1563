//! The limits every protocol applies to keys: here, not in `spec.rs`, so that
//! the error texts and the key reader both take them from below.

/// Longest encoded key psikit accepts, in every protocol: the OPRF's input
/// limit (RFC 9497 inputs carry a 2-byte length), checked while reading so
/// the error names the file and row.
pub const MAX_KEY_BYTES: usize = 65_535;

/// Longest [`crate::KeySpec::key_format`] a peer or a file may state (ours are
/// under 60 bytes).
pub const MAX_KEY_FORMAT: u64 = 256;

/// Most label columns whose names a server publishes, and the longest
/// name, in bytes: bounds for the peers and files that state them.
pub const MAX_LABEL_COLUMNS: usize = 256;
pub const MAX_LABEL_NAME: u64 = 256;
