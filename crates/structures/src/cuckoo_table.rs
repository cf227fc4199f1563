//! The client's cuckoo hash table for HE PSI (APSI's receiver-side table).
//!
//! The client of the HE protocol places each of its items (16-byte OPRF
//! outputs) in one bin of a table of `table_size` bins, at one of `h`
//! candidate locations; the server puts each of its items in *all* its
//! candidate bins, so a common item meets the client's copy in some bin. The
//! location function is therefore shared: both sides call
//! [`cuckoo_location`] / [`cuckoo_locations`].
//!
//! ```
//! use psikit_structures::cuckoo_table::CuckooTable;
//! use rand::{rngs::StdRng, SeedableRng};
//!
//! let mut rng = StdRng::seed_from_u64(1);
//! let mut table = CuckooTable::new(64, 3)?;
//! let leftovers = table.insert_all(&[[7u8; 16], [9u8; 16]], &mut rng);
//! assert!(leftovers.is_empty());
//! assert!(table.find(&[7u8; 16]).is_some());
//! # Ok::<(), psikit_structures::cuckoo_table::CuckooTableError>(())
//! ```
//!
//! # Insertion
//! An item goes to its first free candidate bin. If all are taken it evicts
//! the occupant of a random candidate (never the bin the item was just
//! evicted from) and carries on with the evicted item, for at most
//! [`DEFAULT_MAX_EVICTIONS`] evictions. APSI's receiver uses the same bound;
//! below the load threshold of `h`-ary cuckoo hashing (about 0.92 for
//! `h = 3`) a walk almost always ends after a few steps, so hitting the
//! bound signals a table that is too full rather than bad luck. The item
//! left homeless is returned, not stashed: the caller queries leftovers in
//! another round, so a failure costs time, never correctness.
//!
//! # Location function
//! Items are pseudorandom already, but the locations must not depend on how
//! the caller happened to produce them, so each location is a proper hash
//! keyed by the hash index: with `E` fixed-key AES-128,
//! `H_i(x) = E(E(x) xor i)`, whose first 8 bytes are mapped to a bin by a
//! 64-bit multiply-high (`(v * table_size) >> 64`, unbiased enough for
//! table sizes far below 2^64 and free of divisions). `E(x)` is shared by the
//! `h` indices, so all locations of an item cost `1 + h` AES blocks, which
//! matters on a server hashing millions of items three times each.

use std::sync::OnceLock;

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128, Block};
use rand::{CryptoRng, Rng};
use rayon::prelude::*;
use thiserror::Error;

pub mod bound;

/// Most hash functions a table (and [`cuckoo_locations`]) supports.
pub const MAX_HASH_FUNCTIONS: u32 = 8;

/// Evictions one insertion may perform before giving up (APSI's choice).
pub const DEFAULT_MAX_EVICTIONS: usize = 500;

/// Consecutive failed insertions after which [`CuckooTable::insert_all`]
/// stops trying.
pub const GIVE_UP_AFTER_FAILURES: usize = 4;

/// The public fixed key of the location hash. It need not be secret: it
/// only has to be the same for client and server.
const LOCATION_KEY: [u8; 16] = *b"psikit-cuckoo-v1";

/// Why a table could not be created.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CuckooTableError {
    /// A table needs at least one bin.
    #[error("cuckoo table size must be non-zero")]
    ZeroSize,
    /// The number of hash functions is outside `1..=8`.
    #[error("cuckoo hash function count must be in 1..={MAX_HASH_FUNCTIONS}, got {0}")]
    HashCount(u32),
    /// Distinct locations need at least as many bins as hash functions.
    #[error("a cuckoo table of {0} bins cannot give {1} distinct locations")]
    FewerBinsThanHashes(u32, u32),
    /// The bins could not be allocated.
    #[error("cannot allocate a cuckoo table of {0} bins")]
    TooLarge(u32),
}

/// An item in the table with the caller's index for it (its input row), so
/// that bins can be mapped back to the caller's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// The 16-byte item value.
    pub item: [u8; 16],
    /// The caller's index for the item.
    pub index: usize,
}

/// The distinct candidate bins of an item, in hash-index order: an item
/// whose hash functions agree is placed (by the server) only once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locations {
    bins: [u32; MAX_HASH_FUNCTIONS as usize],
    len: usize,
}

impl Locations {
    /// The bins as a slice.
    pub fn as_slice(&self) -> &[u32] {
        &self.bins[..self.len]
    }
}

impl std::ops::Deref for Locations {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        self.as_slice()
    }
}

impl IntoIterator for Locations {
    type Item = u32;
    type IntoIter = std::iter::Take<std::array::IntoIter<u32, { MAX_HASH_FUNCTIONS as usize }>>;

