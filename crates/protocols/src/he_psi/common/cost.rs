//! What one query costs, for the parameter selection: exact wire sizes and
//! a single-thread time model of the server's and the client's work.
//!
//! The time model counts the operations `eval.rs` performs and prices each
//! with a constant measured on the reference machine (2-vCPU EPYC Zen 3,
//! fhe 0.1.1 with `tfhe-ntt`, one thread; `examples/he_ops.rs` in
//! `psikit-he` prints them). It only ranks candidates: the self-test
//! measures the chosen one, and `psikit he params` prints both.

use std::collections::HashSet;

use crate::he_psi::common::grouping::Grouping;
use crate::he_psi::common::powers::PowersPlan;

/// A ciphertext product left unrelinearized (tensor of two lifted operands
/// and the scale-down by `t/Q`) at n 4096 with 2 ciphertext moduli, in ms.
/// Measured 3.6 ms there, 9.3 ms at (8192, 3 moduli), 20.6 ms at (16384, 3)
/// and 30.9 ms at (16384, 5), which [`product_ms`] follows within 10%.
const PRODUCT_MS_4096: f64 = 3.2;
/// Relinearization, as a share of a product (measured 0.6 to 0.85).
const RELIN_SHARE: f64 = 0.7;
/// Lifting one ciphertext into the product basis, as a share of a product
/// (measured 0.27 to 0.36).
const PREPARE_SHARE: f64 = 0.33;
/// Each Paterson-Stockmeyer product summed before the one scale-down
/// (`Evaluator::sum_of_products`): its pointwise tensor, as a share of a
/// product (measured 0.01 to 0.03).
const SUMMED_PRODUCT_SHARE: f64 = 0.03;
/// One ciphertext-plaintext term of a fused dot product at n 8192, per
/// ciphertext modulus, in ms (measured 0.053 with 2 moduli, 0.083 with 3,
/// on distinct operands; a 3-part term costs about 1.5 times as much).
const TERM_MS_8192: f64 = 0.027;
/// Switch of one result to the lowest level at n 8192, per squared
/// ciphertext modulus count, in ms (measured 0.6, 1.7 and 9.1 ms at
/// (8192, 2), (8192, 3) and (16384, 5)).
const SWITCH_MS_8192: f64 = 0.2;
/// Client encryption of one query ciphertext at n 4096, per modulus plus
/// one, in ms (measured 0.74 ms with 2 moduli, 2.0 ms at n 8192, 4.6 ms at
/// n 16384 with 3).
const ENCRYPT_MS_4096: f64 = 0.3;
/// Client decryption of one result (lowest level) at n 1024, in ms
/// (measured 0.40, 0.83 and 1.3 ms at n 4096, 8192, 16384).
const DECRYPT_MS_1024: f64 = 0.1;
/// Bytes of an OPRF element each way per client item.
pub(crate) const OPRF_BYTES: u64 = 32;

/// The operations of one powers plan under one grouping (per bundle index)
/// and of the polynomials evaluated on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanWork {
    /// Ciphertext products computing the needed powers.
    pub products: u64,
    /// Of those, products relinearized (factors of later products, and all
    /// of them under Paterson-Stockmeyer).
    pub relins: u64,
    /// Distinct powers lifted into the product basis (factors, and the
    /// high powers of Paterson-Stockmeyer).
    pub prepared: u64,
    /// Powers left at 3 parts (each costs a dot product half a term more).
    pub lazy: u64,
    /// Whether each polynomial's result needs a relinearization (some
    /// power is left at 3 parts, or Paterson-Stockmeyer's outer sum).
    pub relin_result: bool,
    /// Group products per polynomial: Paterson-Stockmeyer's blocks or leaf
    /// groups (0 without groups).
    pub high_products: u64,
}

