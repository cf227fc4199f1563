//! How the sender evaluates a polynomial on the powers a [`PowersPlan`]
//! computes: which terms go together as one product (Paterson-Stockmeyer's
//! blocks, or the plan's leaves grouped under a kept multiplier) and which
//! are summed directly. A plan decides the powers; a grouping decides the
//! products on them, and the cost model (`cost.rs`) and the selection
//! price each plan under each of its groupings.

use crate::he_psi::common::powers::PowersPlan;

/// A group of a polynomial's terms evaluated as one product:
/// `y^multiplier · Σ c_j·y^b` over the members `(j, b)`, `j = multiplier + b`
/// (`b = 0` stands for the constant 1). Paterson-Stockmeyer's blocks are
/// such groups, and so are the leaf groups of [`Grouping::leaves`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub multiplier: u32,
    /// `(j, b)` in increasing `j`.
    pub members: Vec<(u32, u32)>,
}

/// How the sender evaluates a polynomial on a plan's powers: the terms of
/// `groups` as one product each (summed before a single scale-down, see
/// `eval::evaluate`), every other term directly in one dot product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouping {
    groups: Vec<Group>,
    /// `grouped[j]`: whether term `j` belongs to a group.
    grouped: Vec<bool>,
    /// `two_parts[e]`: whether `y^e` multiplies a group or is a cofactor
    /// in one (lifted or dotted into a lifted sum, so relinearized).
    two_parts: Vec<bool>,
}

impl Grouping {
    /// The grouping a plan's own shape asks for: Paterson-Stockmeyer's
    /// blocks `i·(L+1) + 0..=L` for `i >= 1` when `ps_low_degree = L > 0`,
    /// otherwise none (every term direct).
    pub fn of_plan(plan: &PowersPlan) -> Self {
        let low = plan.ps_low_degree();
        if low == 0 {
            return Self::from_groups(plan, Vec::new());
        }
        let block = low + 1;
        let groups = (1..=plan.max_degree() / block)
            .map(|i| {
                let multiplier = i * block;
                let top = plan.max_degree().min(multiplier + low);
                let members = (multiplier..=top).map(|j| (j, j - multiplier)).collect();
                Group {
                    multiplier,
                    members,
                }
            })
            .collect();
        Self::from_groups(plan, groups)
    }

    /// For a plan without Paterson-Stockmeyer: the *leaves* (powers the plan
    /// makes as a product and uses in no other product) grouped by a shared
    /// factor, so that a leaf `y^(a+b)` is never computed: its term
    /// `c·y^(a+b)` becomes `y^a · (c·y^b + ...)`. Each polynomial then pays
    /// one lifted inner sum per group instead of each query paying one
    /// product per leaf, which is cheaper when a query has few polynomials
    /// per bundle index (`cost::QueryWork` decides).
    ///
    /// `a` and `b` are kept powers (sources or factors of products) with
    /// `max(depth(a), depth(b)) < depth(a + b)`, so no term gets deeper
    /// than in the plan (the plan's own split qualifies, so every leaf has
    /// one). Multipliers are chosen greedily, each covering the most leaves
    /// not yet covered (ties to the smallest), so groups come largest
    /// first. `None` for Paterson-Stockmeyer plans and plans without leaves.
    pub fn leaves(plan: &PowersPlan) -> Option<Self> {
        if plan.ps_low_degree() > 0 {
            return None;
        }
        let kept = plan.kept();
        let depth = |e: u32| plan.depth(e).unwrap_or(u32::MAX);
        let mut uncovered: Vec<u32> = plan
            .needed()
            .iter()
            .copied()
            .filter(|e| !kept.contains(e))
            .collect();
        if uncovered.is_empty() {
            return None;
        }
        let splits = |a: u32, j: u32| {
            let b = j.checked_sub(a).filter(|b| *b > 0 && kept.contains(b))?;
            (depth(a).max(depth(b)) < depth(j)).then_some(b)
        };
        let mut groups = Vec::new();
        while !uncovered.is_empty() {
            let best = kept
                .iter()
                .map(|&a| {
                    (
                        uncovered
                            .iter()
                            .filter(|&&j| splits(a, j).is_some())
                            .count(),
                        a,
                    )
                })
                .max_by_key(|&(count, a)| (count, std::cmp::Reverse(a)))
                .filter(|&(count, _)| count > 0)?;
            let a = best.1;
            let mut members = Vec::new();
            uncovered.retain(|&j| match splits(a, j) {
                Some(b) => {
                    members.push((j, b));
                    false
                }
                None => true,
            });
            groups.push(Group {
                multiplier: a,
                members,
            });
        }
        Some(Self::from_groups(plan, groups))
    }

    /// The first `count` groups of [`Grouping::leaves`]: small groups
    /// cost more per polynomial than computing their leaves once per query,
    /// so the cheapest grouping for a query is usually such a prefix
    /// (`cost::QueryWork` picks it). The leaves of dropped groups are
    /// computed as in a plan without groups.
    pub fn leaf_prefixes(plan: &PowersPlan) -> Vec<Self> {
        let Some(all) = Self::leaves(plan) else {
            return Vec::new();
        };
        (1..=all.groups.len())
            .map(|count| Self::from_groups(plan, all.groups[..count].to_vec()))
            .collect()
    }

