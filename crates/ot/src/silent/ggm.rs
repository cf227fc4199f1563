//! GGM trees as a punctured PRF (Goldreich-Goldwasser-Micali; the
//! "single-point" trees of Boyle et al., "Efficient Two-Round OT Extension
//! and Silent Non-Interactive Secure Computation", CCS 2019).
//!
//! The sender expands a random root into `2^depth` leaves; the receiver,
//! from one OT per level, learns every leaf but one, at a position `α` of
//! its choosing. At each level the sender offers, through the level's OT,
//! the XOR of all left children and the XOR of all right children; the
//! receiver takes the side off its path (choice bit `¬α_l`) and recovers
//! the one node of that side it cannot compute itself.
//!
//! The tree PRG is `G(s) = (H(τ_0, s), H(τ_1, s))` with `H(τ, x) =
//! π(π(x) ⊕ τ) ⊕ π(x)` the tweakable correlation-robust hash of fixed-key
//! AES ([`crate::aes_hash::tccr`]; Guo-Katz-Wang-Yu, S&P 2020): for a
//! uniform secret `s`, `H` under two distinct public tweaks is
//! pseudorandom, which is the PRG the GGM proof needs. The tweaks
//! ([`Tweaks`]) are unique per session, extension, part, tree, level and
//! side, so one query to `π` helps an adversary against one tree level
//! only: with a single untweaked hash (`π(x) ⊕ x` at offsets 0 and 1, as
//! before), every unknown node of every tree of every extension was a
//! target of the same permutation queries, and security fell by the log of
//! their number. `π(s)` is shared by both children: three AES calls per
//! node instead of four. A whole level is hashed in one batch, so
//! AES-NI/VAES pipelines stay full.

use rayon::prelude::*;

use crate::aes_hash::permute_many;
use crate::session::SessionId;

/// The tweaks of one part's trees: a 64-bit value unique to the session,
/// the extension and the part, then the tree, level and side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tweaks(u64);

impl Tweaks {
    /// The tweaks of part `part` of extension number `extension` (counted
    /// alike by both parties) in session `sid`.
    pub fn new(sid: &SessionId, extension: u64, part: usize) -> Self {
        let id = sid.derive(&format!("ggm tweaks {extension} {part}"));
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&id.0[..8]);
        Self(u64::from_le_bytes(prefix))
    }

    /// The left and right tweaks of level `level` of tree `tree`.
    fn level(self, tree: usize, level: usize) -> [u128; 2] {
        let base = u128::from(self.0) << 64 | (tree as u128) << 8 | (level as u128) << 1;
        [base, base | 1]
    }
}

/// Expands level `l` of `tree` in place under the level's `tweak`: on
/// entry `tree[..2^l]` holds the level's nodes, on return
/// `tree[..2^(l+1)]` holds their children (left child of node `j` at `2j`,
/// right at `2j + 1`). Returns the XOR of the left children and of the
/// right children. The receiver's `fix` corrects the level's nodes as
/// they are read, in the same pass.
fn expand_level(
    tree: &mut [u128],
    l: usize,
    tweak: [u128; 2],
    parents: &mut Vec<u128>,
    fix: Option<Fix>,
) -> [u128; 2] {
    parents.clear();
    match fix {
        None => parents.extend_from_slice(&tree[..1 << l]),
        Some(fix) => parents.extend(
            tree[..1 << l]
                .iter()
                .enumerate()
                .map(|(j, &x)| fix.apply(j, x)),
        ),
    }
    permute_many(parents);
    let children = &mut tree[..2 << l];
    for (pair, &p) in children.chunks_exact_mut(2).zip(parents.iter()) {
        pair[0] = p ^ tweak[0];
        pair[1] = p ^ tweak[1];
    }
    permute_many(children);
    let mut sums = [0, 0];
    for (pair, &p) in children.chunks_exact_mut(2).zip(parents.iter()) {
        pair[0] ^= p;
        pair[1] ^= p;
        sums = [sums[0] ^ pair[0], sums[1] ^ pair[1]];
    }
    sums
}

/// The receiver's correction of one level: node `path` (on its punctured
/// path, so computed from garbage) set to zero, and `value` XORed into its
/// sibling (the one node off the path computed from garbage).
#[derive(Clone, Copy)]
struct Fix {
    path: usize,
    value: u128,
}

