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
//! selected ones. One key (`decode_one`) walks the band's set bits
//! (`band.rs`); batches split their keys by bin (one AES block a key, then
//! each bin hashes its own keys), and each bin's keys are decoded in order
//! of position through subset tables (`subsets.rs`: the XORs of all 16
//! subsets of each aligned group of 4 columns, so 64 lookups a key instead
//! of about 96 bit-steps, and no data-dependent branches), built just ahead
//! of the sweep. Back substitution uses the same tables, kept in step as
//! pivots are set. All of it is plain portable code, no explicit SIMD,
//! since the crate forbids `unsafe`.
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
//! one contiguous read that batches well. The price is decode work: 64
//! table lookups a key (about 96 XORs without the subset tables), more than
//! RR22's three reads (see `docs/benchmarks.md`); a tighter proven bound
//! would allow narrower bands.
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
//!
//! A table that only ever travels masked by a pseudorandom vector of its
//! length (VOLE-PSI's `P + C`) gains nothing from a random fill: the
//! masked table is pseudorandom whatever the free columns hold. [`Fill::Zero`] leaves them
//! zero there and saves a ChaCha12 pass over the whole table.

mod band;
mod bound;
mod error;
mod hash;
mod params;
mod solve;
mod subsets;
#[cfg(test)]
mod tests;

use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rand_core::CryptoRngCore;
use rayon::prelude::*;
use std::ops::Range;

pub use error::OkvsError;
use hash::{Row, RowHasher};
pub use params::{OkvsParams, BAND_WIDTH, BIN_ITEMS, DEFAULT_SECURITY};
use solve::Equation;
use subsets::Subsets;

/// Most keys one decoding batch groups by bin at once (its buffers take
/// about 90 bytes a key). A bin's subset tables are built once per batch,
/// so large batches amortise them: at `2^24` keys a batch of `2^21` keys
/// puts about 2,000 keys in each bin of about 20,000 columns.
const DECODE_BATCH: usize = 1 << 21;

/// Most keys of one bin that one decoding task takes (the task sorts them
/// by position and builds the bin's subset tables once); a bin's keys at
/// capacity, about 2^14, fit in one task.
const DECODE_PART: usize = 1 << 15;

/// A decoding task with fewer keys than `1 / SPARSE` of the bin's columns
/// walks band bits instead of building the bin's subset tables (four table
/// entries a column, about the work of one band walk per 16 columns).
const SPARSE: usize = 16;

