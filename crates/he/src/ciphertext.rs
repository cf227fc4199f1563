//! The ciphertext handle.

use std::fmt;

use fhe::bfv::Ciphertext as FheCiphertext;

use crate::error::HeError;
use crate::params::HeParams;

/// Length of the seeds from which uniform polynomials are expanded.
pub const SEED_LEN: usize = 32;

/// A BFV ciphertext: two polynomials (three after an unrelinearized product)
/// in NTT form, modulo the moduli of its level.
#[derive(Clone)]
pub struct Ciphertext {
    pub(crate) params: HeParams,
    inner: FheCiphertext,
    /// Seed of `c1` while this is an untouched fresh encryption.
    seed: Option<[u8; SEED_LEN]>,
}

impl Ciphertext {
    pub(crate) fn new(params: &HeParams, inner: FheCiphertext) -> Self {
        Self {
            params: params.clone(),
            inner,
            seed: None,
        }
    }

    /// Wraps a decoded query ciphertext whose `c1` came from `seed`.
    pub(crate) fn with_seed(params: &HeParams, inner: FheCiphertext, seed: [u8; SEED_LEN]) -> Self {
        Self {
            params: params.clone(),
            inner,
            seed: Some(seed),
        }
    }

    pub(crate) fn inner(&self) -> &FheCiphertext {
        &self.inner
    }

    /// Mutable access; the ciphertext stops being a fresh encryption.
    pub(crate) fn inner_mut(&mut self) -> &mut FheCiphertext {
        self.seed = None;
        &mut self.inner
    }

    pub(crate) fn seed(&self) -> Option<&[u8; SEED_LEN]> {
        self.seed.as_ref()
    }

    /// Level: how many moduli were dropped from the end of the full chain
    /// (query level 1, lowest level `k`).
    pub fn level(&self) -> usize {
        let held = self.inner.first().map_or(0, |c0| c0.ctx().moduli().len());
        self.params.moduli().len() - held
    }

    /// Number of polynomials: 2 normally, 3 after [`crate::eval::Evaluator::mul_lazy`]
    /// or [`crate::eval::Evaluator::mul_prepared_lazy`] (and sums including those).
    pub fn parts(&self) -> usize {
        self.inner.len()
    }

    /// The parameters this ciphertext was made with.
    pub fn params(&self) -> &HeParams {
        &self.params
    }

    /// Errors unless this ciphertext comes from `params`.
    pub(crate) fn check_params(&self, params: &HeParams) -> Result<(), HeError> {
        if self.params.same(params) {
            Ok(())
        } else {
            Err(HeError::ParamsMismatch)
        }
    }

    /// Errors unless this ciphertext is at `level` with `parts` polynomials.
    pub(crate) fn check_shape(
        &self,
        what: &'static str,
        level: usize,
        parts: usize,
    ) -> Result<(), HeError> {
        if self.level() != level {
            return Err(HeError::WrongLevel {
                what,
                expected: level,
                found: self.level(),
            });
        }
        if self.parts() != parts {
            return Err(HeError::WrongParts {
                what,
                expected: parts,
                found: self.parts(),
            });
        }
        Ok(())
    }
}

impl fmt::Debug for Ciphertext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ciphertext")
            .field("level", &self.level())
            .field("parts", &self.parts())
            .finish_non_exhaustive()
    }
}