impl PlanWork {
    /// The operations `eval::Powers::compute` and `eval::evaluate` perform
    /// for `plan` under `grouping` (same rules): skipped leaves cost
    /// nothing; factors of later products are lifted once and relinearized;
    /// group multipliers and cofactors are relinearized, multipliers lifted;
    /// other products stay at 3 parts.
    pub fn new(plan: &PowersPlan, grouping: &Grouping) -> Self {
        let computed: Vec<_> = plan
            .steps()
            .iter()
            .filter(|s| !grouping.skips(s.target))
            .collect();
        let factors: HashSet<u32> = computed.iter().flat_map(|s| [s.left, s.right]).collect();
        let groups = grouping.groups();
        let lifted_multipliers = groups
            .iter()
            .filter(|g| !factors.contains(&g.multiplier))
            .count();
        let lazy = computed
            .iter()
            .filter(|s| !factors.contains(&s.target) && !grouping.needs_two_parts(s.target))
            .count();
        Self {
            products: computed.len() as u64,
            relins: (computed.len() - lazy) as u64,
            prepared: (factors.len() + lifted_multipliers) as u64,
            lazy: lazy as u64,
            relin_result: !groups.is_empty() || lazy > 0,
            high_products: groups.len() as u64,
        }
    }
}

/// One query's homomorphic work.
#[derive(Clone, Debug)]
pub(crate) struct QueryWork {
    /// Ring degree.
    pub n: u32,
    /// Ciphertext moduli at the query level.
    pub k: usize,
    /// Bundle indices (each computes the powers once per shard).
    pub indices: u64,
    /// Shards answering the query: each computes the powers of every
    /// bundle index and evaluates its own polynomials.
    pub shards: u64,
    /// Polynomials per bundle index in one shard: bundles times (1 + label
    /// fragments).
    pub polys_per_index: u64,
    /// Bin size `B`: each polynomial has `B + 1` coefficients.
    pub degree: u32,
    /// Source-power ciphertexts per bundle index.
    pub sources: u64,
    /// The plan under its own grouping (none, or Paterson-Stockmeyer's).
    pub plan: PlanWork,
    /// The plan with its leaves grouped, one entry per prefix of the
    /// groups ([`Grouping::leaf_prefixes`]): the evaluator uses whichever
    /// way the model finds cheapest for the query's polynomials per index.
    pub leaf_groups: Vec<PlanWork>,
}

impl QueryWork {
    /// Which leaf grouping (index into `leaf_groups`) answers fastest, or
    /// `None` if the plan's own way does.
    pub fn leaf_choice(&self) -> Option<usize> {
        let index_ms = |plan: &PlanWork| {
            self.powers_ms_with(plan) + self.polys_per_index as f64 * self.poly_ms_with(plan)
        };
        let own = index_ms(&self.plan);
        let best = self
            .leaf_groups
            .iter()
            .map(index_ms)
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        (best.1 < own).then_some(best.0)
    }

    /// The operations of the fastest way.
    pub fn chosen(&self) -> &PlanWork {
        match self.leaf_choice() {
            Some(i) => &self.leaf_groups[i],
            None => &self.plan,
        }
    }

    /// Powers of one bundle index, single-threaded, ms.
    pub fn powers_ms(&self) -> f64 {
        self.powers_ms_with(self.chosen())
    }

    /// One polynomial, switched to the lowest level, single-threaded, ms.
    pub fn poly_ms(&self) -> f64 {
        self.poly_ms_with(self.chosen())
    }

    fn powers_ms_with(&self, p: &PlanWork) -> f64 {
        let product = product_ms(self.n, self.k);
        product
            * (p.products as f64
                + RELIN_SHARE * p.relins as f64
                + PREPARE_SHARE * p.prepared as f64)
    }

    fn poly_ms_with(&self, p: &PlanWork) -> f64 {
        let product = product_ms(self.n, self.k);
        let terms = (f64::from(self.degree) + 1.0 + p.lazy as f64 / 2.0) * term_ms(self.n, self.k);
        let relin = if p.relin_result {
            RELIN_SHARE * product
        } else {
            0.0
        };
        let outer = if p.high_products > 0 {
            // Each inner sum lifted, its tensor summed, one scale-down.
            product * (1.0 + p.high_products as f64 * (PREPARE_SHARE + SUMMED_PRODUCT_SHARE))
        } else {
            0.0
        };
        terms + relin + outer + switch_ms(self.n, self.k)
    }

    /// Server time of the whole query, single-threaded, every shard's work
    /// added up, ms.
    pub fn server_ms(&self) -> f64 {
        (self.indices * self.shards) as f64
            * (self.powers_ms() + self.polys_per_index as f64 * self.poly_ms())
    }

