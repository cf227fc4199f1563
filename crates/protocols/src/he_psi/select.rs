//! Choosing HE PSI parameters, and proving a parameter set works (design
//! note section 3, "Automatic selection"; paper section 3.1 and appendix A).
//!
//! * [`self_test`] runs the server's evaluation on encrypted random data in
//!   the worst case the parameters allow and checks every slot after
//!   decryption. Noise is the one thing the parameters cannot be checked for
//!   on paper: APSI's own files sit within a few bits of failure under fhe.
//! * [`select`] searches degrees, plaintext moduli, bin sizes, source powers
//!   and Paterson-Stockmeyer splits for a workload, sizes the coefficient
//!   moduli with a noise model, ranks the candidates with a cost model, and
//!   confirms the winner with [`self_test`] (widening the moduli if the test
//!   leaves less margin than the model promised).
//! * [`describe`] reports the same figures for a given parameter set, such
//!   as one of APSI's files.
//!
//! Both models are calibrated on this machine with fhe 0.1.1 and psikit's
//! ternary keys (numbers next to the constants); they only steer the
//! search. The self-test is what decides.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use psikit_he::{CompactPoly, Evaluator, HeParams, PlainPoly, RelinKey, SecretKey};
use rand::Rng;

use super::cost::{PlanWork, QueryWork, WireSizes, OPRF_BYTES};
use super::eval::{evaluate, Powers};
use super::label;
use super::params::{batching_prime, ItemParams, PsiParams, QueryParams, SealParams, TableParams};
use super::poly::Field;
use super::powers::{Grouping, PowersPlan};
use crate::Error;

/// The false-positive bound the paper targets: 2^-40 per query.
pub const DEFAULT_MAX_FPP_LOG2: f64 = -40.0;
/// Noise budget, in bits, that a parameter set must keep in the worst case.
/// Four bits is a factor 16 on the noise: room for unlucky keys and inputs
/// beyond the runs a self-test can afford.
pub const NOISE_MARGIN_BITS: i64 = 4;
/// Self-test runs [`select`] performs on its choice.
pub const SELECT_SELF_TEST_RUNS: usize = 2;

// ---------------------------------------------------------------------------
// Self-test
// ---------------------------------------------------------------------------

/// What the encrypted worst-case evaluation measured, over several runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfTest {
    /// Every slot of every run decrypted to the plaintext evaluation.
    pub correct: bool,
    /// Smallest noise budget left in any run, in bits: the smaller of the
    /// two budgets below. Below 0 a wrong decryption is possible.
    pub min_budget_bits: i64,
    /// Smallest budget at the query level, right after the evaluation.
    pub min_budget_query_level: i64,
    /// Smallest budget after the switch to the lowest level (what the client
    /// decrypts).
    pub min_budget_lowest_level: i64,
    /// Runs performed.
    pub runs: usize,
    /// Wall time of the whole test, key generation and encoding included.
    pub elapsed: Duration,
    /// Fastest `Powers::compute` for one bundle index (uses every core).
    pub powers_time: Duration,
    /// Fastest evaluation of one polynomial on the powers, with the switch
    /// of its result to the lowest level.
    pub evaluate_time: Duration,
    /// The same two times with the plan's leaves grouped, if it has leaves
    /// (those runs count for `correct` and the budgets too).
    pub leaf_group_times: Option<(Duration, Duration)>,
}

impl SelfTest {
    /// Correct in every run, with at least [`NOISE_MARGIN_BITS`] to spare.
    pub fn passed(&self) -> bool {
        self.correct && self.min_budget_bits >= NOISE_MARGIN_BITS
    }
}

/// Runs the encrypted worst-case check `runs` times (at least once).
///
/// Each run uses a fresh ternary key pair, a random slot vector `y`, the
/// plan's source powers `y^s` encrypted as a client encrypts them, every
/// needed power computed as the server computes it, and a dense random
/// polynomial of the full degree `B` in every slot: random coefficients are
/// as large as coefficients get and `B` is the largest degree a bin bundle
/// reaches (label polynomials have degree `B - 1`), so this is the noise
/// worst case. The result is switched to the lowest level, decrypted and
/// compared slot by slot with the same evaluation in the clear.
///
/// A parameter set whose moduli cannot hold the noise returns
/// `correct == false` (or a budget below 0); one that breaks the security
/// bound or APSI's rules returns an error.
pub fn self_test(params: &PsiParams, runs: usize) -> Result<SelfTest, Error> {
    params.validate()?;
    let he = params.he_params()?;
    let plan = PowersPlan::from_params(params)?;
    let own = Grouping::of_plan(&plan);
    let leaves = Grouping::leaves(&plan);
    let started = Instant::now();
    let (mut total, mut grouped) = (RunOutcome::neutral(), RunOutcome::neutral());
    for _ in 0..runs.max(1) {
        total.merge(one_run(params, &he, &plan, &own)?);
        if let Some(leaves) = &leaves {
            grouped.merge(one_run(params, &he, &plan, leaves)?);
        }
    }
    let budget_query = total.budget_query.min(grouped.budget_query);
    let budget_lowest = total.budget_lowest.min(grouped.budget_lowest);
    Ok(SelfTest {
        correct: total.correct && grouped.correct,
        min_budget_bits: budget_query.min(budget_lowest),
        min_budget_query_level: budget_query,
        min_budget_lowest_level: budget_lowest,
        runs: runs.max(1),
        elapsed: started.elapsed(),
        powers_time: total.powers_time,
        evaluate_time: total.evaluate_time,
        leaf_group_times: leaves.map(|_| (grouped.powers_time, grouped.evaluate_time)),
    })
}

/// One run's measurements. Runs merge into the worst budgets and the
/// fastest times (the least disturbed by other load).
struct RunOutcome {
    correct: bool,
    budget_query: i64,
    budget_lowest: i64,
    powers_time: Duration,
    evaluate_time: Duration,
}

impl RunOutcome {
    fn neutral() -> Self {
        Self {
            correct: true,
            budget_query: i64::MAX,
            budget_lowest: i64::MAX,
            powers_time: Duration::MAX,
            evaluate_time: Duration::MAX,
        }
    }

    fn merge(&mut self, run: RunOutcome) {
        self.correct &= run.correct;
        self.budget_query = self.budget_query.min(run.budget_query);
        self.budget_lowest = self.budget_lowest.min(run.budget_lowest);
        self.powers_time = self.powers_time.min(run.powers_time);
        self.evaluate_time = self.evaluate_time.min(run.evaluate_time);
    }
}

/// The random inputs of one run: `y` per slot and `coeffs[j][slot]`, the
/// coefficient of `y^j` of that slot's polynomial.
struct RunInputs {
    y: Vec<u64>,
    coeffs: Vec<Vec<u64>>,
}

impl RunInputs {
    fn random(field: &Field, slots: usize, degree: usize) -> Self {
        let mut rng = rand::thread_rng();
        let mut random_slots = || -> Vec<u64> {
            (0..slots)
                .map(|_| rng.gen_range(0..field.modulus()))
                .collect()
        };
        let y = random_slots();
        let coeffs = (0..=degree).map(|_| random_slots()).collect();
        Self { y, coeffs }
    }

    /// The plaintext evaluation in one slot.
    fn expected(&self, field: &Field, slot: usize) -> u64 {
        let column: Vec<u64> = self.coeffs.iter().map(|c| c[slot]).collect();
        field.eval(&column, self.y[slot])
    }
}

fn one_run(
    params: &PsiParams,
    he: &HeParams,
    plan: &PowersPlan,
    grouping: &Grouping,
) -> Result<RunOutcome, Error> {
    let field = Field::new(params.seal.plain_modulus);
    let degree = params.table.max_items_per_bin as usize;
    let inputs = RunInputs::random(&field, he.slot_count(), degree);
    let plain: Vec<PlainPoly> = inputs
        .coeffs
        .iter()
        .map(|slots| CompactPoly::from_slots(he, slots)?.to_plain(he))
        .collect::<Result<_, _>>()?;

    let sk = SecretKey::generate(he)?;
    let ev = Evaluator::new(he, &RelinKey::generate(&sk)?)?;
    let sources = plan
        .sources()
        .iter()
        .map(|&s| {
            let powers: Vec<u64> = inputs
                .y
                .iter()
                .map(|&v| field.pow(v, u64::from(s)))
                .collect();
            sk.encrypt_slots(&powers)
        })
        .collect::<Result<Vec<_>, _>>()?;

    let clock = Instant::now();
    let powers = Powers::compute(&ev, plan, grouping, sources)?;
    let powers_time = clock.elapsed();
    let refs: Vec<&PlainPoly> = plain.iter().collect();
    let clock = Instant::now();
    let mut result = evaluate(&ev, &powers, &refs, grouping)?;
    let mut evaluate_time = clock.elapsed();

    let budget_query = sk.noise_budget_bits(&result)?;
    let clock = Instant::now();
    ev.to_lowest(&mut result)?;
    evaluate_time += clock.elapsed();
    let budget_lowest = sk.noise_budget_bits(&result)?;
    let decrypted = sk.decrypt_slots(&result)?;
    let correct = decrypted
        .iter()
        .enumerate()
        .all(|(slot, &got)| inputs.expected(&field, slot) == got);
    Ok(RunOutcome {
        correct,
        budget_query,
        budget_lowest,
        powers_time,
        evaluate_time,
    })
}

// ---------------------------------------------------------------------------
// Public selection types
// ---------------------------------------------------------------------------

