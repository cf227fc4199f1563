//! Lower-case hexadecimal, the one way database ids (in `shard.json`, the
//! manifest, `psikit he db info`) and non-text labels are written, and
//! the one reader of a database id written so. Its own file because the
//! shard files, the router and the facade's labels all need it and none of
//! them should depend on another for it.

use crate::error::Error;

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// A database id from its 64 hex digits (as [`hex`] writes it).
pub(crate) fn db_id_from_hex(text: &str) -> Result<[u8; 32], Error> {
    let mut id = [0u8; 32];
    ::hex::decode_to_slice(text, &mut id)
        .map_err(|_| Error::StateFile(format!("a database id is 64 hex digits, got {text:?}")))?;
    Ok(id)
}