/// Keys per parallel task of the simple passes (hashing, gathering
/// results); grouping by bin takes at least this many keys a task.
const CHUNK: usize = 4096;

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
        let mut table = vec![0u128; self.params.table_len()];
        self.encoder(keys, values, Fill::Random(rng))?
            .encode_bins(0..self.params.bins(), &mut table)?;
        Ok(table)
    }

    /// [`Okvs::encode`] a few bins at a time, so that a protocol can send
    /// each part of the table as it is made (bins are independent): checks
    /// the input and groups it by bin; [`BinEncoder::encode_bins`] then
    /// solves given bins, their free entries as `fill` says.
    pub fn encoder<'a>(
        &'a self,
        keys: &'a [u128],
        values: &'a [u128],
        fill: Fill<'_>,
    ) -> Result<BinEncoder<'a>, OkvsError> {
        if keys.len() != values.len() {
            return Err(OkvsError::LengthMismatch {
                keys: keys.len(),
                values: values.len(),
            });
        }
        self.check_capacity(keys)?;
        Ok(self.bin_encoder(keys, Values::Given(values), Some(values), fill))
    }

    /// [`Okvs::encoder`] for values that are a function of their keys:
    /// `value(keys, out)` writes the values of `keys` into `out`, called a
    /// chunk of keys at a time as they are grouped by bin, so the values
    /// are never held for the whole set (VOLE-PSI's `h(k)`, whose vector
    /// would be the largest one alive at the receiver's peak). Equal keys
    /// have equal values here, so a failure is never a duplicate key.
    pub fn encoder_of<'a, F>(
        &'a self,
        keys: &'a [u128],
        value: F,
        fill: Fill<'_>,
    ) -> Result<BinEncoder<'a>, OkvsError>
    where
        F: Fn(&[u128], &mut [u128]) + Sync,
    {
        self.check_capacity(keys)?;
        Ok(self.bin_encoder(keys, Values::Of(&value), None, fill))
    }

    /// The checked input grouped by bin, with a fill seed per bin if the
    /// fill is random; `given`, the values if the caller gave them (to name
    /// a duplicate key).
    fn bin_encoder<'a>(
        &'a self,
        keys: &'a [u128],
        values: Values<'_>,
        given: Option<&'a [u128]>,
        fill: Fill<'_>,
    ) -> BinEncoder<'a> {
        let seeds = match fill {
            Fill::Random(rng) => (0..self.params.bins()).map(|_| Some(rng.gen())).collect(),
            Fill::Zero => vec![None; self.params.bins()],
        };
        BinEncoder {
            okvs: self,
            split: self.split(keys, values),
            seeds,
            keys,
            values: given,
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
        for (keys, out) in keys.chunks(DECODE_BATCH).zip(out.chunks_mut(DECODE_BATCH)) {
            let mut batch = self.decoder(keys);
            batch.decode_bins(0..self.params.bins(), table)?;
            batch.finish(out)?;
        }
        Ok(())
    }

    /// [`Okvs::decode`] a few bins at a time, as their part of the table
    /// arrives: groups `keys` by bin now; [`BinDecoder::decode_bins`] then
    /// decodes the keys of given bins from their columns, and
    /// [`BinDecoder::finish`] puts the values in key order. It holds about
    /// 40 bytes a key (`decode` takes its keys [`DECODE_BATCH`] at a time).
    pub fn decoder(&self, keys: &[u128]) -> BinDecoder<'_> {
        self.bin_decoder(self.split(keys, Values::None))
    }

    /// A decoder of the keys `split` groups: the tasks and where each
    /// chunk's keys go.
    fn bin_decoder(&self, split: Split) -> BinDecoder<'_> {
        let (bins, chunks) = (self.params.bins(), split.keys.len());
        // Where each chunk's part of each bin lies in the grouped order
        // (bins in order, chunks in order inside), and the tasks: each
        // bin's keys in parts of at most about `DECODE_PART`.
        let mut firsts = vec![vec![0usize; bins]; chunks];
        let mut tasks = vec![Vec::new(); bins];
        let mut starts = Vec::with_capacity(bins + 1);
        let mut at = 0;
        for (b, bin_tasks) in tasks.iter_mut().enumerate() {
            starts.push(at);
            let (mut first, mut len) = (0, 0);
            for (c, (first_of, parts)) in firsts.iter_mut().zip(&split.keys).enumerate() {
                first_of[b] = at + len;
                len += parts[b].len();
                if len >= DECODE_PART || c + 1 == chunks {
                    if len > 0 {
                        bin_tasks.push(Task {
                            chunks: first..c + 1,
                            len,
                        });
                    }
                    at += len;
                    (first, len) = (c + 1, 0);
                }
            }
        }
        starts.push(at);
        BinDecoder {
            okvs: self,
            values: vec![0u128; split.bin_of.len()],
            split,
            firsts,
            tasks,
            starts,
            decoded: 0,
        }
    }

    /// Decodes one key.
    pub fn decode_one(&self, table: &[u128], key: u128) -> Result<u128, OkvsError> {
        self.check_table(table)?;
        Ok(self.decode_row(table, &self.hasher.row(key)))
    }

    fn check_capacity(&self, keys: &[u128]) -> Result<(), OkvsError> {
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

    /// Splits the input by bin: bins from one AES block a key, then each
    /// chunk's keys (and values) copied into its parts of the bins. Bins
    /// then hash their own keys into reused buffers, so no array of rows or
    /// equations as large as the input is written.
    fn split(&self, keys: &[u128], values: Values<'_>) -> Split {
        let bins = self.params.bins();
        let chunk = keys
            .len()
            .div_ceil(4 * rayon::current_num_threads())
            .max(CHUNK);
        let mut bin_of = vec![0u32; keys.len()];
        keys.par_chunks(chunk)
            .zip(bin_of.par_chunks_mut(chunk))
            .for_each(|(keys, bin_of)| self.hasher.bins(keys, bin_of));
        let by_bin = |items: &[u128], bin_of: &[u32], count: &[usize]| {
            let mut parts: Vec<Vec<u128>> = count.iter().map(|&n| Vec::with_capacity(n)).collect();
            for (&x, &b) in items.iter().zip(bin_of) {
                parts[b as usize].push(x);
            }
            parts
        };
        let (keys, values) = bin_of
            .par_chunks(chunk)
            .enumerate()
            .map(|(c, bin_of)| {
                let mut count = vec![0usize; bins];
                for &b in bin_of {
                    count[b as usize] += 1;
                }
                let items = c * chunk..c * chunk + bin_of.len();
                let values = match values {
                    Values::Given(values) => by_bin(&values[items.clone()], bin_of, &count),
                    Values::Of(value) => {
                        let mut made = vec![0u128; items.len()];
                        value(&keys[items.clone()], &mut made);
                        by_bin(&made, bin_of, &count)
                    }
                    Values::None => Vec::new(),
                };
                (by_bin(&keys[items], bin_of, &count), values)
            })
            .unzip();
        Split {
            chunk,
            bin_of,
            keys,
            values,
        }
    }

    /// Random fill, then the bin's equations solved into its columns.
    fn encode_bin(
        &self,
        split: &Split,
        bin: usize,
        cols: &mut [u128],
        seed: &Option<[u8; 32]>,
        scratch: &mut Scratch,
    ) -> Result<(), solve::Inconsistent> {
        match seed {
            Some(seed) => {
                let mut rng = StdRng::from_seed(*seed);
                cols.iter_mut().for_each(|c| *c = rng.gen());
            }
            None => cols.fill(0),
        }
        self.hash_bin(split, bin, 0..split.keys.len(), &mut scratch.rows);
        let starts = self.params.bin_len() - self.params.band_width() + 1;
        let values = split
            .values
            .iter()
            .flat_map(|parts| parts[bin].iter().copied());
        solve::sort_by_start(&scratch.rows, values, starts, &mut scratch.eqs);
        solve::solve(&mut scratch.eqs, cols, &mut scratch.subsets)
    }

    /// The rows of the keys of `bin` from `chunks`, in input order.
    fn hash_bin(&self, split: &Split, bin: usize, chunks: Range<usize>, rows: &mut Vec<Row>) {
        rows.clear();
        for parts in &split.keys[chunks] {
            let at = rows.len();
            rows.resize(at + parts[bin].len(), Row::default());
            self.hasher.rows(&parts[bin], &mut rows[at..]);
        }
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

    /// Decodes the keys of `bin` from `chunks` into `out`: in order of
    /// position through the bin's subset tables, built as the sweep reaches
    /// them, or by walking band bits if the keys are few for the bin's size.
    fn decode_part(
        &self,
        cols: &[u128],
        split: &Split,
        bin: usize,
        chunks: Range<usize>,
        out: &mut [u128],
        scratch: &mut Scratch,
    ) {
        self.hash_bin(split, bin, chunks, &mut scratch.rows);
        let rows = &scratch.rows;
        let bin_len = self.params.bin_len();
        if rows.len() * SPARSE < bin_len {
            for (row, o) in rows.iter().zip(out) {
                *o = band::dot(
                    &row.band,
                    &cols[row.start as usize..][..self.params.band_width()],
                );
            }
            return;
        }
        order_by_word(rows, bin_len.div_ceil(64), &mut scratch.order);
        let subsets = &mut scratch.subsets;
        subsets.reset(bin_len);
        let mut built = 0;
        for &i in &scratch.order {
            let row = &rows[i as usize];
            let to = row.start as usize / 4 + subsets::BAND_GROUPS;
            if to > built {
                subsets.build(cols, built..to);
                built = to;
            }
            out[i as usize] = subsets.dot_band(row.start as usize, &row.band);
        }
    }

    fn decode_row(&self, table: &[u128], row: &Row) -> u128 {
        let at = row.bin as usize * self.params.bin_len() + row.start as usize;
        band::dot(&row.band, &table[at..at + self.params.band_width()])
    }
}

/// What the entries no equation fixes hold (the module's "Security: random
/// fill").
pub enum Fill<'r> {
    /// Uniformly random, from a 32-byte seed per bin drawn from this RNG:
    /// for a table that travels as it is.
    Random(&'r mut dyn CryptoRngCore),
    /// Zero: only for a table that travels masked by a pseudorandom vector
    /// of the table's length.
    Zero,
}

/// [`Okvs::encoder`]: the input grouped by bin and each bin's random seed.
pub struct BinEncoder<'a> {
    okvs: &'a Okvs,
    split: Split,
    /// Each bin's fill seed, `None` for [`Fill::Zero`].
    seeds: Vec<Option<[u8; 32]>>,
    keys: &'a [u128],
    /// The values as given ([`Okvs::encoder`]), to tell a duplicate key
    /// from a failure; `None` for values made from their keys.
    values: Option<&'a [u128]>,
}

