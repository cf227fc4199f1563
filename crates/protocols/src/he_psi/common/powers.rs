//! Which powers of the client's encrypted items the server computes, and how.
//!
//! The client encrypts a few *source* powers `y^s` of its items; the server
//! needs every power a matching polynomial uses (paper §3.1, design note
//! section 1 step 9) and makes each missing one as a product of two powers
//! it already has. Each product costs a ciphertext multiplication and a
//! relinearization, and the *depth* (longest chain of products) decides how
//! much noise budget is used, so the plan picks, for every power, the
//! product of least depth. The plan depends only on public parameters and is
//! computed once per database.
//!
//! How a polynomial's terms are then grouped on these powers is
//! `grouping.rs`.
//!
//! Good source sets are extremal postage-stamp bases (paper Definition 1):
//! `k` numbers containing 1 such that every exponent up to `n` is a sum of at
//! most `h` of them, with `n` as large as possible. A server can then reach
//! all powers up to `n` in depth `ceil(log2 h)`. The bases psikit uses are
//! tabled in `select/plans.rs`; the tests here check them with an
//! exhaustive search for small `k` and `h`.

use std::collections::{BTreeSet, HashMap};

use crate::error::Error;
use crate::he_psi::params::PsiParams;

type Result<T> = std::result::Result<T, Error>;

/// Most powers a plan may need. A plan beyond this is far outside anything
/// that can be evaluated per query (each power is a ciphertext product), and
/// the bound keeps planning time and memory small for any input.
pub const MAX_PLAN_POWERS: usize = 1 << 14;

/// One ciphertext product: `y^target = y^left * y^right`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerStep {
    /// Exponent produced, `left + right`.
    pub target: u32,
    /// The smaller factor's exponent.
    pub left: u32,
    /// The larger factor's exponent.
    pub right: u32,
    /// Products on the longest chain from a source to `target`.
    pub depth: u32,
}

/// The ordered products that turn the source powers into every power a
/// query evaluation needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowersPlan {
    sources: Vec<u32>,
    ps_low_degree: u32,
    max_degree: u32,
    needed: Vec<u32>,
    steps: Vec<PowerStep>,
    depths: HashMap<u32, u32>,
    max_depth: u32,
}

fn invalid(message: String) -> Error {
    Error::Params(message)
}

impl PowersPlan {
    /// Plans the powers for polynomials of degree `max_degree` (`B`).
    ///
    /// Needed exponents: `1..=B` when `ps_low_degree` is 0; otherwise, with
    /// `L = ps_low_degree`, `1..=L` and the multiples of `L + 1` up to `B`
    /// (Paterson-Stockmeyer). They are made in increasing order, each as a
    /// product of two already known exponents with the least resulting depth
    /// (sources have depth 0); ties go to the smallest factor, so the plan is
    /// deterministic. Every source must itself be a needed exponent, as APSI
    /// requires of its query powers.
    pub fn new(sources: &[u32], ps_low_degree: u32, max_degree: u32) -> Result<Self> {
        let needed = needed_exponents(ps_low_degree, max_degree)?;
        let sources = checked_sources(sources, ps_low_degree, max_degree)?;
        let mut plan = Self {
            depths: sources.iter().map(|&s| (s, 0)).collect(),
            sources,
            ps_low_degree,
            max_degree,
            needed,
            steps: Vec::new(),
            max_depth: 0,
        };
        plan.fill()?;
        Ok(plan)
    }

    /// The plan for a parameter set's query powers and bin size.
    pub fn from_params(params: &PsiParams) -> Result<Self> {
        Self::new(
            &params.query.query_powers,
            params.query.ps_low_degree,
            params.table.max_items_per_bin,
        )
    }

