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
//! # Files
//!
//! The base: `PSIKTAG\0`, a version byte, the canary tag, the entry
//! count, the entries (item hash, tag) sorted by hash, then the SHA-256 of
//! all of it. Each later query that keeps the key writes only what it
//! changed, as a change file beside it (`<path>.1`, `<path>.2`, ...; see
//! [`crate::common::changelog`]): the hashes it dropped and the entries it
//! added. Every file is owner-only and written atomically; anything else
//! (a flipped bit, a truncation, a change that does not fit) is refused as
//! damaged and the query runs without the cache.

use std::fs;
use std::path::Path;

use psikit_transport::{Reader, Writer};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::tag::Tag;
use crate::common::changelog::{self, trailing_digest, ChangeLog};
use crate::error::Error;

const MAGIC: &[u8; 8] = b"PSIKTAG\0";
const VERSION: u8 = 1;
/// Bytes of one entry in the file: the item's hash and its tag.
const ENTRY_LEN: usize = 32;

/// The public input whose tag identifies the server's key.
pub const CANARY: &[u8] = b"psikit filter: key identity canary v1";

/// A 16-byte hash of an item, the cache's index.
pub type ItemHash = [u8; 16];

type Entry = (ItemHash, Tag);

/// The tags of the last query's items, under the key whose canary tag is
/// `key_id`.
#[derive(Debug, Default, Clone)]
pub struct TagCache {
    key_id: Option<Tag>,
    /// Sorted by hash, no duplicates.
    entries: Vec<Entry>,
    /// The change files after the base last saved or loaded.
    log: Option<ChangeLog>,
    /// Changes since then, each a change file's body.
    unsaved: Vec<Vec<u8>>,
}

/// Two caches are equal when they hold the same tags under the same key,
/// however their files are laid out.
impl PartialEq for TagCache {
    fn eq(&self, other: &Self) -> bool {
        self.key_id == other.key_id && self.entries == other.entries
    }
}

impl Eq for TagCache {}

/// A query's item hashes sorted, each with its place in the query: what
/// [`TagCache::lookup`] merges with the entries and [`TagCache::replace`]
/// turns into the next entries without sorting again.
pub struct Sorted(Vec<(ItemHash, usize)>);

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

    /// The cached tag of each hash, if any, and the hashes sorted. The
    /// hashes are sorted and merged with the entries, so a big query reads
    /// the cache in order (a binary search per item would miss the CPU
    /// cache every time).
    pub fn lookup(&self, hashes: &[ItemHash]) -> (Vec<Option<Tag>>, Sorted) {
        let mut order: Vec<(ItemHash, usize)> = hashes.iter().copied().zip(0..).collect();
        order.par_sort_unstable();
        let mut out = vec![None; hashes.len()];
        let mut entries = self.entries.iter().peekable();
        for &(hash, at) in &order {
            while entries.next_if(|(e, _)| *e < hash).is_some() {}
            if let Some((_, tag)) = entries.peek().filter(|(e, _)| *e == hash) {
                out[at] = Some(*tag);
            }
        }
        (out, Sorted(order))
    }

    /// The entries, sorted by hash.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The canary tag the entries were made under.
    pub fn key_id(&self) -> Option<&Tag> {
        self.key_id.as_ref()
    }

    /// Replaces the contents with one query's items (`sorted`, from
    /// [`Self::lookup`]) and their tags (in the query's order), made under
    /// the key whose canary tag is `key_id`. Under the same key the
    /// difference is kept for the next save's change file.
    pub fn replace(&mut self, key_id: Tag, sorted: &Sorted, tags: &[Tag]) {
        let mut entries: Vec<Entry> = sorted.0.iter().map(|&(h, at)| (h, tags[at])).collect();
        entries.dedup_by(|a, b| a.0 == b.0);
        if self.key_id == Some(key_id) && self.log.is_some() {
            let change = encode_change(&self.entries, &entries);
            self.unsaved.push(change);
        } else {
            self.log = None;
            self.unsaved.clear();
        }
        self.key_id = Some(key_id);
        self.entries = entries;
    }

    /// Saves to the owner-only file `path`: the changes since the last
    /// save or load as change files while they stay small, else the whole
    /// cache, atomically.
    pub fn save(&mut self, path: &Path) -> Result<(), Error> {
        let mut log = self.log.take();
        let saved = changelog::save(&mut log, path, &self.unsaved, false, true, || self.encode());
        self.log = log;
        saved?;
        self.unsaved.clear();
        Ok(())
    }

    /// Loads a cache saved by [`TagCache::save`]; a missing file is an
    /// empty cache, a damaged one an error naming the file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::io(path, e)),
        };
        let named = |why: String| Error::StateFile(format!("{}: {why}", path.display()));
        let mut cache = Self::decode(&bytes).map_err(named)?;
        let (log, changes) =
            ChangeLog::read(path, trailing_digest(&bytes), bytes.len() as u64, true)?;
        for change in changes {
            cache.entries = apply_change(&cache.entries, &change).map_err(named)?;
        }
        cache.log = Some(log);
        Ok(cache)
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

    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, String> {
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
        Ok(Self {
            key_id,
            entries,
            ..Self::default()
        })
    }
}

