//! A database split into shards that answer the **same** query.
//!
//! Shards share the parameters, the label room and the OPRF key (which
//! only the router holds), and each holds the items whose OPRF output
//! falls in it ([`shard_of`]). A client's query is encrypted once; every
//! shard evaluates it on its own bin bundles and returns result packages,
//! and the client processes them all as it would a bigger database's. So
//! a query goes to every shard and reveals nothing beyond what an
//! unsharded database of the same total size reveals: the client learns
//! the bundle counts per bundle index summed over the shards (what it
//! learns of any database) and no shard learns which of its items matched.
//! APSI's advice for big databases, shards the client picks by item, leaks
//! the shard of each queried item; this does not.
//!
//! Files:
//! * a shard's directory holds `he.db` (its part of the database) and
//!   `shard.json` ([`ShardInfo`], in the server's `shard_info.rs` since
//!   the server loads it: the database id, its index, the shard
//!   count and the epoch), never `oprf.key`;
//! * the router's directory holds `oprf.key` and `manifest.json`
//!   ([`Manifest`]: the parameters and, per shard, its bundle counts).

use std::path::{Path, PathBuf};

use psikit_primitives::oprf::Output;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::he_psi::common::hex::{db_id_from_hex, hex};
use crate::he_psi::common::shape::DbShape;
use crate::he_psi::params::PsiParams;
#[cfg(doc)]
use crate::he_psi::server::shard_info::ShardInfo;
use crate::he_psi::server::shard_info::{bad, check_shard_count, read_json, write_json};

/// A router directory's description of the shards.
pub const MANIFEST_FILE: &str = "manifest.json";
const MANIFEST_FORMAT: &str = "psikit-he-shards-v1";

/// The shard of an item with OPRF output `output` among `shards` (a power
/// of two). Hashed under its own domain rather than read off the output,
/// whose bytes also place the item in its cuckoo bins: each shard's items
/// then spread over all bins as a smaller database's would.
pub fn shard_of(output: &Output, shards: u32) -> u32 {
    let digest = Sha256::new()
        .chain_update(b"psikit he shard")
        .chain_update(output)
        .finalize();
    let word = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]);
    word & (shards - 1)
}

/// What a router's directory says about the shards (`manifest.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    format: String,
    pub db_id: String,
    /// The parameters, in APSI's JSON format.
    pub params: String,
    pub max_label_bytes: usize,
    /// How the keys are encoded (`psikit_io::KeySpec::key_format`).
    pub key_format: String,
    /// The label columns' names (`psikit_io::KeySpec::label_names`); empty
    /// in manifests written before they were recorded.
    #[serde(default)]
    pub label_columns: Vec<String>,
    pub epoch: u64,
    /// Per shard, its bundle count per bundle index.
    pub bundle_counts: Vec<Vec<u32>>,
    /// Per shard, its item count.
    pub items: Vec<u64>,
}

impl Manifest {
    pub fn new(
        db_id: [u8; 32],
        params: &PsiParams,
        max_label_bytes: usize,
        (key_format, label_columns): (String, Vec<String>),
    ) -> Self {
        Self {
            format: MANIFEST_FORMAT.into(),
            db_id: hex(&db_id),
            params: params.to_apsi_json(),
            max_label_bytes,
            key_format,
            label_columns,
            epoch: 0,
            bundle_counts: Vec::new(),
            items: Vec::new(),
        }
    }

    /// The database id as bytes.
    pub fn db_id(&self) -> Result<[u8; 32], Error> {
        db_id_from_hex(&self.db_id)
    }

    pub fn shards(&self) -> u32 {
        self.bundle_counts.len() as u32
    }

    /// The bundle counts a client is told: per bundle index, the sum over
    /// the shards (a sharded database looks like one database).
    pub fn total_bundle_counts(&self) -> Vec<u32> {
        let width = self.bundle_counts.iter().map(Vec::len).max().unwrap_or(0);
        (0..width)
            .map(|i| self.bundle_counts.iter().filter_map(|c| c.get(i)).sum())
            .collect()
    }