    /// Client time: encrypting the query, decrypting the results, ms.
    pub fn client_ms(&self) -> f64 {
        let n = f64::from(self.n);
        let queries = (self.indices * self.sources) as f64;
        let results = (self.indices * self.shards * self.polys_per_index) as f64;
        queries * ENCRYPT_MS_4096 * n / 4096.0 * (self.k + 1) as f64
            + results * DECRYPT_MS_1024 * n / 1024.0
    }
}

fn product_ms(n: u32, k: usize) -> f64 {
    let n = f64::from(n);
    PRODUCT_MS_4096 * (n / 4096.0) * (n.log2() / 12.0) * (k as f64 / 2.0).powf(0.8)
}

fn term_ms(n: u32, k: usize) -> f64 {
    TERM_MS_8192 * f64::from(n) / 8192.0 * k as f64
}

fn switch_ms(n: u32, k: usize) -> f64 {
    SWITCH_MS_8192 * f64::from(n) / 8192.0 * (k * k) as f64
}

/// Exact wire sizes (`psikit_he::wire`) from the moduli sizes alone: the
/// generated primes have exactly the requested bits, and every residue is
/// packed in that many bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WireSizes {
    pub query_ct: u64,
    pub result_ct: u64,
    pub relin_key: u64,
}

impl WireSizes {
    pub fn new(n: u32, moduli: &[u32], t_bits: f64) -> Self {
        let n = u64::from(n);
        let ct_moduli = moduli.len().saturating_sub(1);
        let poly = |bits: u32| n * u64::from(bits) / 8;
        let query_bits: u32 = moduli[..ct_moduli].iter().sum();
        let all_bits: u32 = moduli.iter().sum();
        let seed = psikit_he::wire::SEED_LEN as u64;
        let q1 = moduli.first().copied().unwrap_or(0);
        Self {
            query_ct: seed + poly(query_bits),
            result_ct: 2 * poly(q1.saturating_sub(drop_bits_estimate(n, q1, t_bits))),
            relin_key: seed + ct_moduli as u64 * poly(all_bits),
        }
    }
}

/// `psikit_he::wire::safe_drop_bits` from bit sizes alone (`q_1` and `t`
/// taken as `2^bits`; the real count can be one lower): results are sent
/// with that many low bits rounded off.
fn drop_bits_estimate(n: u64, q1_bits: u32, t_bits: f64) -> u32 {
    let bound = f64::from(q1_bits) - 1.0 - t_bits - 4.0 - 1.0;
    let spread = (1.0 + 4.0 * (2.0 * n as f64 / 3.0).sqrt()).log2();
    (bound - spread + 1.0)
        .floor()
        .clamp(0.0, f64::from(q1_bits.saturating_sub(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_work_counts_what_the_evaluator_does() {
        // Without Paterson-Stockmeyer only factors are relinearized and
        // lifted; the rest stay at 3 parts and the result is relinearized.
        let plan = PowersPlan::new(&[1, 2, 5, 8, 11, 14, 15, 16], 0, 64).unwrap();
        let naive = PlanWork::new(&plan, &Grouping::of_plan(&plan));
        assert!(naive.lazy > 0);
        assert_eq!(naive.relins + naive.lazy, naive.products);
        assert!(naive.relin_result && naive.high_products == 0);
        // Grouped leaves are not computed; what is computed is relinearized.
        let leaves = Grouping::leaves(&plan).unwrap();
        let grouped = PlanWork::new(&plan, &leaves);
        assert_eq!(grouped.products, naive.relins);
        assert_eq!((grouped.lazy, grouped.relins), (0, grouped.products));
        assert_eq!(grouped.high_products, leaves.groups().len() as u64);
        // With it every power is relinearized, and the high powers y^27,
        // y^54, ... are lifted even when no product uses them as factors.
        let plan = PowersPlan::new(&[1, 5, 8, 27, 81], 26, 256).unwrap();
        let ps = PlanWork::new(&plan, &Grouping::of_plan(&plan));
        assert_eq!((ps.lazy, ps.relins), (0, ps.products));
        assert_eq!(ps.high_products, 256 / 27);
        let factors: HashSet<u32> = plan
            .steps()
            .iter()
            .flat_map(|s| [s.left, s.right])
            .collect();
        assert!(ps.prepared > factors.len() as u64);
    }
}
