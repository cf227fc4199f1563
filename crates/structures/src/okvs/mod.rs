//! An oblivious key-value store (OKVS): the random-band-matrix OKVS
//! (RB-OKVS) of Bienstock, Patel, Seo and Yeo, "Near-Optimal Oblivious
//! Key-Value Stores for Efficient PSI, PSU and Volume-Hiding Multi-Maps"
//! (USENIX Security 2023, ePrint 2023/903), split into bins that are
//! encoded in parallel.
//!
//! An OKVS encodes pairs `(k_i, v_i)` of 128-bit keys and values into a
//! table `P` of `m` values such that `decode(P, k_i) = v_i`, where
//! `decode(P, k) = <row(k), P>` is the XOR of the entries selected by the
//! key's row `row(k)` in GF(2)^m. Encoding and decoding are GF(2)-linear in
//! the values and the table, hence linear over GF(2^128) as VOLE-based PSI
//! (Raghuraman-Rindal, CCS 2022) and OPPRFs need.
//!
//! ```
//! use psikit_structures::okvs::{Okvs, OkvsParams};
//! use rand::{rngs::StdRng, SeedableRng};
//!
//! let mut rng = StdRng::seed_from_u64(7);
//! let keys = [1u128, 2, 3];
//! let values = [10u128, 20, 30];
//! let okvs = Okvs::new(OkvsParams::new(keys.len())?, [9; 16]);
//! let table = okvs.encode(&keys, &values, &mut rng)?;
//! assert_eq!(okvs.decode_one(&table, 2)?, 20);
//! # Ok::<(), psikit_structures::okvs::OkvsError>(())
//! ```
//!
//! # Construction
//! A key is hashed (fixed-key AES keyed by the public `seed`, see
//! `hash.rs`) to a bin, a start column inside the bin and a band of `w`
//! uniform bits; its row is that band placed at the start. The table is
//! `bins` bins of `bin_len` columns; bins are independent systems, encoded
//! in parallel (rayon). Inside a bin the rows are sorted by start and solved
//! by Gaussian elimination within the bands, then back substitution
//! (`solve.rs`). `w = 192` (three 64-bit words) and about `2^14` keys per
//! bin. A decode reads one contiguous run of `w` entries and XORs the
//! selected ones (`band.rs`: plain portable code walking the set bits, no
//! explicit SIMD, since the crate forbids `unsafe`). Batched decoding sorts
//! its keys by position first (64-column blocks), so the table is fetched
//! about once per batch rather than 3 KiB per key (3.3 times faster at
//! `2^20` than decoding in the keys' order).
//!
//! # Failure bound and parameters
//! `bin_len` is chosen per `n` as the smallest (to within 0.5%) for which a
//! **proven** bound on the failure probability of one encode of `n`
//! distinct keys is at most `2^-40` (`OkvsParams::with_security` for other
//! levels). The bound (derived in `bound.rs`) is the union bound over
//! dependent row sets (`P(S sums to 0) = 2^-|union of windows|`), grouped
//! by the intervals the windows cover, plus binomial tail bounds
//! (Stirling-Robbins, Chernoff-Hoeffding) for the event that some interval
//! of some bin holds too many rows; the union over bins is included, so the
//! bound is for the whole structure, and it holds in the random-oracle
//! model for the row hash. It is computed numerically by
//! [`OkvsParams::new`] and reported by [`OkvsParams::failure_bound_log2`]
//! (10-30 ms for large `n`). The rate (`table_len / n`) is 1.18-1.25 from
//! 1,000 keys to `2^24` (1.21 at `2^16`, 1.23 at `2^20`, 1.25 at `2^24`)
//! and at most 1.3 from 137 keys on (`tests.rs` checks it); up to 151 keys
//! the rows are dense over `n + 41` columns, where the classical bound
//! `2^(n-m)` applies (any OKVS with hashed rows needs about 40 columns: two
//! keys' rows collide with probability at least `2^-m`).
//!
//! The RB-OKVS paper picks `w` from experimental fits of the failure rate
//! against `w` for each overhead `epsilon` (0.03-0.1 for rate 1.03-1.1);
//! extrapolating a fit to `2^-40` is not a proof, so we use our bound and
//! pay 10-20% more table for it. Tests encode thousands of random instances
//! and check that none fails.
//!
//! # Why RB-OKVS rather than RR22's clustered 3-hash garbled cuckoo table
//! RR22's table (weight-3 rows plus a few dense columns, rate about 1.23)
//! decodes with three random reads, but its `2^-40` bound rests on
//! extrapolated experiments of 2-core sizes; its encoder needs hypergraph
//! peeling and a dense sub-system. The band structure has a short bound
//! that we can prove and check in code, a simple encoder, and decodes with
//! one contiguous read that batches well. The price is decode work: about
//! 96 XORs a key, 2-3 times RR22's per-key decode time (see
//! `docs/benchmarks.md`); a tighter proven bound would allow narrower
//! bands.
//!
//! # Security: random fill
//! Columns not fixed by a pivot are filled with uniformly random values
//! from the caller's cryptographic RNG (one 32-byte seed per bin drawn from
//! it, expanded by ChaCha12). The table is then uniform among all solutions,
//! so decoding a key whose row is independent of the encoded rows (all but
//! a probability bounded like the failure probability) gives a value
//! uniform and independent of the encoded values: what PSI needs. Decoding
//! is deterministic. The seed is public; the bound is over its choice, so
//! the encoding side draws it fresh after its keys are fixed (keys chosen
//! knowing the seed could be made to fail).