/// A change file's body taking `old` to `new` (both sorted by hash): the
/// hashes dropped, then the entries added, each as a `u64` count and the
/// sorted records.
fn encode_change(old: &[Entry], new: &[Entry]) -> Vec<u8> {
    let (mut dropped, mut added) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.0 == n.0 => {
                // Same key, so the same tag: nothing changed.
                i += 1;
                j += 1;
            }
            (Some(o), n) if n.is_none_or(|n| o.0 < n.0) => {
                dropped.push(o.0);
                i += 1;
            }
            (_, Some(n)) => {
                added.push(*n);
                j += 1;
            }
            (_, None) => break,
        }
    }
    let mut w = Writer::with_capacity(16 + 16 * dropped.len() + ENTRY_LEN * added.len());
    w.u64(dropped.len() as u64);
    for hash in &dropped {
        w.bytes(hash);
    }
    w.u64(added.len() as u64);
    for (hash, tag) in &added {
        w.bytes(hash).bytes(tag);
    }
    w.into_bytes()
}

/// `entries` with a change from [`encode_change`] applied. The change
/// must drop only hashes present and add only hashes absent, in order.
pub(crate) fn apply_change(entries: &[Entry], body: &[u8]) -> Result<Vec<Entry>, String> {
    let mut r = Reader::new(body);
    let count = |r: &mut Reader, len: u64, what| -> Result<usize, String> {
        let n = r.u64(what).map_err(|e| e.to_string())?;
        match n.checked_mul(len) {
            Some(bytes) if bytes <= r.remaining() as u64 => Ok(n as usize),
            _ => Err(format!("{what}: count beyond the file")),
        }
    };
    let n = count(&mut r, 16, "dropped hashes")?;
    let dropped: Vec<ItemHash> = (0..n)
        .map(|_| r.array("dropped hash"))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let n = count(&mut r, ENTRY_LEN as u64, "added entries")?;
    let mut added: Vec<Entry> = Vec::with_capacity(n);
    for _ in 0..n {
        let hash = r.array("added hash").map_err(|e| e.to_string())?;
        added.push((hash, r.array("added tag").map_err(|e| e.to_string())?));
    }
    r.finish().map_err(|e| e.to_string())?;
    let sorted =
        dropped.windows(2).all(|w| w[0] < w[1]) && added.windows(2).all(|w| w[0].0 < w[1].0);
    if !sorted {
        return Err("a change out of order".into());
    }
    let mut out = Vec::with_capacity(entries.len() + added.len());
    let (mut dropped, mut added) = (dropped.iter().peekable(), added.iter().peekable());
    for e in entries {
        while let Some(a) = added.next_if(|a| a.0 < e.0) {
            out.push(*a);
        }
        if added.peek().is_some_and(|a| a.0 == e.0) {
            return Err("a change adds an item the cache holds".into());
        }
        if dropped.next_if(|d| **d == e.0).is_none() {
            out.push(*e);
        }
        if dropped.peek().is_some_and(|d| **d < e.0) {
            return Err("a change drops an item the cache lacks".into());
        }
    }
    out.extend(added);
    if dropped.next().is_some() {
        return Err("a change drops an item the cache lacks".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache after a query of items `ids` (tag of item `i`: `[i; 16]`).
    fn query(cache: &mut TagCache, ids: std::ops::Range<u8>) {
        let items: Vec<Vec<u8>> = ids.clone().map(|i| vec![i]).collect();
        let hashes = TagCache::hash_all(&items);
        let (_, sorted) = cache.lookup(&hashes);
        let tags: Vec<Tag> = ids.map(|i| [i; 16]).collect();
        cache.replace([7; 16], &sorted, &tags);
    }

    fn sample() -> TagCache {
        let mut cache = TagCache::default();
        query(&mut cache, 0..50);
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
        let mut cache = sample();
        cache.save(&path).expect("save");
        let back = TagCache::load(&path).expect("load");
        assert_eq!(back, cache);
        assert_eq!(back.key_id(), Some(&[7; 16]));
        let probe = [TagCache::hash(&[3]), TagCache::hash(b"absent")];
        assert_eq!(back.lookup(&probe).0, vec![Some([3; 16]), None]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "owner-only");
        }
    }

    #[test]
    fn a_query_under_the_same_key_saves_only_its_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tags");
        let mut cache = TagCache::default();
        query(&mut cache, 0..200);
        cache.save(&path).expect("save");
        let base = fs::read(&path).expect("base");
        // Items 0..10 leave, 200..210 arrive; 10..200 stay.
        let mut cache = TagCache::load(&path).expect("load");
        query(&mut cache, 10..210);
        cache.save(&path).expect("save");
        assert!(fs::read(&path).expect("base") == base, "the base is kept");
        let change = fs::metadata(dir.path().join("tags.1")).expect("a change file");
        assert!(change.len() < 10 * 16 + 10 * 32 + 128);
        let back = TagCache::load(&path).expect("load");
        assert_eq!(back, cache);
        let mut fresh = TagCache::default();
        query(&mut fresh, 10..210);
        assert_eq!(back, fresh, "the same entries as one query of those items");
        // Another key: the base is written again, the change removed.
        let mut other = back.clone();
        let hashes = TagCache::hash_all(&[vec![1]]);
        let (_, sorted) = other.lookup(&hashes);
        other.replace([8; 16], &sorted, &[[1; 16]]);
        other.save(&path).expect("save");
        assert!(!dir.path().join("tags.1").exists());
        assert_eq!(TagCache::load(&path).expect("load"), other);
    }

    #[test]
    fn a_change_that_does_not_fit_is_refused() {
        let entries: Vec<Entry> = (0..4u8).map(|i| ([i; 16], [i; 16])).collect();
        let change = |dropped: &[u8], added: &[u8]| {
            let new: Vec<Entry> = entries
                .iter()
                .copied()
                .filter(|e| !dropped.contains(&e.0[0]))
                .chain(added.iter().map(|&i| ([i; 16], [i; 16])))
                .collect();
            let mut new = new;
            new.sort_unstable();
            encode_change(&entries, &new)
        };
        let good = change(&[1], &[9]);
        let applied = apply_change(&entries, &good).expect("fits");
        assert_eq!(
            applied.iter().map(|e| e.0[0]).collect::<Vec<_>>(),
            [0, 2, 3, 9]
        );
        // Applied twice: it drops what is gone and adds what is there.
        assert!(apply_change(&applied, &good).is_err());
        assert!(apply_change(&entries, &good[..good.len() - 1]).is_err());
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
