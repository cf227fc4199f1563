//! Lower-case hexadecimal, the one way database ids (in `shard.json`, the
//! manifest, `psikit he db info`) and non-text labels are written. Its own
//! file because the shard files, the router and the facade's labels all
//! need it and none of them should depend on another for it.

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
