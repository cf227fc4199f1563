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
//! The tree PRG is `G(s) = (H(s), H(s ⊕ 1))` with `H(x) = π(x) ⊕ x` the
//! correlation-robust hash of fixed-key AES ([`crate::aes_hash::cr`]): for a
//! uniform secret `s`, `H` at the public offsets 0 and 1 is pseudorandom
//! (Guo-Katz-Wang-Yu 2020), which is the PRG the GGM proof needs. A whole
//! level is hashed in one batch, so AES-NI/VAES pipelines stay full.

use rayon::prelude::*;

use crate::aes_hash::cr_many;

/// Expands level `l` of `tree` in place: on entry `tree[..2^l]` holds the
/// level's nodes, on return `tree[..2^(l+1)]` holds their children (left
/// child of node `j` at `2j`, right at `2j + 1`). Returns the XOR of the
/// left children and of the right children.
fn expand_level(tree: &mut [u128], l: usize, parents: &mut Vec<u128>) -> [u128; 2] {
    parents.clear();
    parents.extend_from_slice(&tree[..1 << l]);
    let children = &mut tree[..2 << l];
    for (pair, &p) in children.chunks_exact_mut(2).zip(parents.iter()) {
        pair[0] = p;
        pair[1] = p ^ 1;
    }
    cr_many(children);
    children
        .chunks_exact(2)
        .fold([0, 0], |[l, r], pair| [l ^ pair[0], r ^ pair[1]])
}

/// The sender's side: expands each root into its tree's `2^depth` leaves
/// (tree `i` at `leaves[i << depth ..]`), in parallel over trees, and
/// returns each tree's level sums, `[left, right]` per level, tree-major.
pub fn sender_expand(roots: &[u128], depth: usize, leaves: &mut [u128]) -> Vec<[u128; 2]> {
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
        .for_each_init(Vec::new, |parents, ((tree, &root), sums)| {
            tree[0] = root;
            for (l, s) in sums.iter_mut().enumerate() {
                *s = expand_level(tree, l, parents);
            }
        });
    sums
}

/// The receiver's side: rebuilds each tree from the sums it obtained, one
/// per level, for the side off its path (`off_path[i·depth + l]` is tree
/// `i`'s sum of level `l` on side `¬α_l`, where `α = alphas[i]` is read
/// from its top bit down). Every leaf but leaf `α` ends up equal to the
/// sender's; leaf `α` is left zero.
pub fn receiver_expand(alphas: &[usize], off_path: &[u128], depth: usize, leaves: &mut [u128]) {
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
    leaves
        .par_chunks_mut(1 << depth)
        .zip(alphas.par_iter())
        .zip(off_path.par_chunks(depth))
        .for_each_init(Vec::new, |parents, ((tree, &alpha), sums)| {
            // The root is unknown: a placeholder whose descendants on the
            // path are garbage, corrected level by level.
            tree[0] = 0;
            for (l, &sum) in sums.iter().enumerate() {
                let both = expand_level(tree, l, parents);
                let path = alpha >> (depth - 1 - l);
                let sibling = path ^ 1;
                let side = sibling & 1;
                // The sibling is the only node of its side computed from
                // the placeholder: take its garbage value out of the side's
                // sum and put in what the sender's sum says.
                tree[sibling] ^= sum ^ both[side];
                tree[path] = 0;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn receiver_learns_every_leaf_but_the_punctured_one() {
        let mut rng = StdRng::seed_from_u64(3);
        for depth in [1, 2, 5, 11] {
            let trees = 9;
            let roots: Vec<u128> = (0..trees).map(|_| rng.gen()).collect();
            let mut full = vec![0u128; trees << depth];
            let sums = sender_expand(&roots, depth, &mut full);
            let alphas: Vec<usize> = (0..trees).map(|_| rng.gen_range(0..1 << depth)).collect();
            let off_path: Vec<u128> = alphas
                .iter()
                .enumerate()
                .flat_map(|(i, &a)| {
                    let sums = &sums[i * depth..(i + 1) * depth];
                    (0..depth).map(move |l| sums[l][usize::from(a >> (depth - 1 - l) & 1 == 0)])
                })
                .collect();
            let mut punctured = vec![0u128; trees << depth];
            receiver_expand(&alphas, &off_path, depth, &mut punctured);
            for (i, &a) in alphas.iter().enumerate() {
                for j in 0..1 << depth {
                    let (x, y) = (full[(i << depth) + j], punctured[(i << depth) + j]);
                    match j == a {
                        true => assert_eq!(y, 0, "tree {i} leaf {j} (punctured)"),
                        false => assert_eq!(x, y, "tree {i} leaf {j}, depth {depth}"),
                    }
                }
            }
        }
    }

    #[test]
    fn leaves_are_distinct_and_the_sums_are_their_halves() {
        let mut leaves = vec![0u128; 1 << 10];
        let sums = sender_expand(&[42], 10, &mut leaves);
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
