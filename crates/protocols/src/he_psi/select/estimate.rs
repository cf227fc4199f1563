//! The cost estimate of one candidate (layout, plan and moduli): the
//! homomorphic work priced by the cost model in `cost.rs`, exact byte
//! counts, memory, and the noise model's prediction.

use super::layout::Layout;
use super::noise::{predicted_budgets, predicted_noise};
use super::outcome::CostEstimate;
use super::plans::PlanShape;
use crate::he_psi::common::cost::{QueryWork, WireSizes, OPRF_BYTES};

/// The homomorphic work of one query under a layout, plan and moduli.
fn query_work(layout: &Layout, plan: &PlanShape, moduli: &[u32]) -> QueryWork {
    QueryWork {
        n: layout.n,
        k: moduli.len().saturating_sub(1).max(1),
        indices: u64::from(layout.bundle_idx_count()),
        shards: u64::from(layout.shards),
        polys_per_index: u64::from(layout.shard_bundles) * (1 + layout.fragments as u64),
        degree: layout.degree,
        sources: plan.sources.len() as u64,
        plan: plan.work,
        leaf_groups: plan.leaf_groups.clone(),
    }
}

/// The estimate for one layout, plan and moduli list.
pub(super) fn estimate(
    layout: &Layout,
    plan: &PlanShape,
    moduli: &[u32],
    clients: u64,
) -> CostEstimate {
    let work = query_work(layout, plan, moduli);
    let sizes = WireSizes::new(layout.n, moduli, (layout.t as f64).log2());
    let noise = predicted_noise(plan, layout.n, layout.t, layout.degree);
    // Every shard computes the powers and answers its own polynomials.
    let powers = work.indices * work.shards;
    let polys = powers * work.polys_per_index;
    let queries = work.indices * work.sources;
    // Slot values per bundle: n per polynomial and coefficient or item.
    let per_coefficient = polys * u64::from(layout.n);
    let degree = u64::from(layout.degree);
    CostEstimate {
        bundle_idx_count: layout.bundle_idx_count(),
        bundles_per_index: layout.bundles,
        shards: layout.shards,
        label_fragments: layout.fragments,
        mean_bin_load: layout.load.mean,
        max_bin_load: layout.load.max,
        ct_ct_products: powers * work.chosen().products + polys * work.chosen().high_products,
        ct_pt_terms: polys * (degree + 1),
        query_ciphertexts: queries,
        result_ciphertexts: polys,
        bytes_up: queries * sizes.query_ct + sizes.relin_key + OPRF_BYTES * clients,
        bytes_down: polys * sizes.result_ct + OPRF_BYTES * clients,
        server_ms: work.server_ms(),
        leaf_groups: work.leaf_choice().is_some(),
        powers_ms: work.powers_ms(),
        polynomial_ms: work.poly_ms(),
        client_ms: work.client_ms(),
        db_bytes: per_coefficient * (2 * degree + 1) * 4,
        cache_bytes: per_coefficient * (degree + 1) * 8 * work.k as u64,
        predicted_noise_bits: noise,
        predicted_budget_bits: predicted_budgets(noise, layout.n, layout.t, moduli).1,
    }
}
