//! The search: every feasible candidate over degrees, plaintext moduli, bin
//! sizes and plans, ranked by the goal, and the self-test that confirms one
//! (widening its moduli if the measured margin falls short).

use std::collections::HashMap;
use std::rc::Rc;

use super::estimate::estimate;
use super::input::{Goal, SelectionInput};
use super::layout::Layout;
use super::limits::SELECT_SELF_TEST_RUNS;
use super::noise::{moduli_for, predicted_noise, widen};
use super::outcome::CostEstimate;
use super::plans::{plans_for, PlanShape};
use super::self_test::{self_test, SelfTest};
use crate::error::Error;
use crate::he_psi::params::{batching_prime, PsiParams};

/// Most bin bundles per bundle index in one shard the search considers:
/// beyond this the response is dozens of ciphertexts per bundle index and
/// a larger `B` is always cheaper. (It bounds a shard, not the whole
/// database: at 2^30 items even `B` = 4096 needs hundreds of bundles per
/// index, which only sharding makes feasible.)
const MAX_BUNDLES_PER_INDEX: u32 = 64;
/// Ring degrees searched.
pub(super) const DEGREES: [u32; 3] = [4096, 8192, 16384];
/// Plaintext modulus sizes searched, in bits.
const PLAIN_BITS: std::ops::RangeInclusive<u32> = 16..=24;
/// Smallest `B` searched.
const MIN_DEGREE: u32 = 4;
/// Largest `B` searched.
const MAX_DEGREE: u32 = 4096;
/// Self-test widenings before a candidate is given up.
const MAX_WIDENINGS: usize = 3;

/// A complete candidate.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub(super) layout: Layout,
    pub(super) plan: Rc<PlanShape>,
    pub(super) moduli: Vec<u32>,
    pub(super) estimate: CostEstimate,
}

/// Every feasible candidate.
pub(super) fn search(input: &SelectionInput) -> Vec<Candidate> {
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
        let fits = layout.shard_bundles <= MAX_BUNDLES_PER_INDEX;
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

pub(super) fn total_bytes(e: &CostEstimate) -> f64 {
    (e.bytes_up + e.bytes_down) as f64
}

/// Sorts candidates best first for the goal (fewer bytes break ties).
pub(super) fn rank(candidates: &mut [Candidate], goal: Goal) {
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
pub(super) fn confirm(
    candidate: &Candidate,
) -> Result<Result<(PsiParams, SelfTest), String>, Error> {
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

#[cfg(test)]
mod tests {
    use super::super::input::COMM_LINK_MBPS;
    use super::super::limits::NOISE_MARGIN_BITS;
    use super::super::select;
    use super::*;
    use std::time::{Duration, Instant};

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
    fn only_shards_make_2_30_items_feasible_and_the_bound_counts_them() {
        let whole = SelectionInput::new(1 << 30, 1024, 0);
        assert!(search(&whole).is_empty(), "too many bundles per index");
        let input = SelectionInput {
            shards: 64,
            ..whole
        };
        let candidates = search(&input);
        assert!(!candidates.is_empty());
        for c in &candidates {
            let l = &c.layout;
            assert_eq!(l.bundles, 64 * l.shard_bundles);
            assert!(l.shard_bundles <= MAX_BUNDLES_PER_INDEX);
            // A shard's bins hold 2^24 items' worth.
            let mean = f64::from(l.hashes) * f64::from(1u32 << 24) / f64::from(l.table_size);
            assert!((l.load.mean - mean).abs() < 1e-6 * mean);
            assert!(l.fpp_log2() <= -40.0);
            let e = &c.estimate;
            assert_eq!(
                e.result_ciphertexts,
                u64::from(l.bundle_idx_count()) * u64::from(l.bundles)
            );
        }
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
}
