//! The client's OPRF cache: its items' tags from the last query, so a
//! repeated query asks the server only for the items it has not seen.
//!
//! # Which key a cached tag belongs to
//!
//! A tag is `F(k, item)` under the server's key `k`; after a key change
//! every cached tag is wrong. Mode 0 of the OPRF publishes nothing about
//! the key, so the client measures it: every query also asks for the tag
//! of a fixed public input, [`CANARY`], blinded like any item (the server
//! cannot tell it from the others). That tag is the key's identity: the
//! cache holds the canary tag its entries were made under, and entries
//! are used only when this query's canary tag is the same. On a
//! mismatch the cache is dropped and the items it held are asked again,
//! in a second round.
//!
//! # What it reveals
//!
//! To the server: the number of items not in the cache (plus one) instead
//! of the number of items, that is how many items changed since the last
//! query. On disk: a 16-byte hash of each item, which is enough to test a
//! guess of an item (a phone number, say); the file is owner-only, like
//! the input it comes from.
//!
//! # File
//!
//! `PSIKTAG\0`, a version byte, the canary tag, the entry count, the
//! entries (item hash, tag) sorted by hash, then the SHA-256 of all of it.
//! Written atomically; anything else (a flipped bit, a truncation) is
//! refused as damaged and the query runs without the cache.

use std::fs;
use std::io::Write;
use std::path::Path;

use psikit_transport::{Reader, Writer};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::tag::Tag;
use crate::common::files::write_atomic_private;
use crate::error::Error;

const MAGIC: &[u8; 8] = b"PSIKTAG\0";
const VERSION: u8 = 1;
/// Bytes of one entry in the file: the item's hash and its tag.
const ENTRY_LEN: usize = 32;

/// The public input whose tag identifies the server's key.
pub const CANARY: &[u8] = b"psikit filter: key identity canary v1";

/// A 16-byte hash of an item, the cache's index.
pub type ItemHash = [u8; 16];

/// The tags of the last query's items, under the key whose canary tag is
/// `key_id`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TagCache {
    key_id: Option<Tag>,
    /// Sorted by hash, no duplicates.
    entries: Vec<(ItemHash, Tag)>,
}

impl TagCache {
    /// [`TagCache::hash`] of each item, in parallel.
    pub fn hash_all(items: &[Vec<u8>]) -> Vec<ItemHash> {
        items.par_iter().map(|i| Self::hash(i)).collect()
    }

    /// The cache's index for `item`.
    pub fn hash(item: &[u8]) -> ItemHash {
        let digest = Sha256::new()
            .chain_update(b"psikit tag cache v1\0")
            .chain_update(item)
            .finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        out
    }

    /// How many tags it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no tag.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The cached tag of each hash, if any. The hashes are sorted and
    /// merged with the entries, so a big query reads the cache in order
    /// (a binary search per item would miss the CPU cache every time).
    pub fn lookup(&self, hashes: &[ItemHash]) -> Vec<Option<Tag>> {
        let mut order: Vec<(ItemHash, usize)> = hashes.iter().copied().zip(0..).collect();
        order.par_sort_unstable();
        let mut out = vec![None; hashes.len()];
        let mut entries = self.entries.iter().peekable();
        for (hash, at) in order {
            while entries.next_if(|(e, _)| *e < hash).is_some() {}
            if let Some((_, tag)) = entries.peek().filter(|(e, _)| *e == hash) {
                out[at] = Some(*tag);
            }
        }
        out
    }

    /// The canary tag the entries were made under.
    pub fn key_id(&self) -> Option<&Tag> {
        self.key_id.as_ref()
    }

    /// Replaces the contents with one query's items and tags, made under
    /// the key whose canary tag is `key_id`.
    pub fn replace(&mut self, key_id: Tag, hashes: &[ItemHash], tags: &[Tag]) {
        let mut entries: Vec<(ItemHash, Tag)> =
            hashes.iter().copied().zip(tags.iter().copied()).collect();
        entries.par_sort_unstable_by_key(|e| e.0);
        entries.dedup_by(|a, b| a.0 == b.0);
        self.key_id = Some(key_id);
        self.entries = entries;
    }

