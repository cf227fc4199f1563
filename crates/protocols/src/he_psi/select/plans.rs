//! Source powers and plans: the candidate powers plans for a bin size
//! (postage-stamp bases, with and without Paterson-Stockmeyer), reduced to
//! the shape the noise and cost models need.

use crate::he_psi::common::cost::PlanWork;
use crate::he_psi::common::grouping::Grouping;
use crate::he_psi::common::powers::PowersPlan;

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
pub(super) struct PlanShape {
    pub(super) sources: Vec<u32>,
    /// `ps_low_degree` (0: no Paterson-Stockmeyer).
    pub(super) low: u32,
    /// Deepest power the dot products read (`1..=L`, or all without PS).
    pub(super) depth_low: u32,
    /// Deepest multiple of `L + 1` (PS only).
    pub(super) depth_high: u32,
    /// The operations the evaluator performs for this plan.
    pub(super) work: PlanWork,
    /// The same with the leaves grouped, per prefix of the groups.
    pub(super) leaf_groups: Vec<PlanWork>,
    /// How the sources were chosen, for the explanation.
    pub(super) origin: String,
}

impl PlanShape {
    pub(super) fn trivial() -> Self {
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

    pub(super) fn from_plan(plan: &PowersPlan, origin: String) -> Self {
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
pub(super) fn plans_for(degree: u32) -> Vec<PlanShape> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::he_psi::common::powers::{postage_stamp_basis, stamp_reach};

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
}
