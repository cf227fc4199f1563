//! The client side of a query (paper sections 3 and 4.2): cuckoo-hash the
//! OPRF'd items into the table, encrypt the source powers of each bundle
//! index's slot vector, and read matches and labels out of the result
//! packages.

use psikit_he::{Ciphertext, HeParams, RelinKey, SecretKey};
use psikit_primitives::oprf::Output;
use psikit_structures::cuckoo_table::CuckooTable;
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;

use crate::common::Match;
use crate::error::{Error, Violation};
use crate::he_psi::common::answer::ResultPackage;
use crate::he_psi::common::hashing::{felts_to_bytes, item_felts, split_oprf};
use crate::he_psi::common::label::{decrypt_label, encrypted_len, LabelKey};
use crate::he_psi::common::poly::Field;
use crate::he_psi::common::powers::PowersPlan;
use crate::he_psi::common::shape::DbShape;
use crate::he_psi::params::PsiParams;

/// A client's keys and the parameters they were made for. The secret key
/// never leaves this struct; the relinearization key goes to the server.
pub struct Receiver {
    params: PsiParams,
    shape: DbShape,
    he: HeParams,
    sources: Vec<u32>,
    field: Field,
    sk: SecretKey,
    rk: RelinKey,
}

/// What the client remembers between sending a query and reading its
/// answer: which item sits in which bin.
pub struct QueryState {
    /// Per table bin: the caller's index of the item there, its felts and
    /// label key.
    bins: Vec<Option<BinItem>>,
    /// The matches read so far.
    found: Vec<Found>,
    /// Caller indices that did not fit the cuckoo table; query them next.
    pub leftovers: Vec<usize>,
}

/// A match: the caller's index of the item and its label.
type Found = (usize, Option<Vec<u8>>);

struct BinItem {
    index: usize,
    felts: Vec<u64>,
    key: LabelKey,
}

impl Receiver {
    /// Fresh keys for a database with these parameters and labels of up to
    /// `max_label_bytes` bytes (0: unlabeled).
    pub fn new(params: PsiParams, max_label_bytes: usize) -> Result<Self, Error> {
        let shape = DbShape::new(&params, max_label_bytes)?;
        let he = params.he_params()?;
        let plan = PowersPlan::from_params(&params)?;
        let sk = SecretKey::generate(&he)?;
        let rk = RelinKey::generate(&sk)?;
        Ok(Self {
            sources: plan.sources().to_vec(),
            field: Field::new(shape.plain_modulus),
            params,
            shape,
            he,
            sk,
            rk,
        })
    }

    pub fn params(&self) -> &PsiParams {
        &self.params
    }

    pub fn shape(&self) -> &DbShape {
        &self.shape
    }

    pub fn he(&self) -> &HeParams {
        &self.he
    }

    pub fn relin_key(&self) -> &RelinKey {
        &self.rk
    }

    /// Places `outputs` (the client's OPRF outputs, indexed by position) in
    /// a cuckoo table and encrypts the query: `query[i][s]` is the source
    /// power `s` of bundle index `i`. Items that did not fit are listed in
    /// [`QueryState::leftovers`] for another query.
    pub fn query<R: RngCore + CryptoRng>(
        &self,
        outputs: &[Output],
        rng: &mut R,
    ) -> Result<(QueryState, Vec<Vec<Ciphertext>>), Error> {
        let state = self.place(outputs, rng)?;
        let per = self.shape.bins_per_bundle();
        let query = state
            .bins
            .chunks(per)
            .take(self.shape.bundle_idx_count())
            .map(|bins| self.encrypt_index(bins))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((state, query))
    }

    fn place<R: RngCore + CryptoRng>(
        &self,
        outputs: &[Output],
        rng: &mut R,
    ) -> Result<QueryState, Error> {
        let mut table = CuckooTable::new(self.shape.table_size, self.shape.hash_funcs)
            .map_err(|e| Error::Config(format!("cuckoo table: {e}")))?;
        let split: Vec<_> = outputs.iter().map(split_oprf).collect();
        let values: Vec<[u8; 16]> = split.iter().map(|(v, _)| v.0).collect();
        let leftovers = table
            .insert_all(&values, rng)
            .iter()
            .map(|e| e.index)
            .collect();
        let f = self.shape.felts_per_item;
        let bins = table
            .bins()
            .iter()
            .map(|slot| {
                slot.map(|entry| {
                    let (value, key) = &split[entry.index];
                    let mut felts = vec![0u64; f];
                    item_felts(value, self.shape.bits_per_felt, &mut felts);
                    BinItem {
                        index: entry.index,
                        felts,
                        key: key.clone(),
                    }
                })
            })
            .collect();
        Ok(QueryState {
            bins,
            found: Vec::new(),
            leftovers,
        })
    }