    /// Walks the needed exponents upwards; `by_depth[d]` lists the known
    /// exponents of depth `d` in increasing order, which is what makes the
    /// first split found a least-depth one with the smallest factor.
    fn fill(&mut self) -> Result<()> {
        let mut by_depth: Vec<Vec<u32>> = vec![self.sources.clone()];
        for i in 0..self.needed.len() {
            let target = self.needed[i];
            if self.depths.contains_key(&target) {
                continue;
            }
            let step = self.best_split(target, &by_depth).ok_or_else(|| {
                invalid(format!(
                    "query powers: exponent {target} is not a sum of two earlier powers \
                     (sources {:?}; they must contain 1)",
                    self.sources
                ))
            })?;
            let depth = step.depth as usize;
            if by_depth.len() <= depth {
                by_depth.resize(depth + 1, Vec::new());
            }
            by_depth[depth].push(target);
            self.depths.insert(target, step.depth);
            self.max_depth = self.max_depth.max(step.depth);
            self.steps.push(step);
        }
        Ok(())
    }

    /// The least-depth way to make `target`: the first factor `a` of depth
    /// `d` (tried in increasing `d`) whose cofactor is known with depth at
    /// most `d` gives depth `d + 1`, and no split can do better.
    fn best_split(&self, target: u32, by_depth: &[Vec<u32>]) -> Option<PowerStep> {
        for (d, known) in by_depth.iter().enumerate() {
            for &a in known.iter().take_while(|&&a| a < target) {
                let b = target - a;
                if self.depths.get(&b).is_some_and(|&db| db as usize <= d) {
                    return Some(PowerStep {
                        target,
                        left: a.min(b),
                        right: a.max(b),
                        depth: d as u32 + 1,
                    });
                }
            }
        }
        None
    }

    /// The source exponents, sorted and without duplicates.
    pub fn sources(&self) -> &[u32] {
        &self.sources
    }

    /// Every exponent the evaluation needs, in increasing order.
    pub fn needed(&self) -> &[u32] {
        &self.needed
    }

    /// The products to perform, in an order where both factors of a step
    /// are sources or targets of earlier steps.
    pub fn steps(&self) -> &[PowerStep] {
        &self.steps
    }

    /// Depth of a known exponent (0 for sources), `None` if the plan does not
    /// produce it.
    pub fn depth(&self, exponent: u32) -> Option<u32> {
        self.depths.get(&exponent).copied()
    }

    /// The sources and every factor of a product: the powers that other
    /// powers are made from.
    pub fn kept(&self) -> BTreeSet<u32> {
        let factors = self.steps.iter().flat_map(|s| [s.left, s.right]);
        self.sources.iter().copied().chain(factors).collect()
    }

    /// The largest depth of any needed exponent.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// Paterson-Stockmeyer low degree the plan was made for (0: none).
    pub fn ps_low_degree(&self) -> u32 {
        self.ps_low_degree
    }

    /// Polynomial degree `B` the plan was made for.
    pub fn max_degree(&self) -> u32 {
        self.max_degree
    }
}

/// Whether `e` is an exponent the evaluation uses (see [`PowersPlan::new`]).
fn is_needed(e: u32, ps_low_degree: u32, max_degree: u32) -> bool {
    let in_range = (1..=max_degree).contains(&e);
    in_range
        && (ps_low_degree == 0
            || e <= ps_low_degree
            || u64::from(e) % (u64::from(ps_low_degree) + 1) == 0)
}

fn needed_exponents(ps_low_degree: u32, max_degree: u32) -> Result<Vec<u32>> {
    if max_degree == 0 {
        return Err(invalid(
            "query powers: the polynomial degree must be at least 1".into(),
        ));
    }
    if ps_low_degree > max_degree {
        return Err(invalid(format!(
            "query powers: ps_low_degree ({ps_low_degree}) exceeds the polynomial degree \
             ({max_degree})"
        )));
    }
    let count = if ps_low_degree == 0 {
        u64::from(max_degree)
    } else {
        u64::from(ps_low_degree) + u64::from(max_degree) / (u64::from(ps_low_degree) + 1)
    };
    if count > MAX_PLAN_POWERS as u64 {
        return Err(invalid(format!(
            "query powers: the evaluation would need {count} powers, more than the \
             {MAX_PLAN_POWERS} psikit plans"
        )));
    }
    if ps_low_degree == 0 {
        return Ok((1..=max_degree).collect());
    }
    let step = u64::from(ps_low_degree) + 1;
    let multiples = (1..=u64::from(max_degree) / step).map(|i| i * step);
    let high = multiples.filter_map(|e| u32::try_from(e).ok());
    Ok((1..=ps_low_degree).chain(high).collect())
}

