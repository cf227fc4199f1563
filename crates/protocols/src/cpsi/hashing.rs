//! Step 1 of the framework (paper §3.1): the receiver's cuckoo table and
//! the sender's simple table over the same `d = 3` hash functions and `M`
//! bins, and the bin keys the OPPRF is run on.
//!
//! Items enter as their 128-bit keys (`SHA-256` of the item, as VOLE-PSI).
//! Their locations are `psikit_structures::cuckoo_table`'s hash of the key
//! XORed with a per-run seed the receiver draws, so a set that failed to
//! fit once fits on the next run. A bin's OPPRF key binds item and bin:
//! `k ⊕ (i << 96)` (distinct for distinct `(k, i)` unless two item keys
//! collide on their low 96 bits, probability `2^-96` per pair).

use psikit_structures::cuckoo_table::{cuckoo_locations, CuckooTable};
use rand::{CryptoRng, Rng};
use rayon::prelude::*;

use crate::Error;

/// Hash functions `d` (paper §6.1, after PSTY19 and RS21).
pub const HASHES: u32 = 3;

/// The cuckoo table's expansion `1 + ε` (paper §6.1: `ε = 0.27`).
const EXPANSION: f64 = 1.27;

/// Bins added to every table so that tiny sets are not packed tightly
/// (`1.27·N` alone would give 3 items 4 bins); negligible for large sets.
const SLACK: usize = 128;

/// Statistical security parameter σ.
pub const SIGMA: u32 = 40;

/// Most bins: keeps bin indices in 32 bits and tags in 128.
pub const MAX_BINS: usize = 1 << 31;

/// The table size `M` for a receiver set of `n` items.
///
/// With `d = 3` hash functions, `M = 1.27·N` bins and no stash, cuckoo
/// insertion fails with probability below `2^-40` (Pinkas, Schneider,
/// Tkachenko, Yanai, Eurocrypt 2019, §3, the setting the paper reuses in
/// §6.1); a failure stops the run with an error (it depends on the
/// receiver's set and the fresh seed only, and the next run draws another
/// seed).
pub fn bins(n: usize) -> Result<usize, Error> {
    let m = (n as f64 * EXPANSION).ceil() as usize + SLACK;
    match m <= MAX_BINS {
        true => Ok(m),
        false => Err(Error::Config(format!(
            "circuit PSI supports receiver sets up to {} items, not {n}",
            (MAX_BINS - SLACK) as f64 / EXPANSION
        ))),
    }
}

/// The tag length `ℓ = σ + ⌈log2 M⌉` (paper §3.1): a random tag matches
/// another with probability `2^-ℓ`, so all `M` bins stay below `2^-σ`.
pub fn tag_bits(bins: usize) -> u32 {
    SIGMA + (bins.max(2) as u64).next_power_of_two().ilog2()
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
        let mut table = CuckooTable::new(size, HASHES)
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

/// The sender's simple table, flattened: each item in every one of its
/// distinct bins, as `(bin, item index)` pairs.
pub fn simple_table(keys: &[u128], m: usize, seed: u128) -> Vec<(u32, u32)> {
    let size = m as u32;
    keys.par_iter()
        .enumerate()
        .flat_map_iter(|(i, &k)| {
            cuckoo_locations(&location_input(k, seed), HASHES, size)
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
        assert_eq!(tag_bits(bins(1 << 16).expect("bins")), 57);
        assert_eq!(tag_bits(bins(1 << 20).expect("bins")), 61);
    }

    #[test]
    fn every_item_meets_its_bin_in_the_simple_table() {
        let mut rng = StdRng::seed_from_u64(5);
        for n in [1usize, 3, 100, 5000] {
            let keys: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
            let m = bins(n).expect("bins");
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
