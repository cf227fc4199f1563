//! A shard's own description (`shard.json`): which database it belongs
//! to, its index, the shard count and its epoch. The server reads it when
//! it loads a shard's directory and the shard build writes it, so it
//! lives with the server, below the sharding layer; the JSON helpers here
//! also serve the router's manifest.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::common::files::write_atomic;
use crate::error::Error;
use crate::he_psi::common::hex::{db_id_from_hex, hex};

/// Most shards a database may have.
pub const MAX_SHARDS: u32 = 1 << 12;
/// A shard directory's description.
pub const SHARD_FILE: &str = "shard.json";
const SHARD_FORMAT: &str = "psikit-he-shard-v1";
/// Largest description file read (the manifest of 4096 shards with a few
/// thousand bundle indices each is well below).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Checks a shard count: a power of two, so that splitting every shard in
/// two doubles it (an item of shard `i` of `n` is in shard `i` or `i + n`
/// of `2n`).
pub fn check_shard_count(shards: u32) -> Result<(), Error> {
    if shards.is_power_of_two() && shards <= MAX_SHARDS {
        return Ok(());
    }
    Err(Error::Config(format!(
        "the shard count must be a power of two from 1 to {MAX_SHARDS}, got {shards}"
    )))
}

/// What a shard's directory says about it (`shard.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    format: String,
    /// The database id clients' queries must name (hex), as the router
    /// computes it from the parameters and the key.
    pub db_id: String,
    pub index: u32,
    pub shards: u32,
    /// Bumped by every update, so a router can tell which shards applied it.
    pub epoch: u64,
}

impl ShardInfo {
    pub fn new(db_id: [u8; 32], index: u32, shards: u32, epoch: u64) -> Self {
        Self {
            format: SHARD_FORMAT.into(),
            db_id: hex(&db_id),
            index,
            shards,
            epoch,
        }
    }

    /// The database id as bytes.
    pub fn db_id(&self) -> Result<[u8; 32], Error> {
        db_id_from_hex(&self.db_id)
    }

    /// Reads `dir`'s `shard.json`, checking its fields.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(SHARD_FILE);
        let info: Self = read_json(&path)?;
        info.check().map_err(|why| bad(&path, why))?;
        Ok(info)
    }

    /// What [`ShardInfo::load`] checks beyond the JSON's shape.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.format != SHARD_FORMAT {
            return Err(format!("format {:?}", self.format));
        }
        check_shard_count(self.shards).map_err(|e| e.to_string())?;
        if self.index >= self.shards {
            return Err(format!("shard {} of {}", self.index, self.shards));
        }
        self.db_id()
            .map_err(|_| "a malformed database id".to_string())?;
        Ok(())
    }

    /// Writes `dir`'s `shard.json` atomically.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        write_json(&dir.join(SHARD_FILE), self)
    }
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, Error> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let limited = std::io::Read::take(std::io::BufReader::new(file), MAX_FILE_BYTES);
    serde_json::from_reader(limited).map_err(|e| bad(path, e.to_string()))
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), Error> {
    write_atomic(path, |w| {
        serde_json::to_writer_pretty(&mut *w, value).map_err(std::io::Error::other)
    })
}

pub(crate) fn bad(path: &Path, what: String) -> Error {
    Error::StateFile(format!("{}: {what}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_that_are_no_power_of_two_are_refused() {
        for bad in [0, 3, 6, MAX_SHARDS * 2] {
            assert!(check_shard_count(bad).is_err(), "{bad}");
        }
        assert!(check_shard_count(1).is_ok() && check_shard_count(MAX_SHARDS).is_ok());
    }

    #[test]
    fn descriptions_round_trip_and_damaged_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let info = ShardInfo::new([7; 32], 3, 4, 2);
        info.save(dir.path()).unwrap();
        assert_eq!(ShardInfo::load(dir.path()).unwrap(), info);
        assert_eq!(info.db_id().unwrap(), [7; 32]);
        for (text, why) in [
            (
                r#"{"format":"psikit-he-shard-v1","db_id":"00","index":0,"shards":1,"epoch":0}"#,
                "id",
            ),
            (
                r#"{"format":"psikit-he-shard-v1","db_id":"0000000000000000000000000000000000000000000000000000000000000000","index":4,"shards":4,"epoch":0}"#,
                "index",
            ),
            (
                r#"{"format":"other","db_id":"0000000000000000000000000000000000000000000000000000000000000000","index":0,"shards":1,"epoch":0}"#,
                "format",
            ),
            ("not json", "json"),
        ] {
            std::fs::write(dir.path().join(SHARD_FILE), text).unwrap();
            assert!(ShardInfo::load(dir.path()).is_err(), "{why}");
        }
    }
}
