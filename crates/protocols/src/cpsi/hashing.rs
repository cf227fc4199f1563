//! Step 1 of the framework (paper §3.1): the receiver's cuckoo table and
//! the sender's simple table over the same `d = 3` hash functions and `M`
//! bins, and the bin keys the OPPRF is run on.
//!
//! Items enter as their 128-bit keys (`SHA-256` of the item, as VOLE-PSI).
//! Their locations are three **distinct** bins
//! (`psikit_structures::cuckoo_table::distinct_locations`) of the key
//! XORed with a per-run seed the receiver draws, and the receiver places
//! them completely (a walk, then an augmenting-path search), so the table
//! fails only when no placement exists: with probability below `2^-40` at
//! the sizes [`bins`] picks. A bin's OPPRF key binds item and bin:
//! `k ⊕ (i << 96)` (distinct for distinct `(k, i)` unless two item keys
//! collide on their low 96 bits, probability `2^-96` per pair).

use psikit_structures::cuckoo_table::{bound, distinct_locations, CuckooTable, Placement};
use rand::{CryptoRng, Rng};
use rayon::prelude::*;

use crate::error::Error;

/// Hash functions `d` (paper §6.1, after PSTY19 and RS21).
pub const HASHES: u32 = 3;

/// The cuckoo table's expansion `1 + ε` (paper §6.1: `ε = 0.27`).
const EXPANSION: f64 = 1.27;

/// Sets from this size on take `1.27·N` bins, the size PSTY19's
/// experiments support; smaller ones take what the proven bound needs.
const LARGE: usize = 1 << 13;

/// Most bins: keeps bin indices in 32 bits and tags in 128.
pub const MAX_BINS: usize = 1 << 31;

/// The table size `M` for a receiver set of `n` items at statistical
/// security `sigma`:
///
/// * from [`LARGE`] items on, `M = 1.27·N` with `d = 3` distinct
///   locations and no stash: the size Pinkas, Schneider, Tkachenko and
///   Yanai (Eurocrypt 2019, §3) derive from experiments extrapolated to
///   `2^-40`, the setting the paper reuses in §6.1. It stays `2^-40` per
///   run whatever `sigma` asks (a job's buckets may each abort with that
///   probability; docs/security.md);
/// * below it, the fewest bins for which the proven Hall-condition bound
///   (`psikit_structures::cuckoo_table::bound`) is below `2^-sigma` (about
///   `10·N` for 4 items, `2.3·N` at 100, `1.6·N` at 1,000), or the table
///   of [`LARGE`] items if that is smaller (it holds fewer items at least
///   as well).
///
/// A failure stops the run with an error; it depends on the receiver's set
/// and the fresh seed only, and the next run draws another seed.
pub fn bins(n: usize, sigma: u32) -> Result<usize, Error> {
    let m = bound::min_bins(
        n as u64,
        HASHES as u64,
        f64::from(sigma),
        EXPANSION,
        LARGE as u64,
    );
    match m <= MAX_BINS as u64 {
        true => Ok(m as usize),
        false => Err(Error::Config(format!(
            "circuit PSI supports receiver sets up to {} items, not {n}",
            MAX_BINS as f64 / EXPANSION
        ))),
    }
}

/// The tag length `ℓ = σ + ⌈log2 M⌉` (paper §3.1): a random tag matches
/// another with probability `2^-ℓ`, so all `M` bins stay below `2^-σ`.
pub fn tag_bits(bins: usize, sigma: u32) -> u32 {
    sigma + (bins.max(2) as u64).next_power_of_two().ilog2()
}

/// The OPPRF key of the item with key `k` in bin `bin`.
pub fn bin_key(k: u128, bin: u32) -> u128 {
    k ^ (u128::from(bin) << 96)
}

fn location_input(k: u128, seed: u128) -> [u8; 16] {
    (k ^ seed).to_le_bytes()
}

/// The receiver's table: per bin, the index of its item, or `None`.
pub struct CuckooBins {
    pub item_of_bin: Vec<Option<u32>>,
}

impl CuckooBins {
    /// Places every key in one of its bins; fails (with the probability
    /// above) if one does not fit.
    pub fn build<R: Rng + CryptoRng>(
        keys: &[u128],
        m: usize,
        seed: u128,
        rng: &mut R,
    ) -> Result<Self, Error> {
        let size = u32::try_from(m).map_err(|_| Error::Config("too many bins".into()))?;
        let mut table = CuckooTable::with_placement(size, HASHES, Placement::Complete)
            .map_err(|e| Error::Config(format!("cuckoo table: {e}")))?;
        let inputs: Vec<[u8; 16]> = keys.iter().map(|&k| location_input(k, seed)).collect();
        if !table.insert_all(&inputs, rng).is_empty() {
            return Err(Error::Config(
                "the receiver's set did not fit its cuckoo table (probability below 2^-40): run again"
                    .into(),
            ));
        }
        let item_of_bin = table
            .bins()
            .iter()
            .map(|b| b.map(|e| e.index as u32))
            .collect();
        Ok(Self { item_of_bin })
    }

