//! What a selection or a description gives back: the cost estimate of a
//! parameter set under a workload, the chosen set with its reasons, and the
//! report on a given set.

use super::self_test::SelfTest;
use crate::he_psi::params::PsiParams;

/// Estimated costs of one query under a parameter set and workload.
///
/// Server time is a model (single thread, measured constants for fhe 0.1.1
/// on this machine); byte counts are exact for the given bundle count.
#[derive(Clone, Debug, PartialEq)]
pub struct CostEstimate {
    /// Bundle indices: ciphertexts per source power.
    pub bundle_idx_count: u32,
    /// Bin bundles per bundle index `α`, estimated from the server size,
    /// summed over the shards.
    pub bundles_per_index: u32,
    /// Shards the database is split into (each computes the query's powers
    /// and answers its own bundles).
    pub shards: u32,
    /// Label fragments `c` per item.
    pub label_fragments: usize,
    /// Mean server items per bin of one shard, `h·N/(S·T)`.
    pub mean_bin_load: f64,
    /// Bin load that all `S·T` bins stay under with probability 99%.
    pub max_bin_load: u32,
    /// Ciphertext products per query (powers plan, Paterson-Stockmeyer).
    pub ct_ct_products: u64,
    /// Ciphertext-plaintext terms per query.
    pub ct_pt_terms: u64,
    /// Source-power ciphertexts the client sends.
    pub query_ciphertexts: u64,
    /// Result ciphertexts the server sends: `idx·α·(1+c)`.
    pub result_ciphertexts: u64,
    /// Client to server: query ciphertexts, relinearization key, OPRF.
    pub bytes_up: u64,
    /// Server to client: result ciphertexts, OPRF.
    pub bytes_down: u64,
    /// Estimated single-thread server time per query, milliseconds (the
    /// work of every shard added up).
    pub server_ms: f64,
    /// Whether the model has the server group the plan's leaves
    /// (`Grouping::leaves`) for this query.
    pub leaf_groups: bool,
    /// Of which: the powers of one bundle index.
    pub powers_ms: f64,
    /// Of which: one polynomial, switched to the lowest level.
    pub polynomial_ms: f64,
    /// Estimated client time: encrypting the query, decrypting the results.
    pub client_ms: f64,
    /// Sender database in memory (items, label felts and coefficients as
    /// 32-bit words), every shard's together.
    pub db_bytes: u64,
    /// Extra memory of the NTT plaintext cache.
    pub cache_bytes: u64,
    /// Noise model: bits of noise after the evaluation, at the query level.
    pub predicted_noise_bits: f64,
    /// Noise model: budget left after the switch to the lowest level.
    pub predicted_budget_bits: f64,
}

/// An automatic choice of parameters with its justification.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The parameters, valid and within the 128-bit bound.
    pub params: PsiParams,
    /// One line per choice, with its reason.
    pub explanation: Vec<String>,
    /// Costs for the input workload.
    pub estimate: CostEstimate,
    /// log2 FPP of a full query (`T` items) with the estimated bundle count.
    pub fpp_log2: f64,
    /// The confirming self-test.
    pub self_test: SelfTest,
}

/// What psikit can tell about a given parameter set under a workload.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters described.
    pub params: PsiParams,
    /// The workload the estimates are for.
    pub server_items: u64,
    /// Client items per query.
    pub client_items: u64,
    /// Longest label.
    pub label_bytes: usize,
    /// The 128-bit security check (`Err` holds the reason).
    pub security: Result<(), String>,
    /// log2 FPP of a full query (`T` items).
    pub fpp_log2_full: f64,
    /// log2 FPP of a query of `client_items` items.
    pub fpp_log2_client: f64,
    /// Depth of the powers plan (ciphertext products in sequence).
    pub plan_depth: u32,
    /// Products of the powers plan per bundle index.
    pub plan_products: usize,
    /// Cost estimates.
    pub estimate: CostEstimate,
    /// The self-test, if one was asked for (`Err` holds why it could not
    /// run).
    pub self_test: Option<Result<SelfTest, String>>,
}