mod band;
mod bound;
mod hash;
mod params;
mod solve;
#[cfg(test)]
mod tests;

use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;
use thiserror::Error;

use hash::{Row, RowHasher};
pub use params::{OkvsParams, BAND_WIDTH, BIN_ITEMS, DEFAULT_SECURITY};
use solve::Equation;

/// Most keys one decoding task sorts by position (its buffers take about
/// 100 bytes a key). Large tasks read the table once per many keys: at
/// 2^24 keys (a 340 MB table) 2^20-key tasks decode twice as fast as
/// 2^18-key tasks; 2^22 gains nothing more.
const SORT_CHUNK: usize = 1 << 20;

/// Keys per parallel task of the simple passes (hashing, direct decoding,
/// gathering results).
const CHUNK: usize = 4096;

/// Why parameters could not be chosen, or an encode or decode was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OkvsError {
    /// Security parameter outside `1..=128`.
    #[error("OKVS statistical security must be in 1..=128 bits, got {0}")]
    Security(u32),
    /// Too many keys for the table's sizes.
    #[error("an OKVS for {0} keys is too large")]
    TooLarge(usize),
    /// No table sizes meet the failure bound (not expected for any `n`;
    /// reported rather than searched for ever).
    #[error("no OKVS sizes for {n} keys meet the 2^-{security} failure bound")]
    NoParameters {
        /// Number of keys.
        n: usize,
        /// The statistical security asked for.
        security: u32,
    },
    /// `keys` and `values` have different lengths.
    #[error("{keys} keys but {values} values")]
    LengthMismatch {
        /// Number of keys.
        keys: usize,
        /// Number of values.
        values: usize,
    },
    /// More keys than the parameters were chosen for.
    #[error("{keys} keys exceed the OKVS capacity of {capacity}")]
    OverCapacity {
        /// Number of keys.
        keys: usize,
        /// The parameters' capacity.
        capacity: usize,
    },
    /// The same key appears twice with different values.
    #[error("key at index {second} repeats the key at index {first} with another value")]
    DuplicateKey {
        /// Index of the first occurrence.
        first: usize,
        /// Index of the conflicting occurrence.
        second: usize,
    },
    /// The rows were dependent: the event of probability below
    /// `2^-security` (retry with another seed).
    #[error("OKVS encoding failed (probability below 2^-{0}); retry with another seed")]
    EncodeFailed(u32),
    /// A table of the wrong length was given to decode.
    #[error("OKVS table has {got} entries, expected {expected}")]
    TableLength {
        /// Entries the parameters give.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// `keys` and `out` have different lengths.
    #[error("{keys} keys but room for {out} decoded values")]
    OutputLength {
        /// Number of keys.
        keys: usize,
        /// Length of the output.
        out: usize,
    },
}

/// A binned random-band OKVS: parameters and the public hashing seed.
#[derive(Clone)]
pub struct Okvs {
    params: OkvsParams,
    seed: [u8; 16],
    hasher: RowHasher,
}

impl std::fmt::Debug for Okvs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Okvs")
            .field("params", &self.params)
            .field("seed", &self.seed)
            .finish()
    }
}