impl Fix {
    /// Node `j` corrected. Applied to every node of the level with masks:
    /// `path` is the secret punctured position, so writing at it, or
    /// branching on it, would show it to whoever watches the cache.
    fn apply(self, j: usize, x: u128) -> u128 {
        (x & !equal(j, self.path)) ^ (equal(j, self.path ^ 1) & self.value)
    }
}

/// All ones if `a == b`, else zero, from arithmetic alone (no comparison
/// the compiler could turn into a branch): positions on the receiver's
/// punctured path are secret.
pub(crate) fn equal(a: usize, b: usize) -> u128 {
    let d = (a ^ b) as u64;
    let differ = (d | d.wrapping_neg()) >> 63;
    u128::from(differ ^ 1).wrapping_neg()
}

/// `a` if `pick` is 0, `b` if it is 1, by a mask.
pub(crate) fn select(pick: usize, a: u128, b: u128) -> u128 {
    a ^ (u128::from(pick as u64 & 1).wrapping_neg() & (a ^ b))
}

/// The sender's side: expands each root into its tree's `2^depth` leaves
/// (tree `i` at `leaves[i << depth ..]`), in parallel over trees, and
/// returns each tree's level sums, `[left, right]` per level, tree-major.
pub fn sender_expand(
    roots: &[u128],
    depth: usize,
    tweaks: Tweaks,
    leaves: &mut [u128],
) -> Vec<[u128; 2]> {
    assert_eq!(
        leaves.len(),
        roots.len() << depth,
        "one tree of leaves per root"
    );
    let mut sums = vec![[0u128; 2]; roots.len() * depth];
    leaves
        .par_chunks_mut(1 << depth)
        .zip(roots.par_iter())
        .zip(sums.par_chunks_mut(depth))
        .enumerate()
        .for_each_init(Vec::new, |parents, (i, ((tree, &root), sums))| {
            tree[0] = root;
            for (l, s) in sums.iter_mut().enumerate() {
                *s = expand_level(tree, l, tweaks.level(i, l), parents, None);
            }
        });
    sums
}

/// The receiver's side: rebuilds each tree from the sums it obtained, one
/// per level, for the side off its path (`off_path[i·depth + l]` is tree
/// `i`'s sum of level `l` on side `¬α_l`, where `α = alphas[i]` is read
/// from its top bit down). Every leaf but leaf `α` ends up equal to the
/// sender's (under the same `tweaks`); leaf `α` is set so that the tree's
/// leaves XOR to `totals[i]` (silent OT's receiver puts its share of the
/// noise there).
pub fn receiver_expand(
    alphas: &[usize],
    off_path: &[u128],
    totals: &[u128],
    depth: usize,
    tweaks: Tweaks,
    leaves: &mut [u128],
) {
    assert_eq!(
        leaves.len(),
        alphas.len() << depth,
        "one tree of leaves per point"
    );
    assert_eq!(
        off_path.len(),
        alphas.len() * depth,
        "one sum per tree level"
    );
    assert_eq!(totals.len(), alphas.len(), "one total per tree");
    leaves
        .par_chunks_mut(1 << depth)
        .zip(alphas.par_iter())
        .zip(off_path.par_chunks(depth))
        .zip(totals.par_iter())
        .enumerate()
        .for_each_init(
            Vec::new,
            |parents, (i, (((tree, &alpha), sums), &total))| {
                // The root is unknown: a placeholder whose descendants on
                // the path are garbage, corrected level by level as the
                // next level reads its parents (the leaves after the loop).
                tree[0] = 0;
                let (mut fix, mut leaf_sum) = (None, 0);
                for (l, &sum) in sums.iter().enumerate() {
                    let both = expand_level(tree, l, tweaks.level(i, l), parents, fix);
                    let path = alpha >> (depth - 1 - l);
                    // The sibling is the only node of its side computed
                    // from the placeholder: take its garbage value out of
                    // the side's sum and put in what the sender's sum says.
                    let off_path = select((path & 1) ^ 1, both[0], both[1]);
                    fix = Some(Fix {
                        path,
                        value: sum ^ off_path,
                    });
                    leaf_sum = both[0] ^ both[1];
                }
                if let Some(fix) = fix {
                    finish_leaves(tree, fix, leaf_sum ^ total);
                }
            },
        );
}

