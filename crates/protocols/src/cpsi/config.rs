//! How a party runs circuit PSI ([`CpsiConfig`]) on what ([`Input`]), and
//! the refusal of a configuration or input the protocol cannot run.

use psikit_ot::ExtConfig;

use super::vocabulary::{Agreed, App, Epc, OtKind, Reveal, MAX_VALUE_COLUMNS};
use crate::common::statistical;
use crate::error::Error;

/// How to run circuit PSI.
#[derive(Clone, Debug)]
pub struct CpsiConfig {
    pub app: App,
    /// Which OT extension feeds the equality test (default silent).
    pub ot: OtKind,
    /// Equality-preserving compression (default automatic).
    pub epc: Epc,
    /// Who learns the result (default: the receiver; for the union, which
    /// only the sender can learn, the sender).
    pub reveal: Reveal,
    /// Sums only: reveal the sums only if the intersection has at least
    /// this many items (both parties then learn whether it has; 0: no
    /// bound). Sums over a handful of items would expose single values.
    pub min_intersection: u64,
    /// Sums only: also reveal the inner product `Σ x·y` over the
    /// intersection of the sender's first value column `x` and the
    /// receiver's first `y`, with `y < 2^product_bits` (1 to 64; 0: no
    /// inner product). It costs `product_bits` OTs and about
    /// `6.5·product_bits` bytes per bin.
    pub product_bits: u8,
    /// Largest peer set accepted.
    pub max_set_size: u64,
    /// Threads for the parallel parts; `None` uses rayon's global pool.
    pub threads: Option<usize>,
    /// This party's key encoding (`psikit_io::KeySpec::key_format`), or
    /// empty to skip the check.
    pub key_format: String,
    /// Statistical security σ of this run (`common::statistical`): the
    /// tags' length, the flooding of EPC's replies and the failure bounds
    /// of the cuckoo table and the OKVS. Both parties must use the same; a
    /// bucketed job sets it from its bucket count.
    pub statistical_bits: u32,
}

impl CpsiConfig {
    /// A configuration for `app` with the defaults.
    pub fn new(app: App) -> Self {
        Self {
            app,
            ot: OtKind::Silent,
            epc: Epc::Auto,
            reveal: Reveal::only(app.learner()),
            min_intersection: 0,
            product_bits: 0,
            max_set_size: 1 << 26,
            threads: None,
            key_format: String::new(),
            statistical_bits: statistical::STATISTICAL_BITS,
        }
    }

    /// The terms the hellos compare.
    pub(crate) fn agreed(&self) -> Agreed {
        Agreed {
            app: self.app,
            ot: self.ot,
            epc: self.epc,
            reveal: self.reveal,
            min_intersection: self.min_intersection,
            product_bits: self.product_bits,
        }
    }

    pub(crate) fn ext_config(&self) -> Result<ExtConfig, Error> {
        match self.threads {
            None => Ok(ExtConfig::default()),
            Some(t) => ExtConfig::with_threads(t).map_err(|e| Error::Config(e.to_string())),
        }
    }

    /// The first key whose value in the receiver's first column `values`
    /// does not fit the inner product's bits (the product takes it bit by
    /// bit), if any: front ends name its row before connecting, the
    /// receiver refuses to run with it.
    pub fn oversized_factor(&self, values: &[Vec<u64>]) -> Option<usize> {
        let bits = self.product_bits;
        let ys = values.first().filter(|_| (1..64).contains(&bits))?;
        ys.iter().position(|&y| y >> bits != 0)
    }
}

/// A party's input: distinct keys (front ends merge rows with the same
/// key; repeated keys would be counted twice) and, for sums, value
/// columns of one value per key (at most [`MAX_VALUE_COLUMNS`]).
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub keys: &'a [Vec<u8>],
    pub values: &'a [Vec<u64>],
}

/// The union's items in a job's bucket, at the provider: the payload each
/// real item reveals (its encoded key, where the item is its hash), the
/// items past them padding whose slots never open, and one slot width for
/// every bucket of the job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UnionItems<'a> {
    pub payloads: &'a [Vec<u8>],
    pub width: usize,
}

/// Refuses a configuration or input the protocol cannot run (the
/// library's own guard: front ends check their users' choices first,
/// through [`super::Choices`]).
pub(super) fn check_config(cfg: &CpsiConfig, input: &Input<'_>) -> Result<(), Error> {
    let bad = |why: String| Err(Error::Config(why));
    statistical::check(cfg.statistical_bits)?;
    if input.values.len() > MAX_VALUE_COLUMNS {
        return bad(format!(
            "at most {MAX_VALUE_COLUMNS} value columns, not {}",
            input.values.len()
        ));
    }
    if let Some(v) = input.values.iter().find(|v| v.len() != input.keys.len()) {
        return bad(format!("{} values for {} keys", v.len(), input.keys.len()));
    }
    if !input.values.is_empty() && cfg.app != App::Sum && cfg.app != App::Shares {
        return bad(format!(
            "the {} application takes no values",
            cfg.app.name()
        ));
    }
    for (what, bound) in [
        ("threshold", cfg.app.threshold()),
        ("minimum intersection", cfg.min_intersection),
    ] {
        if bound > 1 << 40 {
            return bad(format!(
                "a {what} of {bound} is above any set psikit accepts"
            ));
        }
    }
    if cfg.min_intersection > 0 && cfg.app != App::Sum {
        return bad("a minimum intersection applies to sums only".into());
    }
    if cfg.product_bits > 0 && (cfg.app != App::Sum || input.values.is_empty()) {
        return bad("an inner product needs the sum application and a value column".into());
    }
    if cfg.product_bits > 64 {
        return bad(format!("product bits: 1 to 64, not {}", cfg.product_bits));
    }
    if cfg.app == App::Union && cfg.reveal != Reveal::Sender {
        return bad(
            "the union is revealed to the sender (the party holding the simple table) alone".into(),
        );
    }
    Ok(())
}