impl Okvs {
    /// An OKVS with `params` whose rows are keyed by the public `seed`
    /// (chosen by the encoding side and sent along with the table).
    pub fn new(params: OkvsParams, seed: [u8; 16]) -> Self {
        let starts = params.bin_len() - params.band_width() + 1;
        let hasher = RowHasher::new(&seed, params.bins(), starts, params.band_width());
        Self {
            params,
            seed,
            hasher,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &OkvsParams {
        &self.params
    }

    /// The public hashing seed.
    pub fn seed(&self) -> [u8; 16] {
        self.seed
    }

    /// A table of [`OkvsParams::table_len`] entries that decodes every
    /// `keys[i]` to `values[i]`, other entries drawn from `rng` (see the
    /// module docs). Bins are encoded in parallel on the current rayon pool.
    ///
    /// Fails on mismatched lengths, more keys than the capacity, a key
    /// repeated with different values (exact repeats are fine), and with
    /// probability below `2^-security` otherwise.
    pub fn encode<R: RngCore + CryptoRng>(
        &self,
        keys: &[u128],
        values: &[u128],
        rng: &mut R,
    ) -> Result<Vec<u128>, OkvsError> {
        self.check_encode(keys, values)?;
        let rows = self.rows(keys);
        let (mut eqs, offsets) = group_by_bin(&rows, values, self.params.bins());
        let seeds: Vec<[u8; 32]> = (0..self.params.bins()).map(|_| rng.gen()).collect();
        let mut table = vec![0u128; self.params.table_len()];
        let solved = split_at_offsets(&mut eqs, &offsets)
            .into_par_iter()
            .zip(table.par_chunks_mut(self.params.bin_len()))
            .zip(seeds.par_iter())
            .try_for_each(|((eqs, cols), seed)| self.encode_bin(eqs, cols, seed));
        match solved {
            Ok(()) => Ok(table),
            Err(solve::Inconsistent) => Err(self.failure(keys, values)),
        }
    }

    /// Decodes `keys` into `out` (same length) in parallel on the current
    /// rayon pool.
    pub fn decode(&self, table: &[u128], keys: &[u128], out: &mut [u128]) -> Result<(), OkvsError> {
        self.check_table(table)?;
        if keys.len() != out.len() {
            return Err(OkvsError::OutputLength {
                keys: keys.len(),
                out: out.len(),
            });
        }
        if self.params.bins() == 1 {
            keys.par_chunks(CHUNK)
                .zip(out.par_chunks_mut(CHUNK))
                .for_each(|(keys, out)| self.decode_chunk(table, keys, out));
        } else {
            let chunk = (keys.len() / (4 * rayon::current_num_threads())).clamp(CHUNK, SORT_CHUNK);
            keys.par_chunks(chunk)
                .zip(out.par_chunks_mut(chunk))
                .for_each(|(keys, out)| self.decode_sorted(table, keys, out));
        }
        Ok(())
    }

    /// Decodes one key.
    pub fn decode_one(&self, table: &[u128], key: u128) -> Result<u128, OkvsError> {
        self.check_table(table)?;
        Ok(self.decode_row(table, &self.hasher.row(key)))
    }

    fn check_encode(&self, keys: &[u128], values: &[u128]) -> Result<(), OkvsError> {
        if keys.len() != values.len() {
            return Err(OkvsError::LengthMismatch {
                keys: keys.len(),
                values: values.len(),
            });
        }
        if keys.len() > self.params.capacity() {
            return Err(OkvsError::OverCapacity {
                keys: keys.len(),
                capacity: self.params.capacity(),
            });
        }
        Ok(())
    }

    fn check_table(&self, table: &[u128]) -> Result<(), OkvsError> {
        let expected = self.params.table_len();
        if table.len() != expected {
            return Err(OkvsError::TableLength {
                expected,
                got: table.len(),
            });
        }
        Ok(())
    }

    fn rows(&self, keys: &[u128]) -> Vec<Row> {
        let mut rows = vec![Row::default(); keys.len()];
        keys.par_chunks(CHUNK)
            .zip(rows.par_chunks_mut(CHUNK))
            .for_each(|(keys, rows)| self.hasher.rows(keys, rows));
        rows
    }

    /// Random fill, then the bin's equations solved into its columns.
    fn encode_bin(
        &self,
        eqs: &mut [Equation],
        cols: &mut [u128],
        seed: &[u8; 32],
    ) -> Result<(), solve::Inconsistent> {
        let mut rng = StdRng::from_seed(*seed);
        cols.iter_mut().for_each(|c| *c = rng.gen());
        let starts = self.params.bin_len() - self.params.band_width() + 1;
        let mut sorted = solve::sort_by_start(eqs, starts);
        solve::solve(&mut sorted, self.params.band_width(), cols)
    }

    /// Tells a repeated key from the unlikely failure.
    fn failure(&self, keys: &[u128], values: &[u128]) -> OkvsError {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by_key(|&i| (keys[i], i));
        for pair in order.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if keys[a] == keys[b] && values[a] != values[b] {
                return OkvsError::DuplicateKey {
                    first: a,
                    second: b,
                };
            }
        }
        OkvsError::EncodeFailed(self.params.security())
    }

    /// Decodes keys in their order (one bin: its columns stay in cache).
    fn decode_chunk(&self, table: &[u128], keys: &[u128], out: &mut [u128]) {
        let mut rows = vec![Row::default(); keys.len()];
        self.hasher.rows(keys, &mut rows);
        for (row, o) in rows.iter().zip(out) {
            *o = self.decode_row(table, row);
        }
    }

    /// Decodes one task's keys in order of position, so that the table is
    /// read from memory about once per task rather than once per key (a
    /// band is 3 KiB of table), then puts the values back in order.
    fn decode_sorted(&self, table: &[u128], keys: &[u128], out: &mut [u128]) {
        let mut rows = vec![Row::default(); keys.len()];
        self.hasher.rows(keys, &mut rows);
        let (sorted, slots) = sort_by_block(&rows, &self.params);
        let values: Vec<u128> = sorted
            .iter()
            .map(|row| self.decode_row(table, row))
            .collect();
        for (o, &slot) in out.iter_mut().zip(&slots) {
            *o = values[slot as usize];
        }
    }

    fn decode_row(&self, table: &[u128], row: &Row) -> u128 {
        let at = row.bin as usize * self.params.bin_len() + row.start as usize;
        band::dot(&row.band, &table[at..at + self.params.band_width()])
    }
}

/// Most buckets of the decode sort: blocks of columns are widened beyond
/// 64 for tables above 2^24 entries, keeping the counts within 1 MiB.
const MAX_BLOCKS: usize = 1 << 18;

/// `rows` in order of position in the table, to within a block of 64 or
/// more columns (a counting sort), and each row's slot in that order
/// (fewer than 2^32 rows). Consecutive bands then overlap, so most of a
/// band's entries are still in L1 from the previous keys.
fn sort_by_block(rows: &[Row], params: &OkvsParams) -> (Vec<Row>, Vec<u32>) {
    let table_len = params.table_len();
    let mut shift = 6;
    while table_len >> shift > MAX_BLOCKS {
        shift += 1;
    }
    let block = |r: &Row| (r.bin as usize * params.bin_len() + r.start as usize) >> shift;
    let mut next = offsets_by(rows, (table_len >> shift) + 1, block);
    let mut sorted = vec![Row::default(); rows.len()];
    let mut slots = vec![0u32; rows.len()];
    for (r, slot) in rows.iter().zip(&mut slots) {
        let at = &mut next[block(r)];
        sorted[*at] = *r;
        *slot = *at as u32;
        *at += 1;
    }
    (sorted, slots)
}

/// Where each bucket's items begin in bucket order (`buckets + 1` offsets).
fn offsets_by<T>(items: &[T], buckets: usize, bucket: impl Fn(&T) -> usize) -> Vec<usize> {
    let mut offsets = vec![0usize; buckets + 1];
    for item in items {
        offsets[bucket(item) + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    offsets
}

/// The equations grouped by bin (a counting sort), with each bin's offset
/// (`bins + 1` offsets).
fn group_by_bin(rows: &[Row], values: &[u128], bins: usize) -> (Vec<Equation>, Vec<usize>) {
    let offsets = offsets_by(rows, bins, |r| r.bin as usize);
    let mut next = offsets.clone();
    let mut eqs = vec![Equation::default(); rows.len()];
    for (r, &value) in rows.iter().zip(values) {
        let slot = &mut next[r.bin as usize];
        eqs[*slot] = Equation {
            start: r.start,
            pivot: 0,
            band: r.band,
            value,
        };
        *slot += 1;
    }
    (eqs, offsets)
}

/// `items` (grouped by bin) cut into the bins' slices.
fn split_at_offsets<'a>(
    mut items: &'a mut [Equation],
    offsets: &[usize],
) -> Vec<&'a mut [Equation]> {
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for pair in offsets.windows(2) {
        let (head, tail) = items.split_at_mut(pair[1] - pair[0]);
        out.push(head);
        items = tail;
    }
    out
}