fn checked_sources(sources: &[u32], ps_low_degree: u32, max_degree: u32) -> Result<Vec<u32>> {
    let mut sorted = sources.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return Err(invalid("query powers: no source powers given".into()));
    }
    match sorted
        .iter()
        .find(|&&s| !is_needed(s, ps_low_degree, max_degree))
    {
        Some(s) => Err(invalid(format!(
            "query powers: source {s} is not a needed exponent (1..={max_degree}; with \
             ps_low_degree {ps_low_degree} > 0, sources above it must be multiples of \
             ps_low_degree + 1)"
        ))),
        None => Ok(sorted),
    }
}

/// The largest `n` such that every number in `1..=n` is a sum of at most `h`
/// elements of `basis` (repetition allowed); 0 if 1 is not such a sum.
///
/// Work and memory grow with the answer, which is at most `h * max(basis)`.
#[cfg(test)]
pub(crate) fn stamp_reach(basis: &[u32], h: u32) -> u32 {
    reach_with(basis, h, &mut Vec::new())
}

/// [`stamp_reach`] with a caller-provided buffer, so the search below does
/// not allocate per candidate. `fewest[v]` is the least number of basis
/// elements summing to `v`, filled until the first `v` needing more than `h`.
#[cfg(test)]
fn reach_with(basis: &[u32], h: u32, fewest: &mut Vec<u32>) -> u32 {
    fewest.clear();
    fewest.push(0);
    loop {
        let v = fewest.len();
        let best = basis
            .iter()
            .filter_map(|&a| v.checked_sub(a as usize).filter(|_| a > 0))
            .map(|rest| fewest[rest])
            .min();
        match best {
            Some(count) if count < h => fewest.push(count + 1),
            _ => return u32::try_from(v - 1).unwrap_or(u32::MAX),
        }
    }
}

/// An extremal postage-stamp basis: `k` source exponents, starting with 1,
/// whose sums of at most `h` terms cover `1..=reach` with `reach` as large
/// as possible. Returns the basis and its reach; ties go to the
/// lexicographically smallest basis.
///
/// The search is exhaustive, pruned by the fact that in a useful basis each
/// element is at most one more than the reach of the smaller ones (a larger
/// one leaves a gap no later element can fill). That is fast for the sizes
/// psikit uses (for example `k = 5, h = 4`, reach 70, takes well under a
/// second) but grows quickly with `k`. Published tables of extremal bases
/// (Challis and Robinson, reference 12 of the paper) can replace it for larger
/// instances; any basis works for correctness, only cost differs.
///
/// With `k = 0` or `h = 0` nothing is reachable and the reach is 0.
#[cfg(test)]
pub(crate) fn postage_stamp_basis(k: usize, h: u32) -> (Vec<u32>, u32) {
    if k == 0 || h == 0 {
        return ((1..).take(k).collect(), 0);
    }
    let mut search = StampSearch {
        k,
        h,
        best: (Vec::new(), 0),
        fewest: Vec::new(),
    };
    search.extend(&mut vec![1]);
    search.best
}

#[cfg(test)]
struct StampSearch {
    k: usize,
    h: u32,
    best: (Vec<u32>, u32),
    fewest: Vec<u32>,
}