/// What the selection optimizes: the estimated latency of one query
/// (server and client time plus transfer) on a fast, a slow or a given
/// link.
///
/// Pricing bytes as transfer time keeps every goal sensible: pure server
/// time would always prefer the smallest bins and dozens of result
/// ciphertexts, pure byte counts any depth to save one ciphertext. A larger
/// price per byte can only lower the byte count of the best candidate, so
/// `Comm` sends no more than `Time` (unless a self-test rejects one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// Latency with bytes at [`TIME_LINK_MBPS`] (100 Mbit/s).
    Time,
    /// Latency with bytes at [`COMM_LINK_MBPS`] (10 Mbit/s).
    Comm,
    /// Latency with bytes at this many Mbit/s (the user's own link).
    Link(f64),
}

/// Link speed the `Time` goal prices bytes at, in Mbit/s (a typical
/// wide-area link; at 1 Gbit/s the selection buys small speed-ups with many
/// megabytes of results).
pub const TIME_LINK_MBPS: f64 = 100.0;
/// Link speed the `Comm` goal prices bytes at, in Mbit/s.
pub const COMM_LINK_MBPS: f64 = 10.0;

impl Goal {
    /// The link speed bytes are priced at, in Mbit/s.
    pub fn link_mbps(self) -> f64 {
        match self {
            Goal::Time => TIME_LINK_MBPS,
            Goal::Comm => COMM_LINK_MBPS,
            Goal::Link(mbps) => mbps,
        }
    }

    /// The estimated query latency this goal minimizes, in ms.
    pub fn latency_ms(self, e: &CostEstimate) -> f64 {
        // 1 Mbit/s carries 125 bytes per ms.
        let bytes_per_ms = self.link_mbps() * 125.0;
        e.server_ms + e.client_ms + (e.bytes_up + e.bytes_down) as f64 / bytes_per_ms
    }
}

/// The workload parameters are chosen for.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectionInput {
    /// Items the server will hold, growth included: the bin bundles per
    /// bundle index, and with them FPP and response size, grow with it.
    pub server_items: u64,
    /// Items a client typically queries at once.
    pub client_items: u64,
    /// Longest label in bytes (0: unlabeled).
    pub label_bytes: usize,
    /// What to optimize.
    pub goal: Goal,
    /// Largest acceptable log2 false-positive probability per query.
    pub max_fpp_log2: f64,
}

impl SelectionInput {
    /// A time-optimized selection with the paper's 2^-40 FPP bound.
    pub fn new(server_items: u64, client_items: u64, label_bytes: usize) -> Self {
        Self {
            server_items,
            client_items,
            label_bytes,
            goal: Goal::Time,
            max_fpp_log2: DEFAULT_MAX_FPP_LOG2,
        }
    }
}