    /// The receiver's OPPRF inputs, one per bin: its item's bin key, or a
    /// random dummy in an empty bin (so the sender cannot tell them apart,
    /// and a dummy matches nothing but with probability `2^-128`).
    pub fn opprf_keys<R: Rng + CryptoRng>(&self, keys: &[u128], rng: &mut R) -> Vec<u128> {
        self.item_of_bin
            .iter()
            .enumerate()
            .map(|(bin, item)| match item {
                Some(i) => bin_key(keys[*i as usize], bin as u32),
                None => rng.gen(),
            })
            .collect()
    }
}

/// The sender's simple table, flattened: each item in each of its three
/// distinct bins, as `(bin, item index)` pairs.
pub fn simple_table(keys: &[u128], m: usize, seed: u128) -> Vec<(u32, u32)> {
    let size = m as u32;
    keys.par_iter()
        .enumerate()
        .flat_map_iter(|(i, &k)| {
            distinct_locations(&location_input(k, seed), HASHES, size)
                .into_iter()
                .map(move |bin| (bin, i as u32))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn tag_length_follows_the_paper() {
        // §6.1: ℓ = σ + 1 + ⌈log2 N⌉ with M = 1.27·N: 57 at 2^16, 61 at 2^20.
        assert_eq!(tag_bits(bins(1 << 16, 40).expect("bins"), 40), 57);
        assert_eq!(tag_bits(bins(1 << 20, 40).expect("bins"), 40), 61);
    }

    #[test]
    fn small_sets_get_the_bins_the_proven_bound_needs() {
        use psikit_structures::cuckoo_table::bound::log2_failure;
        for n in [1usize, 2, 4, 5, 100, 1000, 5000, LARGE - 1] {
            let m = bins(n, 40).expect("bins");
            assert!(m >= 3);
            let proven = log2_failure(n as u64, m as u64, 3) <= -40.0;
            assert!(
                proven || m == bins(LARGE, 40).expect("bins"),
                "n {n}: {m} bins"
            );
        }
        // Items whose locations all fall in one bin would need a stash;
        // distinct locations make four items on three bins the smallest
        // failure: at 4 items and their bins, below 2^-40.
        assert!(log2_failure(4, bins(4, 40).expect("bins") as u64, 3) <= -40.0);
        assert_eq!(bins(1 << 20, 40).expect("bins"), 1_331_692);
    }

    #[test]
    fn every_item_has_three_distinct_bins() {
        // With repeats merged, an item whose hashes agree had fewer bins,
        // and two such items on one bin could not both be placed (in a
        // table of 5 bins, a third of the items).
        let mut rng = StdRng::seed_from_u64(11);
        let keys: Vec<u128> = (0..300).map(|_| rng.gen()).collect();
        let simple = simple_table(&keys, 5, rng.gen());
        assert_eq!(simple.len(), 3 * keys.len());
        for (i, entries) in simple.chunks(3).enumerate() {
            assert!(entries.iter().all(|&(_, item)| item == i as u32));
            let bins: std::collections::HashSet<u32> = entries.iter().map(|e| e.0).collect();
            assert_eq!(bins.len(), 3, "item {i}: {entries:?}");
        }
    }

    #[test]
    fn four_items_on_three_bins_fail_and_are_reported() {
        // The Hall violation the bound counts: with three bins, a fourth
        // item cannot be placed, whatever the walk does.
        let mut rng = StdRng::seed_from_u64(9);
        let keys: Vec<u128> = (0..4).map(|_| rng.gen()).collect();
        assert!(CuckooBins::build(&keys, 3, 0, &mut rng).is_err());
        assert!(CuckooBins::build(&keys[..3], 3, 0, &mut rng).is_ok());
    }

    #[test]
    fn every_item_meets_its_bin_in_the_simple_table() {
        let mut rng = StdRng::seed_from_u64(5);
        for n in [1usize, 3, 100, 5000] {
            let keys: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
            let m = bins(n, 40).expect("bins");
            let seed: u128 = rng.gen();
            let table = CuckooBins::build(&keys, m, seed, &mut rng).expect("fits");
            let simple: std::collections::HashSet<(u32, u32)> =
                simple_table(&keys, m, seed).into_iter().collect();
            let placed = table.item_of_bin.iter().flatten().count();
            assert_eq!(placed, n);
            for (bin, item) in table.item_of_bin.iter().enumerate() {
                if let Some(i) = item {
                    assert!(simple.contains(&(bin as u32, *i)), "n {n} bin {bin}");
                }
            }
        }
    }
}