/// The values [`Okvs::split`] groups along with the keys.
#[derive(Clone, Copy)]
enum Values<'a> {
    /// None (decoding).
    None,
    /// One per key.
    Given(&'a [u128]),
    /// Made from a chunk of keys ([`Okvs::encoder_of`]).
    Of(&'a (dyn Fn(&[u128], &mut [u128]) + Sync)),
}

impl<'a> BinEncoder<'a> {
    /// Solves the bins `bins` into `out`, their columns (`bins.len()`
    /// times [`OkvsParams::bin_len`]), in parallel on the current rayon
    /// pool. Fails as [`Okvs::encode`] does, for the input as a whole (a
    /// failing bin reports the repeated key or the unlikely failure).
    pub fn encode_bins(&mut self, bins: Range<usize>, out: &mut [u128]) -> Result<(), OkvsError> {
        let okvs = self.okvs;
        check_part(okvs, &bins, out.len())?;
        let split = &self.split;
        let solved = out
            .par_chunks_mut(okvs.params.bin_len())
            .zip(&self.seeds[bins.clone()])
            .zip(bins)
            .try_for_each_init(Scratch::default, |scratch, ((cols, seed), bin)| {
                okvs.encode_bin(split, bin, cols, seed, scratch)
            });
        solved.map_err(|solve::Inconsistent| match self.values {
            Some(values) => okvs.failure(self.keys, values),
            None => OkvsError::EncodeFailed(okvs.params.security()),
        })
    }

    /// A decoder of the keys this encoder took, from any table of the same
    /// OKVS (VOLE-PSI's receiver decodes its own keys from its VOLE
    /// vector): their grouping by bin is reused rather than hashed and
    /// copied again, and all keys are decoded at once, so each bin's
    /// subset tables are built once ([`Okvs::decode`] takes batches). It
    /// holds the keys, grouped, and a value a key.
    pub fn into_decoder(self) -> BinDecoder<'a> {
        let mut split = self.split;
        split.values = Vec::new();
        self.okvs.bin_decoder(split)
    }
}