    /// Encrypts `y^s` for every source `s`, where `y` holds each bin's item
    /// felts in the bin's slots (zero for empty bins: the client ignores
    /// their results).
    fn encrypt_index(&self, bins: &[Option<BinItem>]) -> Result<Vec<Ciphertext>, Error> {
        let f = self.shape.felts_per_item;
        let mut y = vec![0u64; self.shape.slots];
        for (k, bin) in bins.iter().enumerate() {
            if let Some(item) = bin {
                y[k * f..(k + 1) * f].copy_from_slice(&item.felts);
            }
        }
        self.sources
            .iter()
            .map(|&s| {
                let power: Vec<u64> = y.iter().map(|&v| self.field.pow(v, u64::from(s))).collect();
                Ok(self.sk.encrypt_slots(&power)?)
            })
            .collect()
    }

    /// Reads result packages: every item of a package's bundle index whose
    /// `f` matching slots decrypt to zero is a match; its label is
    /// decrypted from the label fragments of the same package.
    ///
    /// Packages are decrypted in parallel on the rayon pool: a sharded
    /// database answers with thousands of them (one per bundle of every
    /// shard), and decrypting them is then most of the client's time.
    pub fn process(&self, state: &mut QueryState, packages: &[ResultPackage]) -> Result<(), Error> {
        let found = packages
            .par_iter()
            .map(|package| self.read(state, package))
            .collect::<Result<Vec<_>, _>>()?;
        state.found.extend(found.into_iter().flatten());
        Ok(())
    }

    /// The matches (caller index, label) one package reports.
    fn read(&self, state: &QueryState, package: &ResultPackage) -> Result<Vec<Found>, Error> {
        let idx = package.bundle_idx as usize;
        if idx >= self.shape.bundle_idx_count()
            || package.labels.len() != self.shape.label_fragments()
        {
            return Err(Violation::Invalid("result package for these parameters").into());
        }
        let f = self.shape.felts_per_item;
        let per = self.shape.bins_per_bundle();
        let matching = self.sk.decrypt_slots(&package.matching)?;
        let hits: Vec<(usize, &BinItem)> = state.bins[idx * per..(idx + 1) * per]
            .iter()
            .enumerate()
            .filter_map(|(k, bin)| bin.as_ref().map(|item| (k, item)))
            .filter(|(k, _)| matching[k * f..(k + 1) * f].iter().all(|&v| v == 0))
            .collect();
        if hits.is_empty() {
            return Ok(Vec::new());
        }
        if !self.shape.labeled() {
            return Ok(hits.iter().map(|(_, item)| (item.index, None)).collect());
        }
        let labels = package
            .labels
            .iter()
            .map(|ct| self.sk.decrypt_slots(ct))
            .collect::<Result<Vec<_>, _>>()?;
        // A true match always carries a well-formed label; one that does
        // not decrypt is a false-positive slot match.
        Ok(hits
            .into_iter()
            .filter_map(|(k, item)| {
                let label = self.read_label(&labels, k, &item.key).ok()?;
                Some((item.index, Some(label)))
            })
            .collect())
    }

    /// Collects bin `k`'s label felts from the decrypted fragments and
    /// decrypts them with the item's label key.
    fn read_label(
        &self,
        fragments: &[Vec<u64>],
        k: usize,
        key: &LabelKey,
    ) -> Result<Vec<u8>, Error> {
        let f = self.shape.felts_per_item;
        let felts: Vec<u64> = fragments
            .iter()
            .flat_map(|slots| slots[k * f..(k + 1) * f].iter().copied())
            .collect();
        let mut bytes = vec![0u8; encrypted_len(self.shape.max_label_bytes)];
        felts_to_bytes(&felts, self.shape.bits_per_felt, &mut bytes);
        decrypt_label(key, &bytes)
    }

    /// The matches of a finished query, by input index. An item matched by
    /// two packages (a false positive, probability below the parameters'
    /// bound) is reported once.
    pub fn matches(state: QueryState) -> Vec<Match> {
        let mut found = state.found;
        found.sort_by_key(|(i, _)| *i);
        found.dedup_by_key(|(i, _)| *i);
        found
            .into_iter()
            .map(|(index, label)| Match { index, label })
            .collect()
    }
}