    fn from_groups(plan: &PowersPlan, groups: Vec<Group>) -> Self {
        let size = plan.max_degree() as usize + 1;
        let (mut grouped, mut two_parts) = (vec![false; size], vec![false; size]);
        for g in &groups {
            two_parts[g.multiplier as usize] = true;
            for &(j, b) in &g.members {
                grouped[j as usize] = true;
                two_parts[b as usize] = true;
            }
        }
        Self {
            groups,
            grouped,
            two_parts,
        }
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// Whether term `j` is evaluated inside a group.
    pub fn is_grouped(&self, j: u32) -> bool {
        self.grouped.get(j as usize).copied().unwrap_or(false)
    }

    /// Whether `e` multiplies a group (it is lifted once per query).
    pub fn is_multiplier(&self, e: u32) -> bool {
        self.groups.iter().any(|g| g.multiplier == e)
    }

    /// Whether `y^e` must have 2 parts: a multiplier or a cofactor of a
    /// group (other powers that no product uses may stay at 3).
    pub fn needs_two_parts(&self, e: u32) -> bool {
        self.two_parts.get(e as usize).copied().unwrap_or(false)
    }

    /// Whether the plan's product making `y^e` is skipped: a grouped term
    /// that multiplies no group (a grouped leaf) is never computed.
    pub fn skips(&self, e: u32) -> bool {
        self.is_grouped(e) && !self.is_multiplier(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::he_psi::params::PsiParams;

    /// Every grouped term `j` is `multiplier + b` once, with the
    /// multiplier and a nonzero `b` kept powers, no deeper than the plan
    /// made `j`; the leaves are exactly the grouped terms.
    fn assert_leaf_groups(plan: &PowersPlan) -> Grouping {
        let grouping = Grouping::leaves(plan).expect("the plan has leaves");
        let kept = plan.kept();
        let mut seen = Vec::new();
        for g in grouping.groups() {
            assert!(kept.contains(&g.multiplier) && grouping.is_multiplier(g.multiplier));
            for &(j, b) in &g.members {
                assert_eq!(g.multiplier + b, j);
                assert!(b > 0 && kept.contains(&b), "{j} = {} + {b}", g.multiplier);
                let depth = plan.depth(g.multiplier).max(plan.depth(b)).unwrap();
                assert!(depth < plan.depth(j).unwrap(), "{j}");
                assert!(grouping.is_grouped(j) && grouping.skips(j));
                seen.push(j);
            }
        }
        seen.sort_unstable();
        let leaves: Vec<u32> = plan
            .needed()
            .iter()
            .copied()
            .filter(|e| !kept.contains(e))
            .collect();
        assert_eq!(seen, leaves);
        for &e in &kept {
            assert!(!grouping.skips(e), "kept power {e} must be computed");
        }
        grouping
    }

    #[test]
    fn leaf_groups_cover_every_leaf_once_without_extra_depth() {
        let plan = PowersPlan::new(&[1, 5, 8], 0, 26).unwrap();
        assert_leaf_groups(&plan);
        for text in [
            include_str!("../apsi-params/1M-1024-cmp.json"),
            include_str!("../apsi-params/1M-1-32.json"),
        ] {
            let params = PsiParams::from_apsi_json(text).unwrap();
            let plan = PowersPlan::from_params(&params).unwrap();
            let grouping = assert_leaf_groups(&plan);
            // Far fewer groups than leaves: that is the saving.
            let leaves: usize = grouping.groups().iter().map(|g| g.members.len()).sum();
            assert!(
                grouping.groups().len() * 4 < leaves,
                "{:?}",
                grouping.groups().len()
            );
        }
        // Nothing to group: all sources, or Paterson-Stockmeyer.
        assert!(Grouping::leaves(&PowersPlan::new(&[1, 2, 3], 0, 3).unwrap()).is_none());
        let ps = PowersPlan::new(&[1, 5, 8, 27, 135], 26, 160).unwrap();
        assert!(Grouping::leaves(&ps).is_none());
    }

    #[test]
    fn paterson_stockmeyer_grouping_is_its_blocks() {
        let plan = PowersPlan::new(&[1, 5, 8, 27, 135], 26, 160).unwrap();
        let grouping = Grouping::of_plan(&plan);
        let multipliers: Vec<u32> = grouping.groups().iter().map(|g| g.multiplier).collect();
        assert_eq!(multipliers, [27, 54, 81, 108, 135]);
        assert_eq!(grouping.groups()[0].members[0], (27, 0));
        assert_eq!(grouping.groups()[4].members.last(), Some(&(160, 25)));
        assert!((0..=26).all(|j| !grouping.is_grouped(j)));
        assert!((27..=160).all(|j| grouping.is_grouped(j)));
        assert!(plan.needed().iter().all(|&e| !grouping.skips(e)));
        let plain = PowersPlan::new(&[1, 5, 8], 0, 26).unwrap();
        assert!(Grouping::of_plan(&plain).groups().is_empty());
    }
}
