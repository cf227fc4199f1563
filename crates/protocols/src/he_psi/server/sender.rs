//! The sender's answer to one query (paper section 3.1): for each bundle
//! index, all powers of the client's encrypted slot vector, then for each
//! bin bundle there one result package (the matching polynomial's value
//! and, when labeled, each label polynomial's), switched to the lowest
//! level. Bundle indices and bundles are processed in parallel; packages
//! go to a sink as soon as they are ready, so the caller can stream them.

use psikit_he::{Ciphertext, Evaluator, HeParams, PlainPoly, RelinKey};
use rayon::prelude::*;

use crate::error::{Error, Violation};
use crate::he_psi::common::answer::ResultPackage;
use crate::he_psi::common::cost::{PlanWork, QueryWork};
use crate::he_psi::common::grouping::Grouping;
use crate::he_psi::common::powers::PowersPlan;
use crate::he_psi::server::eval::{evaluate, Powers};
use crate::he_psi::server::sender_db::SenderDb;

/// A sender database made ready for queries: its BFV parameters (one
/// shared instance, which every plaintext, key and ciphertext of a query
/// must come from), the powers plan with its groupings, and optionally
/// every bundle's plaintexts cached.
pub struct Sender {
    db: SenderDb,
    he: HeParams,
    plan: PowersPlan,
    /// The plan's own grouping (none, or Paterson-Stockmeyer's blocks) and
    /// its operations.
    own: (Grouping, PlanWork),
    /// The plan's leaves grouped, per prefix of the groups, for bundle
    /// indices with few polynomials.
    leaves: Vec<(Grouping, PlanWork)>,
    cache: bool,
}

impl Sender {
    /// Checks the database's parameters (128-bit security, a valid powers
    /// plan) and, with `cache`, encodes all plaintexts now: faster queries
    /// for about `8 k n` bytes per coefficient.
    pub fn new(mut db: SenderDb, cache: bool) -> Result<Self, Error> {
        let he = db.params().he_params()?;
        let plan = PowersPlan::from_params(db.params())?;
        if cache {
            db.cache_plaintexts(&he)?;
        }
        Ok(Self {
            db,
            he,
            own: with_work(&plan, Grouping::of_plan(&plan)),
            leaves: Grouping::leaf_prefixes(&plan)
                .into_iter()
                .map(|g| with_work(&plan, g))
                .collect(),
            plan,
            cache,
        })
    }

    pub fn db(&self) -> &SenderDb {
        &self.db
    }

    pub fn he(&self) -> &HeParams {
        &self.he
    }

    /// Applies an update to the database, then re-caches the plaintexts of
    /// the bundles it changed.
    pub fn update<T>(
        &mut self,
        f: impl FnOnce(&mut SenderDb) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let out = f(&mut self.db)?;
        if self.cache {
            self.db.cache_plaintexts(&self.he)?;
        }
        Ok(out)
    }

    /// Source powers per bundle index in a query.
    pub fn sources(&self) -> usize {
        self.plan.sources().len()
    }

    /// An evaluator for a client's relinearization key (as sent).
    pub fn evaluator(&self, relin_key: &[u8]) -> Result<Evaluator, Error> {
        let rk = RelinKey::from_bytes(&self.he, relin_key)?;
        Ok(Evaluator::new(&self.he, &rk)?)
    }

    /// Answers a query whose source powers are `query[i][s]` for bundle index
    /// `i` and source `s`; calls `sink` once per bin bundle (from worker
    /// threads, in no particular order). Returns the number of packages.
    pub fn answer<F>(
        &self,
        ev: &Evaluator,
        query: Vec<Vec<Ciphertext>>,
        sink: F,
    ) -> Result<usize, Error>
    where
        F: Fn(ResultPackage) -> Result<(), Error> + Sync,
    {
        let shape = self.db.shape();
        if query.len() != shape.bundle_idx_count() {
            return Err(Violation::Count {
                what: "bundle indices in the query",
                got: query.len() as u64,
                expected: shape.bundle_idx_count() as u64,
            }
            .into());
        }
        query
            .into_par_iter()
            .enumerate()
            .map(|(idx, sources)| self.answer_index(ev, idx, sources, &sink))
            .sum()
    }

    fn answer_index<F>(
        &self,
        ev: &Evaluator,
        idx: usize,
        sources: Vec<Ciphertext>,
        sink: &F,
    ) -> Result<usize, Error>
    where
        F: Fn(ResultPackage) -> Result<(), Error> + Sync,
    {
        let bundles = self.db.bundles_at(idx);
        if bundles.is_empty() {
            return Ok(0);
        }
        let polys = bundles.len() * (1 + self.db.shape().label_fragments());
        let grouping = self.grouping_for(polys);
        let powers = Powers::compute(ev, &self.plan, grouping, sources)?;
        bundles
            .par_iter()
            .map(|bundle| {
                let plain = bundle.plaintexts(self.db.shape(), &self.he)?;
                let package = self.package(ev, &powers, grouping, idx, bundle.degree(), &plain)?;
                sink(package)?;
                Ok(1)
            })
            .sum()
    }

    /// The grouping the cost model finds cheaper for `polys` polynomials on
    /// one bundle index: grouped leaves save one product per leaf per
    /// query and cost a lifted inner sum per group and polynomial.
    fn grouping_for(&self, polys: usize) -> &Grouping {
        let he = &self.he;
        let work = QueryWork {
            n: he.degree() as u32,
            k: he.moduli_at(he.query_level()).len(),
            indices: 1,
            shards: 1,
            polys_per_index: polys as u64,
            degree: self.plan.max_degree(),
            sources: self.plan.sources().len() as u64,
            plan: self.own.1,
            leaf_groups: self.leaves.iter().map(|(_, work)| *work).collect(),
        };
        match work.leaf_choice() {
            Some(i) => &self.leaves[i].0,
            None => &self.own.0,
        }
    }

    /// Evaluates one bundle's polynomials (`plain` holds `degree + 1`
    /// coefficients per polynomial).
    fn package(
        &self,
        ev: &Evaluator,
        powers: &Powers,
        grouping: &Grouping,
        idx: usize,
        degree: usize,
        plain: &[PlainPoly],
    ) -> Result<ResultPackage, Error> {
        let mut results = plain
            .chunks(degree + 1)
            .map(|coeffs| {
                let refs: Vec<&PlainPoly> = coeffs.iter().collect();
                let mut ct = evaluate(ev, powers, &refs, grouping)?;
                ev.to_lowest(&mut ct)?;
                Ok(ct)
            })
            .collect::<Result<Vec<_>, Error>>()?
            .into_iter();
        let matching = results
            .next()
            .ok_or(Error::Internal("bundle without polynomials"))?;
        Ok(ResultPackage {
            bundle_idx: idx as u32,
            matching,
            labels: results.collect(),
        })
    }
}

fn with_work(plan: &PowersPlan, grouping: Grouping) -> (Grouping, PlanWork) {
    let work = PlanWork::new(plan, &grouping);
    (grouping, work)
}