    /// Reads `dir`'s `manifest.json`, checking its fields.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(MANIFEST_FILE);
        let m: Self = read_json(&path)?;
        m.check().map_err(|why| bad(&path, why))?;
        Ok(m)
    }

    /// The manifest as JSON, as a build's stages pass it to each other.
    pub fn to_json(&self) -> String {
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads [`Manifest::to_json`]'s text, checking its fields.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let m: Self =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("a shard plan: {e}")))?;
        m.check()
            .map_err(|why| Error::Config(format!("a shard plan: {why}")))?;
        Ok(m)
    }

    /// What [`Manifest::load`] checks beyond the JSON's shape: the format,
    /// the parameters and label room (as a database of them would be
    /// made), for every shard one bundle count per bundle index (or none
    /// yet, in a plan), and totals a client's parameter message can carry.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.format != MANIFEST_FORMAT {
            return Err(format!("format {:?}", self.format));
        }
        check_shard_count(self.shards()).map_err(|e| e.to_string())?;
        if self.items.len() != self.bundle_counts.len() {
            return Err("item counts for another number of shards".into());
        }
        db_id_from_hex(&self.db_id).map_err(|_| "a malformed database id".to_string())?;
        let long = |n: &String| n.len() as u64 > psikit_io::MAX_LABEL_NAME;
        if self.label_columns.len() > psikit_io::MAX_LABEL_COLUMNS
            || self.label_columns.iter().any(long)
        {
            return Err("too many or too long label column names".into());
        }
        let params = PsiParams::from_apsi_json(&self.params).map_err(|e| e.to_string())?;
        let shape = DbShape::new(&params, self.max_label_bytes).map_err(|e| e.to_string())?;
        let width = shape.bundle_idx_count();
        if (self.bundle_counts.iter()).any(|c| !c.is_empty() && c.len() != width) {
            return Err("bundle counts for other parameters".into());
        }
        let total = |i: usize| -> u64 {
            let counts = self.bundle_counts.iter().filter_map(|c| c.get(i));
            counts.map(|&c| u64::from(c)).sum()
        };
        if (0..width).any(|i| total(i) > u64::from(u32::MAX)) {
            return Err("more bundles than a database can hold".into());
        }
        Ok(())
    }

    /// Writes `dir`'s `manifest.json` atomically.
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        write_json(&dir.join(MANIFEST_FILE), self)
    }

    /// Path of the manifest in a router directory (watched for reloads).
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(MANIFEST_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_evenly_and_a_doubling_splits_each_shard_in_two() {
        let outputs: Vec<Output> = (0..40_000u32)
            .map(|i| {
                let mut o = [0u8; 64];
                o[..4].copy_from_slice(&i.to_le_bytes());
                o
            })
            .collect();
        let mut counts = [0usize; 8];
        for o in &outputs {
            let s = shard_of(o, 8);
            counts[s as usize] += 1;
            assert_eq!(
                shard_of(o, 4),
                s % 4,
                "shard i of 8 lies in shard i mod 4 of 4"
            );
            assert_eq!(shard_of(o, 1), 0);
        }
        // 5,000 expected per shard; 6 sigma is about 400.
        assert!(
            counts.iter().all(|&c| (4600..5400).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn manifests_must_fit_their_parameters() {
        let json = crate::he_psi::presets::apsi_preset("256K-1024").unwrap();
        let params = PsiParams::from_apsi_json(json).unwrap();
        let width = DbShape::new(&params, 16).unwrap().bundle_idx_count();
        let mut m = Manifest::new([1; 32], &params, 16, (String::new(), Vec::new()));
        // A plan: two shards, not built yet.
        m.bundle_counts = vec![Vec::new(); 2];
        m.items = vec![0; 2];
        assert_eq!(Manifest::from_json(&m.to_json()).unwrap(), m);
        m.bundle_counts = vec![vec![3; width]; 2];
        assert_eq!(Manifest::from_json(&m.to_json()).unwrap(), m);
        assert_eq!(m.total_bundle_counts(), vec![6; width]);
        let refused = |change: &dyn Fn(&mut Manifest)| {
            let mut bad = m.clone();
            change(&mut bad);
            Manifest::from_json(&bad.to_json()).is_err()
        };
        assert!(refused(&|b| {
            b.bundle_counts[1].pop();
        }));
        assert!(refused(
            &|b| b.bundle_counts = vec![vec![u32::MAX; width]; 2]
        ));
        assert!(refused(&|b| b.max_label_bytes = usize::MAX));
        assert!(refused(&|b| b.params = "{}".into()));
    }
}