    /// Saves atomically to the owner-only file `path`.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        write_atomic_private(path, |out| out.write_all(&self.encode()))
    }

    /// Loads a cache saved by [`TagCache::save`]; a missing file is an
    /// empty cache, a damaged one an error naming the file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::io(path, e)),
        };
        Self::decode(&bytes).map_err(|why| Error::StateFile(format!("{}: {why}", path.display())))
    }

    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(64 + self.entries.len() * ENTRY_LEN);
        w.bytes(MAGIC).u8(VERSION);
        match &self.key_id {
            Some(id) => w.u8(1).bytes(id),
            None => w.u8(0),
        };
        // `save` is only reached with fewer than 2^32 entries (one query's).
        w.u32(u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        for (hash, tag) in &self.entries {
            w.bytes(hash).bytes(tag);
        }
        let mut bytes = w.into_bytes();
        let digest = Sha256::digest(&bytes);
        bytes.extend_from_slice(&digest);
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let body_len = bytes
            .len()
            .checked_sub(32)
            .ok_or("too short for a tag cache")?;
        let (body, digest) = bytes.split_at(body_len);
        if Sha256::digest(body).as_slice() != digest {
            return Err("damaged (checksum mismatch)".into());
        }
        let mut r = Reader::new(body);
        let header_ok = r.bytes(8, "magic").is_ok_and(|m| m == MAGIC)
            && r.u8("version").is_ok_and(|v| v == VERSION);
        if !header_ok {
            return Err("not a psikit tag cache of this version".into());
        }
        let key_id = match r.u8("key flag").map_err(|e| e.to_string())? {
            0 => None,
            1 => Some(r.array("key id").map_err(|e| e.to_string())?),
            other => return Err(format!("bad key flag {other}")),
        };
        let count = r
            .count(u64::from(u32::MAX), ENTRY_LEN, "entries")
            .map_err(|e| e.to_string())?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let hash = r.array("item hash").map_err(|e| e.to_string())?;
            let tag = r.array("tag").map_err(|e| e.to_string())?;
            entries.push((hash, tag));
        }
        r.finish().map_err(|e| e.to_string())?;
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("entries out of order".into());
        }
        Ok(Self { key_id, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TagCache {
        let items: Vec<Vec<u8>> = (0..50u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let hashes: Vec<ItemHash> = items.iter().map(|i| TagCache::hash(i)).collect();
        let tags: Vec<Tag> = (0..50u8).map(|i| [i; 16]).collect();
        let mut cache = TagCache::default();
        cache.replace([7; 16], &hashes, &tags);
        cache
    }

    #[test]
    fn a_saved_cache_loads_back_and_answers_lookups() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tags");
        assert_eq!(
            TagCache::load(&path).expect("missing is empty"),
            TagCache::default()
        );
        let cache = sample();
        cache.save(&path).expect("save");
        let back = TagCache::load(&path).expect("load");
        assert_eq!(back, cache);
        assert_eq!(back.key_id(), Some(&[7; 16]));
        let probe = [
            TagCache::hash(&3u32.to_be_bytes()),
            TagCache::hash(b"absent"),
        ];
        assert_eq!(back.lookup(&probe), vec![Some([3; 16]), None]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "owner-only");
        }
    }

    #[test]
    fn every_damaged_file_is_refused() {
        let bytes = sample().encode();
        for at in [0, 9, 10, 30, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(TagCache::decode(&bad).is_err(), "flip at {at}");
        }
        for len in [0, 31, 40, bytes.len() - 1] {
            assert!(TagCache::decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        assert!(TagCache::decode(&bytes).is_ok());
    }
}