#[cfg(test)]
impl StampSearch {
    fn extend(&mut self, basis: &mut Vec<u32>) {
        let reach = reach_with(basis, self.h, &mut self.fewest);
        if basis.len() == self.k {
            if reach > self.best.1 {
                self.best = (basis.clone(), reach);
            }
            return;
        }
        let last = basis.last().copied().unwrap_or(0);
        for next in last + 1..=reach.saturating_add(1) {
            basis.push(next);
            self.extend(basis);
            basis.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the plan's invariants: every step multiplies two exponents
    /// known before it, with the depth it claims, and the known exponents
    /// are exactly the needed ones.
    fn assert_valid(plan: &PowersPlan) {
        let mut known: HashMap<u32, u32> = plan.sources().iter().map(|&s| (s, 0)).collect();
        for step in plan.steps() {
            assert_eq!(step.left + step.right, step.target, "{step:?}");
            assert!(step.left <= step.right);
            let dl = known[&step.left];
            let dr = known[&step.right];
            assert_eq!(step.depth, dl.max(dr) + 1, "{step:?}");
            assert!(known.insert(step.target, step.depth).is_none(), "{step:?}");
        }
        let mut got: Vec<u32> = known.keys().copied().collect();
        got.sort_unstable();
        assert_eq!(got, plan.needed());
        let deepest = known.values().copied().max().unwrap_or(0);
        assert_eq!(plan.max_depth(), deepest);
        for (e, d) in known {
            assert_eq!(plan.depth(e), Some(d));
        }
    }

    /// Without Paterson-Stockmeyer the best depth for `e` is
    /// `ceil(log2 m)` with `m` the fewest sources summing to `e`.
    fn assert_depth_optimal(plan: &PowersPlan) {
        let mut fewest = Vec::new();
        reach_with(plan.sources(), plan.max_degree(), &mut fewest);
        assert!(fewest.len() > plan.max_degree() as usize);
        for &e in plan.needed() {
            let m = fewest[e as usize];
            let optimal = m.next_power_of_two().trailing_zeros();
            assert_eq!(plan.depth(e), Some(optimal), "exponent {e}");
        }
    }

    fn message(result: Result<PowersPlan>) -> String {
        let text = result.expect_err("must be rejected").to_string();
        assert!(!text.contains('\n'), "{text}");
        text
    }

    #[test]
    fn paper_figure_1_basis_reaches_26_in_depth_2() {
        let plan = PowersPlan::new(&[1, 5, 8], 0, 26).unwrap();
        assert_valid(&plan);
        assert_depth_optimal(&plan);
        assert_eq!(plan.max_depth(), 2);
        assert_eq!(plan.steps().len(), 23);
        assert_eq!(plan.needed(), (1..=26).collect::<Vec<_>>());
        // 26 needs four sources (8 + 8 + 5 + 5): two depth-1 halves, and
        // the smallest such first factor is 10 = 5 + 5 (with 16 = 8 + 8).
        let last = plan.steps().last().unwrap();
        assert_eq!((last.target, last.left, last.right), (26, 10, 16));
        assert_eq!((plan.depth(10), plan.depth(16)), (Some(1), Some(1)));
        // 27 needs five sources, one level more.
        assert_eq!(PowersPlan::new(&[1, 5, 8], 0, 27).unwrap().max_depth(), 3);
    }

    #[test]
    fn binary_windowing_also_reaches_26_in_depth_2() {
        let plan = PowersPlan::new(&[1, 2, 4, 8, 16], 0, 26).unwrap();
        assert_valid(&plan);
        assert_eq!(plan.max_depth(), 2);
    }

    #[test]
    fn apsi_parameter_files_give_valid_plans() {
        // The "cmp" and 256K files cover 1..=B with sums of two sources.
        for (text, depth) in [
            (include_str!("../apsi-params/1M-1024-cmp.json"), 1),
            (include_str!("../apsi-params/1M-1-32.json"), 2),
            (include_str!("../apsi-params/256K-1024.json"), 1),
        ] {
            let params = PsiParams::from_apsi_json(text).unwrap();
            let plan = PowersPlan::from_params(&params).unwrap();
            assert_valid(&plan);
            assert_depth_optimal(&plan);
            assert_eq!(plan.max_depth(), depth);
            let b = params.table.max_items_per_bin as usize;
            assert_eq!(plan.steps().len(), b - params.query.query_powers.len());
        }
    }

    #[test]
    fn paterson_stockmeyer_plan_needs_low_powers_and_multiples() {
        let plan = PowersPlan::new(&[1, 5, 8, 27, 135], 26, 160).unwrap();
        assert_valid(&plan);
        let mut expected: Vec<u32> = (1..=26).collect();
        expected.extend([27, 54, 81, 108, 135]);
        assert_eq!(plan.needed(), expected);
        assert_eq!(plan.max_depth(), 2);
        assert_eq!(plan.depth(54), Some(1));
        assert_eq!(plan.depth(108), Some(2));
        // The paper's example: {27, 135, 216} on top reaches 26 * 27 + 26 = 728.
        let plan = PowersPlan::new(&[1, 5, 8, 27, 135, 216], 26, 728).unwrap();
        assert_valid(&plan);
        assert_eq!(plan.needed().last(), Some(&702));
        assert_eq!(plan.max_depth(), 2);
    }

    #[test]
    fn plan_rejects_bad_sources_and_degrees() {
        assert!(message(PowersPlan::new(&[2, 3], 0, 10)).contains("exponent 1"));
        assert!(message(PowersPlan::new(&[], 0, 10)).contains("no source powers"));
        assert!(message(PowersPlan::new(&[0, 1], 0, 10)).contains("source 0"));
        assert!(message(PowersPlan::new(&[1, 11], 0, 10)).contains("source 11"));
        assert!(message(PowersPlan::new(&[1, 5, 30], 26, 100)).contains("source 30"));
        assert!(message(PowersPlan::new(&[1], 11, 10)).contains("ps_low_degree (11)"));
        assert!(message(PowersPlan::new(&[1], 0, 0)).contains("at least 1"));
        assert!(message(PowersPlan::new(&[1], 0, u32::MAX)).contains("powers"));
        // Paterson-Stockmeyer keeps huge degrees plannable.
        let plan = PowersPlan::new(&[1, 1 << 12], (1 << 12) - 1, 1 << 24).unwrap();
        assert_eq!(plan.needed().len(), (1 << 12) - 1 + (1 << 12));
    }

    #[test]
    fn plan_accepts_unsorted_duplicate_sources() {
        let a = PowersPlan::new(&[8, 1, 5, 5], 0, 26).unwrap();
        assert_eq!(a, PowersPlan::new(&[1, 5, 8], 0, 26).unwrap());
        assert_eq!(a.sources(), [1, 5, 8]);
    }

    #[test]
    fn reach_of_known_bases() {
        assert_eq!(stamp_reach(&[1, 3], 2), 4);
        assert_eq!(stamp_reach(&[1, 2], 2), 4);
        assert_eq!(stamp_reach(&[1, 5, 8], 4), 26);
        // APSI's 16M-1024.json low sources (ps_low_degree 44).
        assert_eq!(stamp_reach(&[1, 3, 11, 18], 4), 44);
        assert_eq!(stamp_reach(&[2, 3], 5), 0);
        assert_eq!(stamp_reach(&[1, 5], 0), 0);
        assert_eq!(stamp_reach(&[1], 7), 7);
    }

    #[test]
    fn search_finds_extremal_bases_from_the_literature() {
        // n(h, k) for h = 2, 3, 4 (OEIS A001212, A001213, A001214).
        let known = [
            (1, 4, 4),
            (2, 2, 4),
            (3, 2, 8),
            (4, 2, 12),
            (5, 2, 16),
            (2, 3, 7),
            (3, 3, 15),
            (4, 3, 24),
            (2, 4, 10),
            (4, 4, 44),
            (5, 4, 70),
        ];
        for (k, h, reach) in known {
            let (basis, got) = postage_stamp_basis(k, h);
            assert_eq!(got, reach, "k {k} h {h}: {basis:?}");
            assert_eq!(basis.len(), k);
            assert_eq!(basis[0], 1);
            assert!(basis.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(stamp_reach(&basis, h), reach);
        }
        // The paper: {1, 5, 8} is the unique extremal basis for h 4, k 3.
        assert_eq!(postage_stamp_basis(3, 4), (vec![1, 5, 8], 26));
        assert_eq!(postage_stamp_basis(0, 4), (vec![], 0));
        assert_eq!(postage_stamp_basis(2, 0), (vec![1, 2], 0));
    }

    #[test]
    fn stamp_bases_give_plans_of_log_depth() {
        for (k, h) in [(3, 2), (4, 4), (3, 8)] {
            let (basis, reach) = postage_stamp_basis(k, h);
            let plan = PowersPlan::new(&basis, 0, reach).unwrap();
            assert_valid(&plan);
            assert_eq!(plan.max_depth(), h.trailing_zeros(), "{basis:?}");
        }
    }
}