/// The leaves' one pass: the last level's `fix` applied, and leaf `α`
/// (its `path`, holding garbage `g`) set so that the leaves XOR to
/// `target = total ⊕ raw`, `raw` being the XOR of the leaves as
/// expanded. After the fix the others XOR to `raw ⊕ g ⊕ fix.value`, so
/// leaf `α` must become `g ⊕ target ⊕ fix.value`: one XOR at `α`, by a
/// mask like the fix, instead of a fold and a second masked sweep.
fn finish_leaves(tree: &mut [u128], fix: Fix, target: u128) {
    let at_alpha = target ^ fix.value;
    for (j, x) in tree.iter_mut().enumerate() {
        *x ^= (equal(j, fix.path) & at_alpha) ^ (equal(j, fix.path ^ 1) & fix.value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const TWEAKS: Tweaks = Tweaks(7);

    #[test]
    fn equal_roots_give_unrelated_trees_under_other_tweaks() {
        // The same root in another tree, part, extension or session must
        // not give the same leaves: the multi-target bound rests on it.
        let sid = SessionId::new(b"ggm tweak test");
        let tweaks = [
            Tweaks::new(&sid, 0, 0),
            Tweaks::new(&sid, 1, 0),
            Tweaks::new(&sid, 0, 1),
            Tweaks::new(&SessionId::new(b"another"), 0, 0),
        ];
        let mut seen = Vec::new();
        for t in tweaks {
            let mut leaves = vec![0u128; 2 << 4];
            sender_expand(&[42, 42], 4, t, &mut leaves);
            assert_ne!(leaves[..16], leaves[16..], "trees 0 and 1 alike");
            seen.extend_from_slice(&leaves);
        }
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), n);
    }

    #[test]
    fn masks_compare_and_select_without_branches() {
        let values = [
            0usize,
            1,
            2,
            3,
            255,
            256,
            1 << 31,
            usize::MAX - 1,
            usize::MAX,
        ];
        for &a in &values {
            for &b in &values {
                assert_eq!(equal(a, b), if a == b { u128::MAX } else { 0 }, "{a} {b}");
            }
        }
        assert_eq!(select(0, 5, 9), 5);
        assert_eq!(select(1, 5, 9), 9);
    }

    #[test]
    fn receiver_learns_every_leaf_but_the_punctured_one() {
        let mut rng = StdRng::seed_from_u64(3);
        for depth in [1, 2, 5, 11] {
            let trees = 9;
            let roots: Vec<u128> = (0..trees).map(|_| rng.gen()).collect();
            let mut full = vec![0u128; trees << depth];
            let sums = sender_expand(&roots, depth, TWEAKS, &mut full);
            let alphas: Vec<usize> = (0..trees).map(|_| rng.gen_range(0..1 << depth)).collect();
            let off_path: Vec<u128> = alphas
                .iter()
                .enumerate()
                .flat_map(|(i, &a)| {
                    let sums = &sums[i * depth..(i + 1) * depth];
                    (0..depth).map(move |l| sums[l][usize::from(a >> (depth - 1 - l) & 1 == 0)])
                })
                .collect();
            // Each tree's leaves XOR to the sender's plus an offset, which
            // lands at leaf `α` alone.
            let offsets: Vec<u128> = (0..trees).map(|_| rng.gen()).collect();
            let totals: Vec<u128> = full
                .chunks(1 << depth)
                .zip(&offsets)
                .map(|(tree, o)| tree.iter().fold(*o, |a, x| a ^ x))
                .collect();
            let mut punctured = vec![u128::MAX; trees << depth];
            receiver_expand(&alphas, &off_path, &totals, depth, TWEAKS, &mut punctured);
            for (i, &a) in alphas.iter().enumerate() {
                for j in 0..1 << depth {
                    let (x, y) = (full[(i << depth) + j], punctured[(i << depth) + j]);
                    match j == a {
                        true => assert_eq!(y, x ^ offsets[i], "tree {i} leaf {j} (punctured)"),
                        false => assert_eq!(x, y, "tree {i} leaf {j}, depth {depth}"),
                    }
                }
            }
        }
    }

    #[test]
    fn leaves_are_distinct_and_the_sums_are_their_halves() {
        let mut leaves = vec![0u128; 1 << 10];
        let sums = sender_expand(&[42], 10, TWEAKS, &mut leaves);
        let last = sums[9];
        let even = leaves.iter().step_by(2).fold(0, |a, x| a ^ x);
        let odd = leaves.iter().skip(1).step_by(2).fold(0, |a, x| a ^ x);
        assert_eq!(last, [even, odd]);
        let mut sorted = leaves.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), leaves.len());
    }
}