    fn into_iter(self) -> Self::IntoIter {
        self.bins.into_iter().take(self.len)
    }
}

impl<'a> IntoIterator for &'a Locations {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

fn cipher() -> &'static Aes128 {
    static CIPHER: OnceLock<Aes128> = OnceLock::new();
    CIPHER.get_or_init(|| Aes128::new(&LOCATION_KEY.into()))
}

/// `E(x) xor i` with the index in the first four bytes, ready for the
/// second encryption.
fn tweaked(inner: &Block, hash_index: u32) -> Block {
    let mut block = *inner;
    for (b, t) in block.iter_mut().zip(hash_index.to_le_bytes()) {
        *b ^= t;
    }
    block
}

/// Maps the first 8 bytes of a hash output to `0..table_size`.
fn to_bin(block: &Block, table_size: u32) -> u32 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&block[..8]);
    let v = u64::from_le_bytes(word);
    ((u128::from(v) * u128::from(table_size)) >> 64) as u32
}

/// Bin of `item` under hash function `hash_index` in a table of
/// `table_size` bins (0 if `table_size` is 0, which no table has).
pub fn cuckoo_location(item: &[u8; 16], hash_index: u32, table_size: u32) -> u32 {
    let aes = cipher();
    let mut inner = Block::from(*item);
    aes.encrypt_block(&mut inner);
    let mut outer = tweaked(&inner, hash_index);
    aes.encrypt_block(&mut outer);
    to_bin(&outer, table_size)
}

/// The distinct bins of `item` under hash functions `0..h`, in that order.
/// `h` is capped at [`MAX_HASH_FUNCTIONS`] (callers validate it first).
pub fn cuckoo_locations(item: &[u8; 16], h: u32, table_size: u32) -> Locations {
    let h = h.min(MAX_HASH_FUNCTIONS) as usize;
    let aes = cipher();
    let mut inner = Block::from(*item);
    aes.encrypt_block(&mut inner);
    let mut blocks = [Block::default(); MAX_HASH_FUNCTIONS as usize];
    for (i, block) in blocks.iter_mut().take(h).enumerate() {
        *block = tweaked(&inner, i as u32);
    }
    aes.encrypt_blocks(&mut blocks[..h]);
    let mut out = Locations {
        bins: [0; MAX_HASH_FUNCTIONS as usize],
        len: 0,
    };
    for block in &blocks[..h] {
        let bin = to_bin(block, table_size);
        if !out.as_slice().contains(&bin) {
            out.bins[out.len] = bin;
            out.len += 1;
        }
    }
    out
}

/// Hash draws [`distinct_locations`] makes before filling what is missing
/// with the next free bins (reached with probability below
/// `(h / table_size)^(64 - h)`, never in practice).
const MAX_DRAWS: u32 = 64;

/// `h` distinct bins of `item` (`h <= table_size`): the locations under
/// hash functions `0, 1, 2, ...` in order, skipping repeats, until `h` are
/// found. In the random-oracle model they are a uniform `h`-subset of the
/// bins, which is what [`bound`] assumes; with repeats merged instead (as
/// [`cuckoo_locations`]), two items whose locations collapse into one bin
/// cannot both be placed, which at small sizes fails far above `2^-40`.
pub fn distinct_locations(item: &[u8; 16], h: u32, table_size: u32) -> Locations {
    let h = h.min(MAX_HASH_FUNCTIONS).min(table_size) as usize;
    let mut out = Locations {
        bins: [0; MAX_HASH_FUNCTIONS as usize],
        len: 0,
    };
    let aes = cipher();
    let mut inner = Block::from(*item);
    aes.encrypt_block(&mut inner);
    let mut draw = 0;
    while out.len < h && draw < MAX_DRAWS {
        let mut outer = tweaked(&inner, draw);
        aes.encrypt_block(&mut outer);
        out.push_new(to_bin(&outer, table_size));
        draw += 1;
    }
    let mut next = out.bins[0];
    while out.len < h {
        next = (next + 1) % table_size;
        out.push_new(next);
    }
    out
}

impl Locations {
    /// Appends `bin` unless it is there already.
    fn push_new(&mut self, bin: u32) {
        if !self.as_slice().contains(&bin) {
            self.bins[self.len] = bin;
            self.len += 1;
        }
    }
}

/// How a table locates and places its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// APSI's receiver table: [`cuckoo_locations`] (repeats merged) and a
    /// bounded random walk; an item left out is queried in another round.
    Walk,
    /// [`distinct_locations`], and when the walk gives up, a search for an
    /// augmenting path: an item is left out only if no placement of all
    /// the items inserted so far exists, the event [`bound`] bounds. For
    /// protocols where a failure aborts the run (circuit PSI).
    Complete,
}