/// [`Okvs::decoder`]: the keys grouped by bin, and their values as bins
/// are decoded.
pub struct BinDecoder<'a> {
    okvs: &'a Okvs,
    split: Split,
    /// `firsts[c][b]`: where chunk `c`'s keys of bin `b` start in `values`.
    firsts: Vec<Vec<usize>>,
    /// Per bin, its decoding tasks.
    tasks: Vec<Vec<Task>>,
    /// `starts[b]`: where bin `b`'s values start in `values` (and the end).
    starts: Vec<usize>,
    /// Values in grouped order (bins in order, chunks in order inside).
    values: Vec<u128>,
    /// Bins decoded so far.
    decoded: usize,
}

/// One bin's keys from some chunks: `len` of them.
#[derive(Clone)]
struct Task {
    chunks: Range<usize>,
    len: usize,
}

impl BinDecoder<'_> {
    /// Decodes the keys of `bins` (the next bins, in order) from `cols`,
    /// their columns, in parallel on the current rayon pool.
    pub fn decode_bins(&mut self, bins: Range<usize>, cols: &[u128]) -> Result<(), OkvsError> {
        let okvs = self.okvs;
        check_part(okvs, &bins, cols.len())?;
        if bins.start != self.decoded {
            return Err(OkvsError::BinOrder {
                expected: self.decoded,
                got: bins.start,
            });
        }
        self.decoded = bins.end;
        let bin_len = okvs.params.bin_len();
        let mut rest = &mut self.values[self.starts[bins.start]..self.starts[bins.end]];
        let mut jobs = Vec::new();
        for bin in bins.clone() {
            for task in &self.tasks[bin] {
                let (vals, tail) = std::mem::take(&mut rest).split_at_mut(task.len);
                rest = tail;
                let at = (bin - bins.start) * bin_len;
                jobs.push((bin, task.chunks.clone(), &cols[at..at + bin_len], vals));
            }
        }
        let split = &self.split;
        jobs.into_par_iter().for_each_init(
            Scratch::default,
            |scratch, (bin, chunks, cols, vals)| {
                okvs.decode_part(cols, split, bin, chunks, vals, scratch)
            },
        );
        Ok(())
    }

    /// Calls `f(keys, values)` on the decoded values of `bins` (bins
    /// decoded already), a part of a bin at a time, in parallel on the
    /// current rayon pool: for work on each value that can start as soon
    /// as its bin is decoded (VOLE-PSI's sender turns its values into
    /// outputs while the next part of the table is on its way).
    pub fn map_decoded<F>(&mut self, bins: Range<usize>, f: F) -> Result<(), OkvsError>
    where
        F: Fn(&[u128], &mut [u128]) + Sync,
    {
        if bins.start > bins.end || bins.end > self.decoded {
            return Err(OkvsError::BinOrder {
                expected: self.decoded,
                got: bins.end,
            });
        }
        let mut rest = &mut self.values[self.starts[bins.start]..self.starts[bins.end]];
        let mut parts = Vec::new();
        for bin in bins {
            for chunk in &self.split.keys {
                let keys = &chunk[bin][..];
                let (values, tail) = std::mem::take(&mut rest).split_at_mut(keys.len());
                rest = tail;
                parts.push((keys, values));
            }
        }
        parts
            .into_par_iter()
            .for_each(|(keys, values)| f(keys, values));
        Ok(())
    }

    /// Every bin decoded: the keys' values, in key order, into `out`.
    pub fn finish(self, out: &mut [u128]) -> Result<(), OkvsError> {
        let bins = self.okvs.params.bins();
        if self.decoded != bins {
            return Err(OkvsError::BinOrder {
                expected: bins,
                got: self.decoded,
            });
        }
        if out.len() != self.split.bin_of.len() {
            return Err(OkvsError::OutputLength {
                keys: self.split.bin_of.len(),
                out: out.len(),
            });
        }
        let values = &self.values;
        out.par_chunks_mut(self.split.chunk)
            .zip(self.split.bin_of.par_chunks(self.split.chunk))
            .zip(self.firsts)
            .for_each(|((out, bin_of), mut next)| {
                for (o, &b) in out.iter_mut().zip(bin_of) {
                    *o = values[next[b as usize]];
                    next[b as usize] += 1;
                }
            });
        Ok(())
    }
}

