//! Table, item and bin choices of a candidate, short of the plan and
//! moduli: hash functions, table size, felts per item, bin size, bundles per
//! bundle index and label fragments.

use super::bins::{bin_load, Load};
use super::input::SelectionInput;
use super::plans::PlanShape;
use crate::he_psi::common::label;
use crate::he_psi::params::{ItemParams, PsiParams, QueryParams, SealParams, TableParams};

/// Expected colliding pairs among the client's items, as a share of a
/// bundle's bins, below which one hash function is used (a collision costs
/// the client a second query).
const SINGLE_HASH_COLLISIONS: f64 = 0.01;
/// Client items per cuckoo bin with three hash functions.
pub(super) const CUCKOO_LOAD: f64 = 0.5;

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
pub(super) struct Layout {
    pub(super) n: u32,
    pub(super) t: u64,
    pub(super) f: u32,
    pub(super) hashes: u32,
    pub(super) table_size: u32,
    pub(super) degree: u32,
    /// Bin loads of one shard.
    pub(super) load: Load,
    /// Shards, each with its own bin bundles.
    pub(super) shards: u32,
    /// Bin bundles per bundle index in one shard.
    pub(super) shard_bundles: u32,
    /// Bin bundles per bundle index in all shards together: what a query
    /// is compared against and answered with.
    pub(super) bundles: u32,
    pub(super) fragments: usize,
}

impl Layout {
    pub(super) fn new(input: &SelectionInput, n: u32, t: u64, f: u32, degree: u32) -> Self {
        let bins = n / f;
        let hashes = hash_count(input.client_items, bins);
        let table_size = table_size(input.client_items, hashes, bins);
        let shards = input.shards.max(1);
        let load = bin_load(input.server_items.max(1), hashes, table_size, shards);
        let labeled = input.label_bytes > 0;
        let shard_bundles = bundles_per_index(load.max, degree, labeled, f, t);
        Self {
            n,
            t,
            f,
            hashes,
            table_size,
            degree,
            load,
            shards,
            shard_bundles,
            bundles: shard_bundles.saturating_mul(shards),
            fragments: fragments(input.label_bytes, f * t.ilog2()),
        }
    }

    pub(super) fn bundle_idx_count(&self) -> u32 {
        self.table_size / (self.n / self.f)
    }

    /// The parameters of this layout with a plan and moduli.
    pub(super) fn params(&self, plan: &PlanShape, moduli: &[u32]) -> PsiParams {
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
    pub(super) fn fpp_log2(&self) -> f64 {
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

pub(super) fn given_layout(params: &PsiParams, server_items: u64, label_bytes: usize) -> Layout {
    let t = params.seal.plain_modulus;
    let f = params.item.felts_per_item;
    let degree = params.table.max_items_per_bin;
    let hashes = params.table.hash_func_count;
    let load = bin_load(server_items.max(1), hashes, params.table.table_size, 1);
    let bundles = bundles_per_index(load.max, degree, label_bytes > 0, f, t);
    Layout {
        n: params.seal.poly_modulus_degree,
        t,
        f,
        hashes,
        table_size: params.table.table_size,
        degree,
        load,
        shards: 1,
        shard_bundles: bundles,
        bundles,
        fragments: fragments(label_bytes, params.item_bits()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