/// A cuckoo hash table with one item per bin, `h` hash functions, bounded
/// random-walk insertion (then, for [`Placement::Complete`], an
/// augmenting-path search) and no stash.
#[derive(Clone, Debug)]
pub struct CuckooTable {
    bins: Vec<Option<TableEntry>>,
    hash_count: u32,
    placement: Placement,
    len: usize,
    max_evictions: usize,
}

impl CuckooTable {
    /// An empty table of `table_size` bins using `hash_count` hash functions.
    pub fn new(table_size: u32, hash_count: u32) -> Result<Self, CuckooTableError> {
        Self::with_placement(table_size, hash_count, Placement::Walk)
    }

    /// An empty table placing its items as `placement` says;
    /// [`Placement::Complete`] needs at least `hash_count` bins.
    pub fn with_placement(
        table_size: u32,
        hash_count: u32,
        placement: Placement,
    ) -> Result<Self, CuckooTableError> {
        if table_size == 0 {
            return Err(CuckooTableError::ZeroSize);
        }
        if placement == Placement::Complete && table_size < hash_count {
            return Err(CuckooTableError::FewerBinsThanHashes(
                table_size, hash_count,
            ));
        }
        if !(1..=MAX_HASH_FUNCTIONS).contains(&hash_count) {
            return Err(CuckooTableError::HashCount(hash_count));
        }
        let mut bins = Vec::new();
        bins.try_reserve_exact(table_size as usize)
            .map_err(|_| CuckooTableError::TooLarge(table_size))?;
        bins.resize(table_size as usize, None);
        Ok(Self {
            bins,
            hash_count,
            placement,
            len: 0,
            max_evictions: DEFAULT_MAX_EVICTIONS,
        })
    }

    /// Changes the eviction bound of later insertions.
    pub fn with_max_evictions(mut self, max_evictions: usize) -> Self {
        self.max_evictions = max_evictions;
        self
    }