/// Refuses a part of the table that is not whole bins of this OKVS.
fn check_part(okvs: &Okvs, bins: &Range<usize>, len: usize) -> Result<(), OkvsError> {
    let expected = bins.len() * okvs.params.bin_len();
    if bins.end > okvs.params.bins() || bins.start > bins.end {
        return Err(OkvsError::BinOrder {
            expected: okvs.params.bins(),
            got: bins.end,
        });
    }
    if len != expected {
        return Err(OkvsError::TableLength { expected, got: len });
    }
    Ok(())
}

/// The input split by bin (`Okvs::split`): `keys[c][b]` (and
/// `values[c][b]` when encoding) holds, in input order, the items of chunk
/// `c` (`chunk` items) that fall in bin `b`; `bin_of` is each item's bin.
struct Split {
    chunk: usize,
    bin_of: Vec<u32>,
    keys: Vec<Vec<Vec<u128>>>,
    values: Vec<Vec<Vec<u128>>>,
}

/// Buffers one worker reuses from bin to bin, so that bins after the first
/// touch no fresh pages.
#[derive(Default)]
struct Scratch {
    rows: Vec<Row>,
    eqs: Vec<Equation>,
    order: Vec<u32>,
    subsets: Subsets,
}

/// Indices of `rows` in order of the 64-column word their start lies in
/// (a counting sort; `words` words), into `order`.
fn order_by_word(rows: &[Row], words: usize, order: &mut Vec<u32>) {
    let mut next = vec![0u32; words + 1];
    for r in rows {
        next[r.start as usize / 64 + 1] += 1;
    }
    for i in 1..next.len() {
        next[i] += next[i - 1];
    }
    order.clear();
    order.resize(rows.len(), 0);
    for (i, r) in rows.iter().enumerate() {
        let at = &mut next[r.start as usize / 64];
        order[*at as usize] = i as u32;
        *at += 1;
    }
}