/// Estimated costs of one query under a parameter set and workload.
///
/// Server time is a model (single thread, measured constants for fhe 0.1.1
/// on this machine); byte counts are exact for the given bundle count.
#[derive(Clone, Debug, PartialEq)]
pub struct CostEstimate {
    /// Bundle indices: ciphertexts per source power.
    pub bundle_idx_count: u32,
    /// Bin bundles per bundle index `α`, estimated from the server size.
    pub bundles_per_index: u32,
    /// Label fragments `c` per item.
    pub label_fragments: usize,
    /// Mean server items per bin, `h·N/T`.
    pub mean_bin_load: f64,
    /// Bin load that all `T` bins stay under with probability 99%.
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
    /// Estimated single-thread server time per query, milliseconds.
    pub server_ms: f64,
    /// Whether the model has the server group the plan's leaves
    /// ([`super::powers::Grouping::leaves`]) for this query.
    pub leaf_groups: bool,
    /// Of which: the powers of one bundle index.
    pub powers_ms: f64,
    /// Of which: one polynomial, switched to the lowest level.
    pub polynomial_ms: f64,
    /// Estimated client time: encrypting the query, decrypting the results.
    pub client_ms: f64,
    /// Sender database in memory (items, label felts and coefficients as
    /// 32-bit words).
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

// ---------------------------------------------------------------------------
// Noise model
// ---------------------------------------------------------------------------

/// Noise growth per level of ciphertext products, on top of `log2 t +
/// log2 n`. Measured: +28 to +29 bits at (n 4096, t 17 bits), +29.5 at
/// (8192, 17), +32 to +33 at (8192, 20), +36 to +37 at (8192 and 16384,
/// 24): `log2 t + log2 n - 1` give or take a bit; -0.5 keeps it on the safe
/// side.
const MUL_GROWTH_OFFSET: f64 = -0.5;
/// Noise of a fresh ciphertext times a centered plaintext, on top of
/// `log2 t + log2(n)/2`: measured 25.2 to 34 bits for t of 17 to 24 bits,
/// i.e. +2.0 to +3.0.
const PLAIN_GROWTH_OFFSET: f64 = 3.0;
/// Noise of a fresh encryption (PS high powers that are sources).
const FRESH_NOISE_BITS: f64 = 4.5;
/// Noise left by the switch to the lowest level, on top of `log2(n)/2`:
/// measured 6 to 9 bits.
const SWITCH_FLOOR_OFFSET: f64 = 2.0;
/// Largest coefficient modulus: APSI's (SEAL's) limit.
const MAX_MODULUS_BITS: u32 = 60;
/// Smallest modulus of any kind, the special prime included: keeps every
/// prime apart from the batching `t` (at most 24 bits here; an equal-sized
/// prime could be `t` itself, which fhe refuses).
const MIN_MODULUS_BITS: u32 = 25;
/// How far the special prime may be below the largest ciphertext modulus.
/// Key-switching noise is about `qmax/P · n·σ`, which stays below a
/// product's own noise (`≥ t·n·2^4`) while `qmax/P ≤ 2^16`; APSI's
/// `[40, 40, 24]` sits at 2^16 and measures as expected.
const SPECIAL_PRIME_GAP: u32 = 16;

fn log2(x: f64) -> f64 {
    x.log2()
}

/// Growth of one level of products.
fn mul_growth(n: u32, t: u64) -> f64 {
    log2(t as f64) + log2(f64::from(n)) + MUL_GROWTH_OFFSET
}

/// Noise after a plaintext product of a fresh ciphertext.
fn plain_base(n: u32, t: u64) -> f64 {
    log2(t as f64) + log2(f64::from(n)) / 2.0 + PLAIN_GROWTH_OFFSET
}

/// Predicted noise bits of one evaluated polynomial at the query level.
///
/// Without Paterson-Stockmeyer: a dot product of the `B + 1` powers (depth
/// up to `D`) with plaintexts; sums of `m` terms add about `log2(m)/2`.
/// With it: the inner dot products over the low powers, each times a high
/// power, summed; a product's noise is the larger input's plus one level
/// (measured within 3.5 bits of this model at `[1,5,8,27,135]`, L 26).
fn predicted_noise(plan: &PlanShape, n: u32, t: u64, degree: u32) -> f64 {
    let g = mul_growth(n, t);
    if plan.low == 0 {
        let terms = f64::from(degree) + 1.0;
        return plain_base(n, t) + f64::from(plan.depth_low) * g + log2(terms) / 2.0;
    }
    let inner =
        plain_base(n, t) + f64::from(plan.depth_low) * g + log2(f64::from(plan.low) + 1.0) / 2.0;
    let high = FRESH_NOISE_BITS + f64::from(plan.depth_high) * g;
    let products = plan.work.high_products.max(1) as f64;
    inner.max(high) + g + log2(products) / 2.0
}

/// Noise bits after the switch to the lowest level: the query-level noise
/// scaled down by the dropped moduli, plus the rounding floor.
fn lowest_noise(noise: f64, n: u32, dropped_bits: f64) -> f64 {
    let floor = log2(f64::from(n)) / 2.0 + SWITCH_FLOOR_OFFSET;
    log2((noise - dropped_bits).exp2() + floor.exp2())
}

/// Predicted budgets (query level, lowest level) for these moduli.
fn predicted_budgets(noise: f64, n: u32, t: u64, moduli: &[u32]) -> (f64, f64) {
    let (q, _) = moduli.split_at(moduli.len().saturating_sub(1));
    let q_bits = f64::from(q.iter().sum::<u32>());
    let q1 = f64::from(q.first().copied().unwrap_or(0));
    let t_bits = log2(t as f64);
    let query = q_bits - t_bits - 1.0 - noise;
    let lowest = q1 - t_bits - 1.0 - lowest_noise(noise, n, q_bits - q1);
    (query, lowest)
}

/// The smallest coefficient moduli (special prime last) that keep
/// [`NOISE_MARGIN_BITS`] of predicted budget at both levels, or `None` if
/// that exceeds the 128-bit bound at this degree.
///
/// Fewest ciphertext moduli first (each costs time in every operation),
/// sizes spread evenly, then the first one raised bit by bit until the
/// budget after the switch (which adds the rounding floor) also holds.
fn moduli_for(noise: f64, n: u32, t: u64) -> Option<Vec<u32>> {
    let margin = NOISE_MARGIN_BITS as f64;
    let need_total = (noise + log2(t as f64) + 1.0 + margin).ceil() as u32;
    let count = need_total.div_ceil(MAX_MODULUS_BITS).max(1);
    let first = need_total.div_ceil(count);
    let rest = if count > 1 {
        need_total.saturating_sub(first).div_ceil(count - 1)
    } else {
        0
    };
    let mut moduli = vec![rest.max(MIN_MODULUS_BITS); count as usize];
    moduli[0] = first;
    loop {
        let candidate = finish_moduli(moduli.clone(), n)?;
        let (query, lowest) = predicted_budgets(noise, n, t, &candidate);
        if query >= margin && lowest >= margin {
            return Some(candidate);
        }
        moduli[0] += 1;
    }
}

/// Appends the special prime and checks sizes against fhe's, APSI's and
/// the security bound.
fn finish_moduli(mut moduli: Vec<u32>, n: u32) -> Option<Vec<u32>> {
    let largest = moduli.iter().copied().max()?;
    if largest > MAX_MODULUS_BITS {
        return None;
    }
    moduli.push(
        largest
            .saturating_sub(SPECIAL_PRIME_GAP)
            .max(MIN_MODULUS_BITS),
    );
    let total: u32 = moduli.iter().sum();
    let cap = psikit_he::security::max_bits_128(n as usize)?;
    (total as usize <= cap).then_some(moduli)
}

/// Wider moduli after a self-test left less than the margin: the deficit
/// goes to the ciphertext moduli (smallest first) when the query-level
/// budget was short, to the first modulus when only the switch floor was.
fn widen(moduli: &[u32], test: &SelfTest, n: u32) -> Option<Vec<u32>> {
    let mut q: Vec<u32> = moduli[..moduli.len().checked_sub(1)?].to_vec();
    let short = |budget: i64| (NOISE_MARGIN_BITS - budget).max(0) as u32;
    let deficit = if test.correct {
        short(test.min_budget_query_level)
    } else {
        short(test.min_budget_query_level).max(NOISE_MARGIN_BITS as u32)
    };
    let floor_deficit = short(test.min_budget_lowest_level);
    if deficit == 0 && floor_deficit == 0 {
        return None;
    }
    for _ in 0..deficit {
        let smallest = (0..q.len()).min_by_key(|&i| q[i])?;
        q[smallest] += 1;
    }
    if deficit == 0 {
        q[0] += floor_deficit;
    }
    finish_moduli(q, n)
}

// ---------------------------------------------------------------------------
// Cost model (the model itself is in `cost.rs`)
// ---------------------------------------------------------------------------

/// The homomorphic work of one query under a layout, plan and moduli.
fn query_work(layout: &Layout, plan: &PlanShape, moduli: &[u32]) -> QueryWork {
    QueryWork {
        n: layout.n,
        k: moduli.len().saturating_sub(1).max(1),
        indices: u64::from(layout.bundle_idx_count()),
        polys_per_index: u64::from(layout.bundles) * (1 + layout.fragments as u64),
        degree: layout.degree,
        sources: plan.sources.len() as u64,
        plan: plan.work,
        leaf_groups: plan.leaf_groups.clone(),
    }
}

/// The estimate for one layout, plan and moduli list.
fn estimate(layout: &Layout, plan: &PlanShape, moduli: &[u32], clients: u64) -> CostEstimate {
    let work = query_work(layout, plan, moduli);
    let sizes = WireSizes::new(layout.n, moduli, (layout.t as f64).log2());
    let noise = predicted_noise(plan, layout.n, layout.t, layout.degree);
    let polys = work.indices * work.polys_per_index;
    let queries = work.indices * work.sources;
    // Slot values per bundle: n per polynomial and coefficient or item.
    let per_coefficient = polys * u64::from(layout.n);
    let degree = u64::from(layout.degree);
    CostEstimate {
        bundle_idx_count: layout.bundle_idx_count(),
        bundles_per_index: layout.bundles,
        label_fragments: layout.fragments,
        mean_bin_load: layout.load.mean,
        max_bin_load: layout.load.max,
        ct_ct_products: work.indices * work.chosen().products + polys * work.chosen().high_products,
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

// ---------------------------------------------------------------------------
// Bin loads and layouts
// ---------------------------------------------------------------------------

/// Probability, over all bins together, that the server's items exceed the
/// budgeted bin load: the price is one more bin bundle somewhere (time,
/// bytes, slightly worse FPP), never correctness.
const OVERFLOW_PROBABILITY: f64 = 0.01;
/// Most bin bundles per bundle index the search considers: beyond this the
/// response is dozens of ciphertexts per bundle index and a larger `B` is
/// always cheaper.
const MAX_BUNDLES_PER_INDEX: u32 = 64;
/// Expected colliding pairs among the client's items, as a share of a
/// bundle's bins, below which one hash function is used (a collision costs
/// the client a second query).
const SINGLE_HASH_COLLISIONS: f64 = 0.01;
/// Client items per cuckoo bin with three hash functions.
const CUCKOO_LOAD: f64 = 0.5;

/// Server items per bin.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Load {
    mean: f64,
    max: u32,
}

/// Loads when `items` go into `hashes` bins each out of `bins`.
///
/// A bin's load is binomial, close to Poisson with mean `λ = h·N/T`; the
/// budget is the smallest `L` with `T · P(X > L) <= 1%`.
fn bin_load(items: u64, hashes: u32, bins: u32) -> Load {
    let mean = items as f64 * f64::from(hashes) / f64::from(bins.max(1));
    let per_bin = OVERFLOW_PROBABILITY / f64::from(bins.max(1));
    Load {
        mean,
        max: poisson_quantile(mean, per_bin).max(1),
    }
}

/// Smallest `L >= mean` with `P(Poisson(mean) > L) <= p`.
///
/// Uses the bound `P(X > L) <= pmf(L+1) / (1 - mean/(L+2))` (above the
/// mean, successive terms shrink at least geometrically), which decreases
/// in `L`, so a doubling then a bisection find `L` in logarithmic time even
/// for huge means.
fn poisson_quantile(mean: f64, p: f64) -> u32 {
    if mean <= 0.0 {
        return 0;
    }
    let log_p = p.ln();
    let below = |l: f64| {
        let k = l + 1.0;
        let ratio = mean / (k + 1.0);
        ratio < 1.0 && -mean + k * mean.ln() - ln_factorial(k) - (1.0 - ratio).ln() <= log_p
    };
    let mut lo = mean.floor();
    let mut step = 1.0;
    while !below(lo + step) {
        lo += step;
        step *= 2.0;
    }
    let mut hi = lo + step;
    while hi - lo > 1.0 {
        let mid = ((lo + hi) / 2.0).floor();
        if below(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let l = if below(lo) { lo } else { hi };
    l.min(f64::from(u32::MAX)) as u32
}

/// `ln(k!)`: exact for small `k`, Stirling's series (error below 1e-10)
/// above.
fn ln_factorial(k: f64) -> f64 {
    if k < 20.0 {
        return (2..=k as u64).map(|i| (i as f64).ln()).sum();
    }
    k * k.ln() - k + 0.5 * (2.0 * std::f64::consts::PI * k).ln() + 1.0 / (12.0 * k)
        - 1.0 / (360.0 * k.powi(3))
}

/// Bin bundles per bundle index for a budgeted load.
///
/// Unlabeled: `ceil(L / B)`. Labeled, an item may not join a bundle where
/// one of its `f` felts already sits in the same slot (design note step 7);
/// with up to `B` values among `t` per slot that happens with probability
/// about `f·B/t` per try and pushes items to later bundles, counted here as
/// that much extra load.
fn bundles_per_index(max_load: u32, degree: u32, labeled: bool, f: u32, t: u64) -> u32 {
    let mut load = f64::from(max_load);
    if labeled {
        load *= 1.0 + f64::from(f) * f64::from(degree) / t as f64;
    }
    ((load / f64::from(degree)).ceil() as u32).max(1)
}

/// Table, item and bin choices for one candidate, short of the plan and
/// moduli.
#[derive(Clone, Debug)]
struct Layout {
    n: u32,
    t: u64,
    f: u32,
    hashes: u32,
    table_size: u32,
    degree: u32,
    load: Load,
    bundles: u32,
    fragments: usize,
}

impl Layout {
    fn new(input: &SelectionInput, n: u32, t: u64, f: u32, degree: u32) -> Self {
        let bins = n / f;
        let hashes = hash_count(input.client_items, bins);
        let table_size = table_size(input.client_items, hashes, bins);
        let load = bin_load(input.server_items.max(1), hashes, table_size);
        let labeled = input.label_bytes > 0;
        Self {
            n,
            t,
            f,
            hashes,
            table_size,
            degree,
            load,
            bundles: bundles_per_index(load.max, degree, labeled, f, t),
            fragments: fragments(input.label_bytes, f * t.ilog2()),
        }
    }

    fn bundle_idx_count(&self) -> u32 {
        self.table_size / (self.n / self.f)
    }

    /// The parameters of this layout with a plan and moduli.
    fn params(&self, plan: &PlanShape, moduli: &[u32]) -> PsiParams {
        PsiParams {
            table: TableParams {
                hash_func_count: self.hashes,
                table_size: self.table_size,
                max_items_per_bin: self.degree,
            },
            item: ItemParams {
                felts_per_item: self.f,
            },
            query: QueryParams::new(plan.low, plan.sources.iter().copied()),
            seal: SealParams {
                poly_modulus_degree: self.n,
                coeff_modulus_bits: moduli.to_vec(),
                plain_modulus: self.t,
            },
        }
    }

    /// The design note's FPP of a full query, `T` items against `α` bundles.
    fn fpp_log2(&self) -> f64 {
        let skeleton = self.params(&PlanShape::trivial(), &[]);
        skeleton.log2_fpp_query(u64::from(self.table_size), u64::from(self.bundles))
    }
}

/// One hash function when the client's few items rarely share a bin of a
/// single bundle index (then the server stores each item once, not three
/// times); otherwise cuckoo hashing with three.
fn hash_count(client_items: u64, bins: u32) -> u32 {
    let c = client_items as f64;
    let pairs = c * (c - 1.0) / 2.0;
    if pairs <= SINGLE_HASH_COLLISIONS * f64::from(bins) {
        1
    } else {
        3
    }
}

/// One bundle index for a single hash function; otherwise the smallest
/// multiple of the bins per bundle that keeps the cuckoo load at one half.
fn table_size(client_items: u64, hashes: u32, bins: u32) -> u32 {
    if hashes == 1 {
        return bins;
    }
    let needed = (client_items as f64 / CUCKOO_LOAD).ceil() as u64;
    let indices = needed.div_ceil(u64::from(bins)).max(1);
    // `check_input` bounds the client, so this always fits.
    u32::try_from(indices * u64::from(bins)).unwrap_or(u32::MAX)
}

/// Label fragments `c`, as the sender database computes them.
fn fragments(label_bytes: usize, item_bits: u32) -> usize {
    if label_bytes == 0 {
        return 0;
    }
    (8 * label::encrypted_len(label_bytes)).div_ceil(item_bits as usize)
}

// ---------------------------------------------------------------------------
// Source powers and plans
// ---------------------------------------------------------------------------

/// Extremal postage-stamp bases `(h, reach, basis)`: every exponent up to
/// `reach` is a sum of at most `h` elements, so a plan reaches it at depth
/// `log2 h`. Found by `powers::postage_stamp_basis` (the larger ones take
/// seconds there, hence the table; a test re-checks every reach and re-finds
/// the cheap ones).
const STAMP_BASES: &[(u32, u32, &[u32])] = &[
    (2, 2, &[1]),
    (2, 4, &[1, 2]),
    (2, 8, &[1, 3, 4]),
    (2, 12, &[1, 3, 5, 6]),
    (2, 16, &[1, 3, 5, 7, 8]),
    (2, 20, &[1, 2, 5, 8, 9, 10]),
    (2, 26, &[1, 2, 5, 8, 11, 12, 13]),
    (2, 32, &[1, 2, 5, 8, 11, 14, 15, 16]),
    (2, 40, &[1, 3, 4, 9, 11, 16, 17, 19, 20]),
    (4, 4, &[1]),
    (4, 10, &[1, 3]),
    (4, 26, &[1, 5, 8]),
    (4, 44, &[1, 3, 11, 18]),
    (4, 70, &[1, 3, 11, 15, 32]),
    (4, 108, &[1, 4, 9, 16, 38, 49]),
    (4, 162, &[1, 4, 9, 24, 35, 49, 51]),
    (8, 8, &[1]),
    (8, 28, &[1, 5]),
    (8, 89, &[1, 9, 14]),
    (8, 234, &[1, 6, 25, 65]),
    (8, 512, &[1, 9, 15, 78, 115]),
];
/// Most source powers per bundle index the search considers.
const MAX_SOURCES: usize = 24;
/// Most Paterson-Stockmeyer high powers sent directly (depth 0) rather
/// than from a basis.
const MAX_DIRECT_HIGH: u32 = 6;
/// Largest `B` evaluated without Paterson-Stockmeyer: beyond it computing
/// all `B` powers costs far more products than any split.
const MAX_NAIVE_DEGREE: u32 = 1024;

/// A powers plan reduced to what the models need.
#[derive(Clone, Debug)]
struct PlanShape {
    sources: Vec<u32>,
    /// `ps_low_degree` (0: no Paterson-Stockmeyer).
    low: u32,
    /// Deepest power the dot products read (`1..=L`, or all without PS).
    depth_low: u32,
    /// Deepest multiple of `L + 1` (PS only).
    depth_high: u32,
    /// The operations the evaluator performs for this plan.
    work: PlanWork,
    /// The same with the leaves grouped, per prefix of the groups.
    leaf_groups: Vec<PlanWork>,
    /// How the sources were chosen, for the explanation.
    origin: String,
}

impl PlanShape {
    fn trivial() -> Self {
        Self {
            sources: vec![1],
            low: 0,
            depth_low: 0,
            depth_high: 0,
            work: PlanWork {
                products: 0,
                relins: 0,
                prepared: 0,
                lazy: 0,
                relin_result: false,
                high_products: 0,
            },
            leaf_groups: Vec::new(),
            origin: String::new(),
        }
    }

    fn from_plan(plan: &PowersPlan, origin: String) -> Self {
        let low = plan.ps_low_degree();
        let depth_of = |keep: &dyn Fn(u32) -> bool| {
            let needed = plan.needed().iter().copied().filter(|&e| keep(e));
            needed.filter_map(|e| plan.depth(e)).max().unwrap_or(0)
        };
        let (depth_low, depth_high) = if low == 0 {
            (plan.max_depth(), 0)
        } else {
            (depth_of(&|e| e <= low), depth_of(&|e| e > low))
        };
        Self {
            sources: plan.sources().to_vec(),
            low,
            depth_low,
            depth_high,
            work: PlanWork::new(plan, &Grouping::of_plan(plan)),
            leaf_groups: Grouping::leaf_prefixes(plan)
                .iter()
                .map(|g| PlanWork::new(plan, g))
                .collect(),
            origin,
        }
    }
}

/// The smallest table basis with sums of at most `h` that reaches `target`.
fn table_basis(h: u32, target: u32) -> Option<&'static [u32]> {
    STAMP_BASES
        .iter()
        .find(|(hh, reach, _)| *hh == h && *reach >= target)
        .map(|(_, _, basis)| *basis)
}

/// A depth-1 basis for larger targets: `1..=a` and `2a, 3a, .., ma` reach
/// `(m + 1)·a` with sums of two, with `a + m - 1` elements.
fn sum_of_two_basis(target: u32) -> Vec<u32> {
    let a = f64::from(target).sqrt().ceil() as u32;
    let m = target.div_ceil(a).saturating_sub(1).max(1);
    (1..=a).chain((2..=m).map(|j| j * a)).collect()
}

/// Every candidate plan for degree `B`: stamp bases of depth 1 to 3 for
/// all powers, and Paterson-Stockmeyer splits with stamp bases for the low
/// powers and scaled ones for the high powers.
fn plans_for(degree: u32) -> Vec<PlanShape> {
    let mut plans = Vec::new();
    if degree <= MAX_NAIVE_DEGREE {
        naive_plans(degree, &mut plans);
    }
    ps_plans(degree, &mut plans);
    plans
}

fn naive_plans(degree: u32, out: &mut Vec<PlanShape>) {
    let mut bases: Vec<(Vec<u32>, String)> = [2, 4, 8]
        .iter()
        .filter_map(|&h| {
            let basis = table_basis(h, degree)?;
            Some((
                basis.to_vec(),
                format!("extremal postage-stamp basis, sums of <= {h}"),
            ))
        })
        .collect();
    if table_basis(2, degree).is_none() {
        let note = "1..a and multiples of a, sums of two".to_string();
        bases.push((sum_of_two_basis(degree), note));
    }
    for (basis, note) in bases {
        let sources: Vec<u32> = basis.into_iter().filter(|&s| s <= degree).collect();
        push_plan(out, &sources, 0, degree, note);
    }
}

fn ps_plans(degree: u32, out: &mut Vec<PlanShape>) {
    let root = f64::from(degree).sqrt();
    for &(h_low, low, low_basis) in STAMP_BASES.iter().filter(|(h, _, _)| *h <= 4) {
        let in_range = f64::from(low) >= root / 3.0 && f64::from(low) <= 4.0 * root;
        let high_count = degree / (low + 1);
        if !in_range || high_count == 0 {
            continue;
        }
        for h_high in [1, 2, 4, 8] {
            let Some(high) = high_basis(h_high, high_count) else {
                continue;
            };
            let scaled = high.iter().map(|&e| e * (low + 1)).filter(|&e| e <= degree);
            let sources: Vec<u32> = low_basis.iter().copied().chain(scaled).collect();
            let note = format!(
                "Paterson-Stockmeyer: low powers from a basis with sums of <= {h_low}, \
                 high powers from one with sums of <= {h_high}, times {}",
                low + 1
            );
            push_plan(out, &sources, low, degree, note);
        }
    }
}

/// Multipliers `i` of the high powers `y^(i(L+1))` to send so that every
/// multiple up to `count` is a sum of at most `h` of them: all of them for
/// `h = 1` (only sensible for a handful), else a table basis.
fn high_basis(h: u32, count: u32) -> Option<Vec<u32>> {
    if h == 1 {
        return (count <= MAX_DIRECT_HIGH).then(|| (1..=count).collect());
    }
    table_basis(h, count).map(<[u32]>::to_vec)
}

fn push_plan(out: &mut Vec<PlanShape>, sources: &[u32], low: u32, degree: u32, note: String) {
    if sources.len() > MAX_SOURCES {
        return;
    }
    if let Ok(plan) = PowersPlan::new(sources, low, degree) {
        out.push(PlanShape::from_plan(&plan, note));
    }
}

// ---------------------------------------------------------------------------
// Search
// ---------------------------------------------------------------------------

/// Ring degrees searched.
const DEGREES: [u32; 3] = [4096, 8192, 16384];
/// Plaintext modulus sizes searched, in bits.
const PLAIN_BITS: std::ops::RangeInclusive<u32> = 16..=24;
/// Smallest `B` searched.
const MIN_DEGREE: u32 = 4;
/// Largest `B` searched.
const MAX_DEGREE: u32 = 4096;
/// Self-test widenings before a candidate is given up.
const MAX_WIDENINGS: usize = 3;
/// Candidates confirmed by a self-test before the search gives up.
const MAX_CONFIRMATIONS: usize = 4;

/// A complete candidate.
#[derive(Clone, Debug)]
struct Candidate {
    layout: Layout,
    plan: Rc<PlanShape>,
    moduli: Vec<u32>,
    estimate: CostEstimate,
}

/// Chooses parameters for a workload (design note section 3).
///
/// Searches `n` in {4096, 8192, 16384}, batching primes `t` of 16 to 24
/// bits, and bin sizes `B` on a grid (plus the sizes that fill 1 to 4
/// bundles exactly); per `(n, t, B)` the smallest `f` meeting the FPP rule;
/// per `B` depth-optimal source sets with and without Paterson-Stockmeyer;
/// per plan the smallest moduli the noise model allows. Candidates are
/// ranked by the goal and the best is confirmed with a self-test
/// ([`SELECT_SELF_TEST_RUNS`] runs), its moduli widened if the measured
/// margin falls short; if it cannot be confirmed, the next one is tried.
pub fn select(input: &SelectionInput) -> Result<Selection, Error> {
    check_input(input)?;
    let mut candidates = search(input);
    if candidates.is_empty() {
        return Err(Error::Params(format!(
            "no parameters meet FPP 2^{} for {} server and {} client items within the \
             search space (n up to 16384, t up to 24 bits)",
            input.max_fpp_log2, input.server_items, input.client_items
        )));
    }
    rank(&mut candidates, input.goal);
    let mut last_failure = String::new();
    for candidate in candidates.iter().take(MAX_CONFIRMATIONS) {
        match confirm(candidate)? {
            Ok((params, test)) => return Ok(finish(input, candidate, &candidates, params, test)),
            Err(reason) => last_failure = reason,
        }
    }
    Err(Error::Params(format!(
        "no candidate passed the self-test; last: {last_failure}"
    )))
}

/// Largest client the search plans a table for (queries beyond it split).
const MAX_CLIENT_ITEMS: u64 = 1 << 24;

fn check_input(input: &SelectionInput) -> Result<(), Error> {
    if !(1..=MAX_CLIENT_ITEMS).contains(&input.client_items) {
        return Err(Error::Params(format!(
            "client_items must be in 1..={MAX_CLIENT_ITEMS}, got {}",
            input.client_items
        )));
    }
    if input.label_bytes > label::MAX_LABEL_BYTES {
        return Err(Error::Params(format!(
            "labels of {} bytes requested; the limit is {}",
            input.label_bytes,
            label::MAX_LABEL_BYTES
        )));
    }
    let mbps = input.goal.link_mbps();
    if !mbps.is_finite() || mbps <= 0.0 {
        return Err(Error::Params(format!(
            "the link speed must be a positive number of Mbit/s, got {mbps}"
        )));
    }
    if !input.max_fpp_log2.is_finite() || input.max_fpp_log2 >= 0.0 {
        return Err(Error::Params("max_fpp_log2 must be negative".into()));
    }
    Ok(())
}

/// Every feasible candidate.
fn search(input: &SelectionInput) -> Vec<Candidate> {
    let mut plan_cache: HashMap<u32, Rc<Vec<Rc<PlanShape>>>> = HashMap::new();
    let mut out = Vec::new();
    for n in DEGREES {
        for bits in PLAIN_BITS {
            let Ok(t) = batching_prime(n, bits) else {
                continue;
            };
            for degree in degree_grid(input, n, t) {
                let Some(layout) = smallest_f(input, n, t, degree) else {
                    continue;
                };
                let plans = plan_cache
                    .entry(degree)
                    .or_insert_with(|| {
                        Rc::new(plans_for(degree).into_iter().map(Rc::new).collect())
                    })
                    .clone();
                for plan in plans.iter() {
                    out.extend(candidate(input, &layout, plan));
                }
            }
        }
    }
    out
}

/// Bin sizes for `(n, t)`: a geometric grid (8 steps per doubling) up to
/// the budgeted bin load, plus the sizes that hold that load in exactly 1
/// to 4 bundles.
fn degree_grid(input: &SelectionInput, n: u32, t: u64) -> Vec<u32> {
    let f_min = 80u32.div_ceil(t.ilog2());
    let probe = Layout::new(input, n, t, f_min, 1);
    let top = probe.load.max.clamp(MIN_DEGREE, MAX_DEGREE);
    let mut grid: Vec<u32> = (0..)
        .map(|i| (f64::from(MIN_DEGREE) * (f64::from(i) / 8.0).exp2()).round() as u32)
        .take_while(|&b| b < top)
        .collect();
    grid.extend((1..=4).map(|a| probe.load.max.div_ceil(a).clamp(MIN_DEGREE, MAX_DEGREE)));
    grid.sort_unstable();
    grid.dedup();
    grid
}

/// The smallest `f` with `80 <= f·b <= 128` meeting the FPP rule
/// `f·(b - log2 B) >= -max_fpp + log2 T + log2 α`, with its layout.
fn smallest_f(input: &SelectionInput, n: u32, t: u64, degree: u32) -> Option<Layout> {
    let b = t.ilog2();
    (80u32.div_ceil(b)..=128 / b).find_map(|f| {
        let layout = Layout::new(input, n, t, f, degree);
        let fits = layout.bundles <= MAX_BUNDLES_PER_INDEX;
        (fits && layout.fpp_log2() <= input.max_fpp_log2).then_some(layout)
    })
}

fn candidate(input: &SelectionInput, layout: &Layout, plan: &Rc<PlanShape>) -> Option<Candidate> {
    let noise = predicted_noise(plan, layout.n, layout.t, layout.degree);
    let moduli = moduli_for(noise, layout.n, layout.t)?;
    let estimate = estimate(layout, plan, &moduli, input.client_items);
    Some(Candidate {
        layout: layout.clone(),
        plan: Rc::clone(plan),
        moduli,
        estimate,
    })
}

fn total_bytes(e: &CostEstimate) -> f64 {
    (e.bytes_up + e.bytes_down) as f64
}

/// Sorts candidates best first for the goal (fewer bytes break ties).
fn rank(candidates: &mut [Candidate], goal: Goal) {
    let key = |c: &Candidate| (goal.latency_ms(&c.estimate), total_bytes(&c.estimate));
    candidates.sort_by(|a, b| {
        key(a)
            .partial_cmp(&key(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}

/// Self-tests a candidate, widening its moduli while the margin falls
/// short. The outer error is a failure of the machinery; the inner `Err`
/// says why this candidate was given up.
fn confirm(candidate: &Candidate) -> Result<Result<(PsiParams, SelfTest), String>, Error> {
    let mut moduli = candidate.moduli.clone();
    for _ in 0..=MAX_WIDENINGS {
        let params = candidate.layout.params(&candidate.plan, &moduli);
        params.validate()?;
        let test = match self_test(&params, SELECT_SELF_TEST_RUNS) {
            Ok(test) => test,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if test.passed() {
            return Ok(Ok((params, test)));
        }
        match widen(&moduli, &test, candidate.layout.n) {
            Some(wider) => moduli = wider,
            None => return Ok(Err(format!("{moduli:?} cannot be widened: {test}"))),
        }
    }
    Ok(Err(format!("{moduli:?} still short after widening")))
}

/// The selection for a confirmed candidate, estimates redone for the final
/// moduli.
fn finish(
    input: &SelectionInput,
    chosen: &Candidate,
    ranked: &[Candidate],
    params: PsiParams,
    self_test: SelfTest,
) -> Selection {
    let moduli = params.seal.coeff_modulus_bits.clone();
    let confirmed = Candidate {
        estimate: estimate(&chosen.layout, &chosen.plan, &moduli, input.client_items),
        moduli,
        ..chosen.clone()
    };
    let mut explanation = explain(input, &confirmed, ranked, &params, &self_test);
    if confirmed.moduli != chosen.moduli {
        explanation.push(format!(
            "the noise model asked for coeff_modulus_bits {:?}; the self-test margin was short, \
             so they were widened",
            chosen.moduli
        ));
    }
    Selection {
        params,
        explanation,
        estimate: confirmed.estimate,
        fpp_log2: confirmed.layout.fpp_log2(),
        self_test,
    }
}

// ---------------------------------------------------------------------------
// Explanations
// ---------------------------------------------------------------------------

fn explain(
    input: &SelectionInput,
    chosen: &Candidate,
    ranked: &[Candidate],
    params: &PsiParams,
    test: &SelfTest,
) -> Vec<String> {
    let l = &chosen.layout;
    let mut lines = vec![goal_line(input, chosen, ranked.len())];
    lines.push(degree_line(chosen, ranked, input.goal));
    lines.push(felts_line(input, l, params));
    lines.push(hash_line(input, l));
    lines.push(bin_line(input, l));
    lines.push(plan_line(chosen, ranked));
    lines.push(moduli_line(chosen, params));
    lines.push(format!("self-test: {test}"));
    lines.push(measured_line(chosen, test));
    lines
}

/// The self-test's timings scaled to a whole query, next to the model.
fn measured_line(chosen: &Candidate, test: &SelfTest) -> String {
    let l = &chosen.layout;
    let e = &chosen.estimate;
    let polys = f64::from(l.bundles) * (1.0 + l.fragments as f64);
    let idx = f64::from(l.bundle_idx_count());
    let (powers, poly) = match (e.leaf_groups, test.leaf_group_times) {
        (true, Some(times)) => times,
        _ => (test.powers_time, test.evaluate_time),
    };
    let (powers, poly) = (powers.as_secs_f64() * 1e3, poly.as_secs_f64() * 1e3);
    format!(
        "measured answer cost{}: {idx} index(es) x (powers {powers:.0} ms + {polys} polynomials \
         x {poly:.1} ms) = {:.0} ms (powers on all cores); model single-threaded: powers {:.0} \
         ms, polynomials {:.1} ms, {:.0} ms in all",
        if e.leaf_groups {
            " with leaves grouped"
        } else {
            ""
        },
        idx * (powers + polys * poly),
        e.powers_ms,
        e.polynomial_ms,
        e.server_ms
    )
}

fn goal_line(input: &SelectionInput, chosen: &Candidate, total: usize) -> String {
    let e = &chosen.estimate;
    format!(
        "goal {:?}: least estimated query latency with bytes at {} Mbit/s among {total} \
         feasible candidates: {:.0} ms = server {:.0} ms + client {:.0} ms + {:.2} MB",
        input.goal,
        input.goal.link_mbps(),
        input.goal.latency_ms(e),
        e.server_ms,
        e.client_ms,
        total_bytes(e) / 1e6
    )
}

fn degree_line(chosen: &Candidate, ranked: &[Candidate], goal: Goal) -> String {
    let l = &chosen.layout;
    let mut others = Vec::new();
    for n in DEGREES.iter().filter(|&&n| n != l.n) {
        if let Some(best) = ranked.iter().find(|c| c.layout.n == *n) {
            others.push(format!("n {n}: {}", score(&best.estimate, goal)));
        }
    }
    let others = if others.is_empty() {
        "no other degree is feasible".to_string()
    } else {
        format!("best alternatives {}", others.join(", "))
    };
    format!(
        "n = {}, t = {} ({} bits, b = {}): best candidate at {}; {others}",
        l.n,
        l.t,
        l.t.ilog2() + 1,
        l.t.ilog2(),
        score(&chosen.estimate, goal)
    )
}

fn score(e: &CostEstimate, goal: Goal) -> String {
    format!("{:.0} ms", goal.latency_ms(e))
}

fn felts_line(input: &SelectionInput, l: &Layout, params: &PsiParams) -> String {
    let b = params.bits_per_felt();
    format!(
        "f = {} ({} item bits): smallest f with 80 <= f*b <= 128 and f*(b - log2 B) = {:.1} >= \
         {:.0} + log2 T ({:.1}) + log2 alpha ({:.1})",
        l.f,
        params.item_bits(),
        f64::from(l.f) * (f64::from(b) - log2(f64::from(l.degree))),
        -input.max_fpp_log2,
        log2(f64::from(l.table_size)),
        log2(f64::from(l.bundles))
    )
}

fn hash_line(input: &SelectionInput, l: &Layout) -> String {
    let bins = l.n / l.f;
    if l.hashes == 1 {
        format!(
            "h = 1, T = {}: {} client item(s) rarely share a bin of one bundle index, so each \
             server item is stored once instead of three times",
            l.table_size, input.client_items
        )
    } else {
        format!(
            "h = 3, T = {}: smallest multiple of floor(n/f) = {bins} with client load {:.2} <= \
             {CUCKOO_LOAD}",
            l.table_size,
            input.client_items as f64 / f64::from(l.table_size)
        )
    }
}

fn bin_line(input: &SelectionInput, l: &Layout) -> String {
    let labeled = if input.label_bytes > 0 {
        format!(
            ", labeled collisions counted as {:.2}% extra load; c = {} label fragments",
            100.0 * f64::from(l.f) * f64::from(l.degree) / l.t as f64,
            l.fragments
        )
    } else {
        String::new()
    };
    format!(
        "B = {}: mean bin load {:.1}, budgeted max {} (all bins under it with 99%), alpha = {} \
         bundle(s) per index{labeled}",
        l.degree, l.load.mean, l.load.max, l.bundles
    )
}

/// Paper criterion (6): Paterson-Stockmeyer needs fewer products than
/// computing all powers when the partitions number fewer than this.
fn ps_criterion(degree: u32) -> f64 {
    let b = f64::from(degree);
    (-2.0 * b - b.sqrt() + (4.0 * b * b + 12.0 * b * b.sqrt() - 7.0 * b).sqrt()) / 4.0
}

fn plan_line(chosen: &Candidate, ranked: &[Candidate]) -> String {
    let plan = &chosen.plan;
    let l = &chosen.layout;
    let same_layout =
        |c: &&Candidate| c.layout.n == l.n && c.layout.t == l.t && c.layout.degree == l.degree;
    let rival = ranked
        .iter()
        .filter(same_layout)
        .find(|c| (c.plan.low == 0) != (plan.low == 0));
    let rival = match rival {
        Some(r) => format!(
            "; best {} plan: {} products, {:.0} ms",
            if r.plan.low == 0 { "all-powers" } else { "PS" },
            r.estimate.ct_ct_products,
            r.estimate.server_ms
        ),
        None => String::new(),
    };
    let polys = l.bundles as usize * (1 + l.fragments);
    format!(
        "query powers {:?}, ps_low_degree {}: {}; depth {}/{} (low/high), {} products per query; \
         paper criterion (6) guarantees PS fewer products below {:.1} polynomials per index \
         (here {polys}){rival}",
        plan.sources,
        plan.low,
        plan.origin,
        plan.depth_low,
        plan.depth_high,
        chosen.estimate.ct_ct_products,
        ps_criterion(l.degree)
    )
}

fn moduli_line(chosen: &Candidate, params: &PsiParams) -> String {
    let n = chosen.layout.n;
    let bits = &params.seal.coeff_modulus_bits;
    let total: u32 = bits.iter().sum();
    let cap = psikit_he::security::max_bits_128(n as usize).unwrap_or(0);
    let e = &chosen.estimate;
    format!(
        "coeff_modulus_bits {bits:?}: predicted noise {:.1} bits leaves a predicted \
         {:.1}-bit budget (>= {NOISE_MARGIN_BITS} wanted); {total} of {cap} bits allowed at n \
         {n} for 128-bit security; special prime last",
        e.predicted_noise_bits, e.predicted_budget_bits,
    )
}

// ---------------------------------------------------------------------------
// Describe a given parameter set
// ---------------------------------------------------------------------------

/// Reports on a given parameter set (for instance an APSI file) under a
/// workload: security, FPP, plan, cost estimates and, with
/// `self_test_runs > 0`, the self-test.
pub fn describe(
    params: &PsiParams,
    server_items: u64,
    client_items: u64,
    label_bytes: usize,
    self_test_runs: usize,
) -> Result<Report, Error> {
    params.validate()?;
    let plan = PowersPlan::from_params(params)?;
    let layout = given_layout(params, server_items, label_bytes);
    let shape = PlanShape::from_plan(&plan, String::new());
    let estimate = estimate(
        &layout,
        &shape,
        &params.seal.coeff_modulus_bits,
        client_items,
    );
    let security = params.he_params().map(|_| ()).map_err(|e| e.to_string());
    let self_test =
        (self_test_runs > 0).then(|| self_test(params, self_test_runs).map_err(|e| e.to_string()));
    let bundles = u64::from(layout.bundles);
    Ok(Report {
        params: params.clone(),
        server_items,
        client_items,
        label_bytes,
        security,
        fpp_log2_full: params.log2_fpp_query(u64::from(params.table.table_size), bundles),
        fpp_log2_client: params.log2_fpp_query(client_items, bundles),
        plan_depth: plan.max_depth(),
        plan_products: plan.steps().len(),
        estimate,
        self_test,
    })
}

fn given_layout(params: &PsiParams, server_items: u64, label_bytes: usize) -> Layout {
    let t = params.seal.plain_modulus;
    let f = params.item.felts_per_item;
    let degree = params.table.max_items_per_bin;
    let hashes = params.table.hash_func_count;
    let load = bin_load(server_items.max(1), hashes, params.table.table_size);
    Layout {
        n: params.seal.poly_modulus_degree,
        t,
        f,
        hashes,
        table_size: params.table.table_size,
        degree,
        load,
        bundles: bundles_per_index(load.max, degree, label_bytes > 0, f, t),
        fragments: fragments(label_bytes, params.item_bits()),
    }
}

// ---------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

impl fmt::Display for SelfTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} run(s), min noise budget {} bits ({} at the query level, {} at the lowest), \
             powers {:.1} ms, one polynomial {:.1} ms, {:.1} s in all",
            if self.correct {
                "correct"
            } else {
                "WRONG DECRYPTION"
            },
            self.runs,
            self.min_budget_bits,
            self.min_budget_query_level,
            self.min_budget_lowest_level,
            self.powers_time.as_secs_f64() * 1e3,
            self.evaluate_time.as_secs_f64() * 1e3,
            self.elapsed.as_secs_f64()
        )?;
        if let Some((powers, poly)) = self.leaf_group_times {
            write!(
                f,
                "; with leaves grouped: powers {:.1} ms, one polynomial {:.1} ms",
                powers.as_secs_f64() * 1e3,
                poly.as_secs_f64() * 1e3
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for CostEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "bundles: {} index(es) x {} (mean bin load {:.1}, budgeted max {}), {} label \
             fragment(s)",
            self.bundle_idx_count,
            self.bundles_per_index,
            self.mean_bin_load,
            self.max_bin_load,
            self.label_fragments
        )?;
        writeln!(
            f,
            "per query: {} ct x ct products, {} ct x pt terms; model: server {:.0} ms \
             single-threaded, client {:.0} ms",
            self.ct_ct_products, self.ct_pt_terms, self.server_ms, self.client_ms
        )?;
        writeln!(
            f,
            "bytes: up {} ({} ciphertexts + relinearization key + OPRF), down {} ({} \
             ciphertexts + OPRF)",
            mb(self.bytes_up),
            self.query_ciphertexts,
            mb(self.bytes_down),
            self.result_ciphertexts
        )?;
        write!(
            f,
            "server memory: {} database, {} more with the plaintext cache; noise model: {:.1} \
             bits, {:.1}-bit budget",
            mb(self.db_bytes),
            mb(self.cache_bytes),
            self.predicted_noise_bits,
            self.predicted_budget_bits
        )
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.explanation {
            writeln!(f, "- {line}")?;
        }
        writeln!(f, "FPP per full query: 2^{:.1}", self.fpp_log2)?;
        writeln!(f, "{}", self.estimate)?;
        write!(f, "{}", self.params.to_apsi_json().trim_end())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.params;
        writeln!(
            f,
            "workload: {} server items, {} client items, labels up to {} bytes",
            self.server_items, self.client_items, self.label_bytes
        )?;
        match &self.security {
            Ok(()) => writeln!(
                f,
                "security: 128-bit bound met ({} of {} modulus bits at n {})",
                p.seal.coeff_modulus_bits.iter().sum::<u32>(),
                psikit_he::security::max_bits_128(p.seal.poly_modulus_degree as usize).unwrap_or(0),
                p.seal.poly_modulus_degree
            )?,
            Err(e) => writeln!(f, "security: FAILED: {e}")?,
        }
        writeln!(
            f,
            "FPP per query: 2^{:.1} for a full table ({} items), 2^{:.1} for {} item(s)",
            self.fpp_log2_full, p.table.table_size, self.fpp_log2_client, self.client_items
        )?;
        writeln!(
            f,
            "powers plan: {} sources, {} products per bundle index, depth {}",
            p.query.query_powers.len(),
            self.plan_products,
            self.plan_depth
        )?;
        write!(f, "{}", self.estimate)?;
        match &self.self_test {
            None => Ok(()),
            Some(Ok(test)) => write!(f, "\nself-test: {test}"),
            Some(Err(e)) => write!(f, "\nself-test: could not run: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::he_psi::shape::DbShape;
    use std::collections::HashSet;

    const K256_1024: &str = include_str!("apsi-params/256K-1024.json");
    const CMP_1M_1024: &str = include_str!("apsi-params/1M-1024-cmp.json");

    fn apsi(text: &str) -> PsiParams {
        PsiParams::from_apsi_json(text).expect("fixture is valid")
    }

    #[test]
    fn self_test_passes_apsi_256k_1024() {
        let test = self_test(&apsi(K256_1024), 2).unwrap();
        eprintln!("256K-1024: {test}");
        assert!(test.correct, "{test}");
        assert!(test.min_budget_bits >= NOISE_MARGIN_BITS, "{test}");
        assert_eq!(test.runs, 2);
    }

    /// APSI's file leaves only a few bits under fhe (design note section
    /// 9): it must decrypt, and the margin is reported, not required.
    #[test]
    fn self_test_apsi_1m_1024_cmp_is_correct_with_a_thin_margin() {
        let test = self_test(&apsi(CMP_1M_1024), 1).unwrap();
        eprintln!("1M-1024-cmp: {test}");
        assert!(test.correct, "{test}");
        assert!(test.min_budget_bits >= 0, "{test}");
    }

    #[test]
    fn self_test_fails_moduli_too_small_for_the_depth() {
        let mut params = apsi(K256_1024);
        params.seal.coeff_modulus_bits = vec![30, 30];
        match self_test(&params, 1) {
            Ok(test) => {
                assert!(!test.correct, "{test}");
                assert!(!test.passed());
            }
            Err(e) => assert!(e.to_string().contains("homomorphic"), "{e}"),
        }
        // Insecure moduli are refused before anything is encrypted.
        params.seal.coeff_modulus_bits = vec![40, 40, 30];
        let e = self_test(&params, 1).unwrap_err().to_string();
        assert!(e.contains("128-bit"), "{e}");
    }

    /// The properties every selection must have.
    fn assert_sound(input: &SelectionInput, s: &Selection) {
        let p = &s.params;
        p.validate().unwrap();
        let he = p.he_params().expect("within the 128-bit bound");
        assert!(s.fpp_log2 <= input.max_fpp_log2, "{}", s.fpp_log2);
        let full = p.log2_fpp_query(
            u64::from(p.table.table_size),
            u64::from(s.estimate.bundles_per_index),
        );
        assert!((full - s.fpp_log2).abs() < 1e-9);
        assert!(
            s.self_test.correct && s.self_test.passed(),
            "{}",
            s.self_test
        );
        assert!(s.self_test.runs >= SELECT_SELF_TEST_RUNS);
        let shape = DbShape::new(p, input.label_bytes).unwrap();
        assert_eq!(s.estimate.label_fragments, shape.label_fragments());
        assert_eq!(s.estimate.bundle_idx_count, p.bundle_idx_count());
        assert!(u64::from(p.table.table_size) >= input.client_items);
        // Byte estimates use exactly the wire sizes of psikit-he.
        let sizes = WireSizes::new(
            p.seal.poly_modulus_degree,
            &p.seal.coeff_modulus_bits,
            (p.seal.plain_modulus as f64).log2(),
        );
        assert_eq!(sizes.query_ct, psikit_he::wire::query_ct_size(&he) as u64);
        let exact =
            psikit_he::wire::result_ct_size_dropped(&he, psikit_he::wire::safe_drop_bits(&he))
                .unwrap() as u64;
        let one_bit = 2 * u64::from(p.seal.poly_modulus_degree) / 8;
        assert!(
            sizes.result_ct.abs_diff(exact) <= one_bit,
            "{} vs {exact}",
            sizes.result_ct
        );
        assert_eq!(sizes.relin_key, psikit_he::wire::relin_key_size(&he) as u64);
        assert!(s.explanation.len() >= 8);
        assert!(s.to_string().contains("\"table_params\""));
    }

    fn select_and_check(server: u64, client: u64, label: usize) -> Selection {
        let input = SelectionInput::new(server, client, label);
        let s = select(&input).unwrap();
        eprintln!("{server} server, {client} client, {label}-byte labels:\n{s}\n");
        assert_sound(&input, &s);
        s
    }

    #[test]
    fn select_small_server_single_item() {
        let s = select_and_check(1 << 16, 1, 0);
        assert_eq!(s.params.table.hash_func_count, 1);
    }

    #[test]
    fn select_1m_server_1024_items() {
        let s = select_and_check(1 << 20, 1024, 0);
        assert_eq!(s.params.table.hash_func_count, 3);
        assert!(s.params.table.table_size >= 2048);
    }

    #[test]
    fn select_1m_server_single_item_16_byte_labels() {
        let s = select_and_check(1 << 20, 1, 16);
        assert!(s.estimate.label_fragments >= 2);
    }

    #[test]
    fn comm_goal_sends_no_more_than_time_goal() {
        let mut input = SelectionInput::new(1 << 18, 256, 0);
        let candidates = search(&input);
        let best_by = |goal| {
            let mut ranked = candidates.clone();
            rank(&mut ranked, goal);
            ranked.into_iter().next().expect("feasible")
        };
        let time = best_by(Goal::Time).estimate;
        let comm = best_by(Goal::Comm).estimate;
        assert!(total_bytes(&comm) <= total_bytes(&time));
        assert!(time.server_ms + time.client_ms <= comm.server_ms + comm.client_ms);
        assert!(Goal::Time.latency_ms(&time) <= Goal::Time.latency_ms(&comm));
        // A link between the two goals' speeds lands between them.
        let middle = best_by(Goal::Link(30.0)).estimate;
        assert!(total_bytes(&comm) <= total_bytes(&middle));
        assert!(total_bytes(&middle) <= total_bytes(&time));
        assert_eq!(best_by(Goal::Link(COMM_LINK_MBPS)).estimate, comm);
        input.max_fpp_log2 = 0.5;
        assert!(select(&input).is_err());
        input.max_fpp_log2 = -40.0;
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            input.goal = Goal::Link(bad);
            assert!(select(&input).is_err(), "{bad}");
        }
        input.goal = Goal::Time;
        input.client_items = 0;
        assert!(select(&input).is_err());
    }

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

    #[test]
    fn search_is_fast_and_every_candidate_is_secure_and_within_fpp() {
        let input = SelectionInput::new(1 << 20, 1024, 16);
        let clock = Instant::now();
        let candidates = search(&input);
        assert!(
            clock.elapsed() < Duration::from_secs(5),
            "{:?}",
            clock.elapsed()
        );
        assert!(candidates.len() > 100);
        for c in &candidates {
            let p = c.layout.params(&c.plan, &c.moduli);
            p.validate().unwrap();
            let n = p.seal.poly_modulus_degree as usize;
            let bits: Vec<usize> = c.moduli.iter().map(|&b| b as usize).collect();
            psikit_he::security::check_128(n, &bits).unwrap();
            assert!(c.layout.fpp_log2() <= -40.0);
            assert!(c.estimate.predicted_budget_bits >= NOISE_MARGIN_BITS as f64 - 1e-9);
        }
    }

    #[test]
    fn stamp_table_matches_the_search() {
        for &(h, reach, basis) in STAMP_BASES {
            assert_eq!(stamp_reach(basis, h), reach, "{basis:?}");
            // Re-find the ones the exhaustive search does in milliseconds.
            let cheap = matches!((h, basis.len()), (2, 1..=7) | (4, 1..=5) | (8, 1..=4));
            if cheap {
                assert_eq!(postage_stamp_basis(basis.len(), h), (basis.to_vec(), reach));
            }
        }
        for target in [41, 101, 228, 1000] {
            let basis = sum_of_two_basis(target);
            assert!(stamp_reach(&basis, 2) >= target, "{target}: {basis:?}");
        }
    }

    use super::super::powers::{postage_stamp_basis, stamp_reach};

    #[test]
    fn poisson_quantile_brackets_the_tail() {
        assert_eq!(poisson_quantile(0.0, 0.01), 0);
        // Mean 80, 1% over 819 bins: about 4.4 sigma above the mean.
        let l = poisson_quantile(80.0, 0.01 / 819.0);
        assert!((115..=125).contains(&l), "{l}");
        // Exact tail at and below the answer.
        let tail = |mean: f64, l: u32| -> f64 {
            let mut pmf = (-mean).exp();
            let mut below = pmf;
            for k in 1..=l {
                pmf *= mean / f64::from(k);
                below += pmf;
            }
            1.0 - below
        };
        assert!(tail(80.0, l) <= 0.01 / 819.0);
        assert!(tail(80.0, l - 3) > 0.01 / 819.0);
        let big = poisson_quantile(1e6, 1e-6);
        assert!((1_004_000..=1_006_000).contains(&big), "{big}");
        for k in [0.0, 1.0, 5.0, 19.0, 20.0, 50.0] {
            let exact: f64 = (2..=k as u64).map(|i| (i as f64).ln()).sum();
            assert!((ln_factorial(k) - exact).abs() < 1e-9, "{k}");
        }
    }

    #[test]
    fn bundles_and_tables() {
        assert_eq!(bundles_per_index(1710, 101, false, 6, 40961), 17);
        assert_eq!(bundles_per_index(101, 101, false, 6, 40961), 1);
        // Labeled: collisions add load (5 * 228 / 65537 = 1.7%).
        assert_eq!(bundles_per_index(912, 228, false, 5, 65537), 4);
        assert_eq!(bundles_per_index(912, 228, true, 5, 65537), 5);
        assert_eq!(hash_count(1, 1638), 1);
        assert_eq!(hash_count(4, 1638), 1);
        assert_eq!(hash_count(16, 1638), 3);
        assert_eq!(table_size(1023, 3, 682), 2046);
        assert_eq!(table_size(1024, 3, 682), 2728);
        assert_eq!(table_size(1024, 3, 2048), 2048);
        assert_eq!(table_size(1, 1, 1638), 1638);
        assert_eq!(fragments(0, 80), 0);
        assert_eq!(fragments(16, 80), 4);
        assert_eq!(fragments(32, 80), 5);
    }

    #[test]
    fn moduli_respect_margin_security_and_special_prime() {
        for (n, t) in [(4096, 40961), (8192, 65537), (16384, 786433)] {
            for noise in [40.0, 60.0, 90.0, 150.0, 300.0] {
                let Some(moduli) = moduli_for(noise, n, t) else {
                    continue;
                };
                let (query, lowest) = predicted_budgets(noise, n, t, &moduli);
                assert!(
                    query >= 4.0 && lowest >= 4.0,
                    "{moduli:?}: {query} {lowest}"
                );
                let total: u32 = moduli.iter().sum();
                assert!(total as usize <= psikit_he::security::max_bits_128(n as usize).unwrap());
                assert!(moduli
                    .iter()
                    .all(|&b| (MIN_MODULUS_BITS..=MAX_MODULUS_BITS).contains(&b)));
            }
        }
        // Depth far beyond what n 4096 can hold.
        assert_eq!(moduli_for(150.0, 4096, 40961), None);
    }

    #[test]
    fn widening_adds_the_deficit_where_it_was_short() {
        let test = SelfTest {
            correct: true,
            min_budget_bits: 2,
            min_budget_query_level: 2,
            min_budget_lowest_level: 2,
            runs: 1,
            elapsed: Duration::ZERO,
            powers_time: Duration::ZERO,
            evaluate_time: Duration::ZERO,
            leaf_group_times: None,
        };
        assert_eq!(widen(&[40, 32, 30], &test, 4096), Some(vec![40, 34, 25]));
        let floor_only = SelfTest {
            min_budget_query_level: 9,
            ..test.clone()
        };
        assert_eq!(
            widen(&[40, 32, 30], &floor_only, 4096),
            Some(vec![42, 32, 26])
        );
        let fine = SelfTest {
            min_budget_query_level: 9,
            min_budget_lowest_level: 5,
            ..test.clone()
        };
        assert_eq!(widen(&[40, 32, 30], &fine, 4096), None);
        // No room left under the bound at n 4096.
        assert_eq!(widen(&[55, 30, 39], &test, 4096), None);
    }

    #[test]
    fn ps_criterion_is_sufficient_for_paper_example_1() {
        // B = 81: Paterson-Stockmeyer wins for alpha <= 5 (Example 1); the
        // criterion, built on an upper bound, guarantees it up to 3.
        let bound = ps_criterion(81);
        assert!(bound > 3.0 && bound <= 5.0, "{bound}");
    }

    #[test]
    fn noise_model_tracks_the_apsi_files() {
        // Measured budgets: 256K-1024 5 bits, 1M-1024-cmp 2 bits. The
        // model must not promise more than 1 bit above either.
        for (text, measured) in [(K256_1024, 5.0), (CMP_1M_1024, 2.0)] {
            let p = apsi(text);
            let plan = PowersPlan::from_params(&p).unwrap();
            let shape = PlanShape::from_plan(&plan, String::new());
            let n = p.seal.poly_modulus_degree;
            let noise = predicted_noise(&shape, n, p.seal.plain_modulus, p.table.max_items_per_bin);
            let (_, lowest) =
                predicted_budgets(noise, n, p.seal.plain_modulus, &p.seal.coeff_modulus_bits);
            assert!(
                lowest <= measured + 1.0 && lowest >= measured - 3.0,
                "{lowest}"
            );
        }
    }

    #[test]
    fn describe_apsi_1m_1024_cmp_matches_the_design_note() {
        let r = describe(&apsi(CMP_1M_1024), 1 << 20, 1024, 0, 0).unwrap();
        assert_eq!(r.security, Ok(()));
        assert_eq!(r.estimate.bundles_per_index, 17);
        assert!(
            (r.fpp_log2_client + 35.96).abs() < 0.01,
            "{}",
            r.fpp_log2_client
        );
        assert!(
            (r.fpp_log2_full + 34.96).abs() < 0.01,
            "{}",
            r.fpp_log2_full
        );
        assert_eq!((r.plan_depth, r.plan_products), (1, 85));
        // Design note section 6: up 1.77 + 0.11 + 0.03 MB; down 2.09 MB of
        // full results, 1.55 MB with the noise-only low bits dropped (as
        // measured by `psikit bench he`).
        let up = r.estimate.bytes_up as f64 / 1e6;
        let down = r.estimate.bytes_down as f64 / 1e6;
        assert!((up - 1.91).abs() < 0.01, "{up}");
        assert!((down - 1.55).abs() < 0.01, "{down}");
        assert!(r.self_test.is_none());
        let text = r.to_string();
        eprintln!("{text}");
        assert!(
            text.contains("128-bit bound met") && text.contains("FPP per query"),
            "{text}"
        );
    }

    #[test]
    fn describe_reports_insecure_sets_and_runs_the_self_test() {
        let mut p = apsi(K256_1024);
        let r = describe(&p, 1 << 18, 1024, 16, 1).unwrap();
        assert!(matches!(&r.self_test, Some(Ok(t)) if t.correct));
        assert!(r.estimate.label_fragments > 0);
        assert!(r.to_string().contains("self-test: correct"));
        p.seal.coeff_modulus_bits = vec![40, 40, 30];
        let r = describe(&p, 1 << 18, 1024, 0, 1).unwrap();
        assert!(r.security.is_err());
        assert!(matches!(r.self_test, Some(Err(_))));
        assert!(r.to_string().contains("security: FAILED"));
    }

    /// Prints the selections reported for issue 4 (slow: run on demand).
    #[test]
    #[ignore]
    fn print_selections() {
        let cases = [
            (1 << 16, 1, 0),
            (1 << 20, 1024, 0),
            (1 << 20, 1, 16),
            (1 << 22, 4096, 32),
        ];
        for goal in [Goal::Time, Goal::Comm] {
            for (server, client, label) in cases {
                let input = SelectionInput {
                    goal,
                    ..SelectionInput::new(server, client, label)
                };
                let clock = Instant::now();
                let candidates = search(&input).len();
                let search_time = clock.elapsed();
                let s = select(&input).unwrap();
                eprintln!(
                    "== {goal:?} {server}/{client}/{label}: {candidates} candidates, search \
                     {search_time:?}, total {:?}\n{s}\n",
                    clock.elapsed()
                );
            }
        }
    }
}