    /// Inserts `item`, remembered with the caller's `index`.
    ///
    /// On failure the entry returned is the one left without a bin, which
    /// after evictions is usually *not* the item just inserted: the caller
    /// must query that entry in a later round. The table stays consistent
    /// either way. The caller deduplicates items; a duplicate takes a second
    /// bin if one of its candidates is free.
    ///
    /// Any `Rng` would give the same load behaviour; a cryptographic one is
    /// required so that which items end up as leftovers, and so whether a
    /// second round (visible to the server) happens, depends on nothing but
    /// the items and fresh randomness.
    pub fn insert<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        item: [u8; 16],
        index: usize,
        rng: &mut R,
    ) -> Result<(), TableEntry> {
        self.insert_with(TableEntry { item, index }, rng, |t, e| t.locations(&e.item))
    }

    /// [`CuckooTable::insert`] with each entry's candidate bins from
    /// `locate` ([`CuckooTable::insert_all`] computes them all at once).
    fn insert_with<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        mut current: TableEntry,
        rng: &mut R,
        locate: impl Fn(&Self, &TableEntry) -> Locations,
    ) -> Result<(), TableEntry> {
        let mut came_from = None;
        let mut evictions = 0;
        loop {
            let locations = locate(self, &current);
            if let Some(&free) = locations.iter().find(|&&b| self.bins[b as usize].is_none()) {
                self.bins[free as usize] = Some(current);
                self.len += 1;
                return Ok(());
            }
            // With one hash function every item has one bin: evicting can
            // only trade one leftover for another.
            if evictions == self.max_evictions || self.hash_count == 1 {
                return match self.placement {
                    Placement::Walk => Err(current),
                    Placement::Complete => self.augment(current),
                };
            }
            let Some(bin) = pick_victim(&locations, came_from, rng) else {
                return Err(current);
            };
            match self.bins[bin as usize].replace(current) {
                Some(evicted) => current = evicted,
                None => {
                    self.len += 1;
                    return Ok(());
                }
            }
            came_from = Some(bin);
            evictions += 1;
        }
    }

    /// Inserts `items[i]` with index `i` for every `i` and returns the
    /// leftovers.
    ///
    /// With two or more hash functions, [`GIVE_UP_AFTER_FAILURES`]
    /// consecutive failed insertions mean the table is at its load
    /// threshold: every further attempt would walk the full eviction bound
    /// and fail as well, so the remaining items become leftovers untried.
    /// (A client with four times the items a table holds spent seconds
    /// here otherwise.) With one hash function a failure costs one lookup,
    /// so every item is tried.
    pub fn insert_all<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        items: &[[u8; 16]],
        rng: &mut R,
    ) -> Vec<TableEntry> {
        let mut leftovers = Vec::new();
        let mut failures_in_a_row = 0;
        // Into an empty table, every item's candidate bins once, in
        // parallel: an eviction then looks its occupant's up (by index)
        // instead of hashing it again.
        let cached: Option<Vec<Locations>> =
            (self.len == 0).then(|| items.par_iter().map(|i| self.locations(i)).collect());
        let locate = |t: &Self, e: &TableEntry| match &cached {
            Some(c) => c[e.index],
            None => t.locations(&e.item),
        };
        for (index, item) in items.iter().enumerate() {
            if self.hash_count > 1 && failures_in_a_row == GIVE_UP_AFTER_FAILURES {
                leftovers.push(TableEntry { item: *item, index });
                continue;
            }
            let entry = TableEntry { item: *item, index };
            match self.insert_with(entry, rng, locate) {
                Ok(()) => failures_in_a_row = 0,
                Err(entry) => {
                    leftovers.push(entry);
                    failures_in_a_row += 1;
                }
            }
        }
        leftovers
    }

    /// The bins, in order; bin `j` holds at most one entry.
    pub fn bins(&self) -> &[Option<TableEntry>] {
        &self.bins
    }

    /// The candidate bins of `item` in this table.
    pub fn locations(&self, item: &[u8; 16]) -> Locations {
        match self.placement {
            Placement::Walk => cuckoo_locations(item, self.hash_count, self.table_size()),
            Placement::Complete => distinct_locations(item, self.hash_count, self.table_size()),
        }
    }

    /// Places `homeless` along the shortest augmenting path: a breadth-
    /// first search over bins, from its candidates through each
    /// occupant's other candidates, to a free bin; then every occupant on
    /// the path moves one step. Fails, returning `homeless`, only when no
    /// path exists, i.e. (Berge) when no placement of every item inserted
    /// so far exists. Linear in the table, and run only when the walk
    /// gave up.
    fn augment(&mut self, homeless: TableEntry) -> Result<(), TableEntry> {
        const UNSEEN: u32 = u32::MAX;
        const START: u32 = u32::MAX - 1;
        let mut parent = vec![UNSEEN; self.bins.len()];
        let mut queue = std::collections::VecDeque::new();
        for &b in self.locations(&homeless.item).iter() {
            if parent[b as usize] == UNSEEN {
                parent[b as usize] = START;
                queue.push_back(b);
            }
        }
        while let Some(bin) = queue.pop_front() {
            let Some(occupant) = self.bins[bin as usize] else {
                self.shift_along(bin, &parent, homeless);
                return Ok(());
            };
            for &next in self.locations(&occupant.item).iter() {
                if parent[next as usize] == UNSEEN {
                    parent[next as usize] = bin;
                    queue.push_back(next);
                }
            }
        }
        Err(homeless)
    }

    /// Moves each occupant on the path ending at the free bin `free` one
    /// step towards it, and puts `homeless` in the path's first bin.
    fn shift_along(&mut self, free: u32, parent: &[u32], homeless: TableEntry) {
        let mut bin = free;
        loop {
            let from = parent[bin as usize];
            if from >= u32::MAX - 1 {
                self.bins[bin as usize] = Some(homeless);
                self.len += 1;
                return;
            }
            self.bins[bin as usize] = self.bins[from as usize];
            bin = from;
        }
    }

    /// The bin holding `item`, if it is in the table.
    pub fn find(&self, item: &[u8; 16]) -> Option<u32> {
        self.locations(item)
            .iter()
            .copied()
            .find(|&b| matches!(&self.bins[b as usize], Some(e) if e.item == *item))
    }

    /// Number of bins.
    pub fn table_size(&self) -> u32 {
        // `new` took the size as a u32, so this cannot truncate.
        self.bins.len() as u32
    }

    /// Number of hash functions.
    pub fn hash_count(&self) -> u32 {
        self.hash_count
    }

    /// Number of items placed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item is placed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fraction of bins in use.
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.bins.len() as f64
    }
}

/// A random candidate bin other than the one the item was just evicted
/// from (going straight back would undo the last step); `None` if there is
/// no other candidate.
fn pick_victim<R: Rng + ?Sized>(
    locations: &[u32],
    came_from: Option<u32>,
    rng: &mut R,
) -> Option<u32> {
    let mut choices = [0u32; MAX_HASH_FUNCTIONS as usize];
    let mut count = 0;
    for &bin in locations.iter().filter(|&&b| Some(b) != came_from) {
        choices[count] = bin;
        count += 1;
    }
    (count > 0).then(|| choices[rng.gen_range(0..count)])
}

#[cfg(test)]
mod tests;
