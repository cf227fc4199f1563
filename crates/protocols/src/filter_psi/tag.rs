//! A filter tag: what the filter holds of each item (the start of its
//! OPRF output).

/// A 16-byte filter tag derived from an OPRF output.
pub type Tag = [u8; 16];

/// Derives the filter tag from an OPRF output. The output is already a
/// SHA-512 digest bound to the server key and the item, so a prefix is a
/// uniformly random tag.
pub fn tag_from_output(output: &[u8; 64]) -> Tag {
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&output[..16]);
    tag
}
