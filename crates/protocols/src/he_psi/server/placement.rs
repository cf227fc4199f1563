//! Where a batch's entries go in the bin bundles of one bundle index, the
//! sender database's inner loops: an item joins the first bundle whose bin
//! takes it, swaps with a resident when only the labeled collision rule is
//! in the way, and opens a new bundle only when neither works; removals
//! take it out again; changed bins get their polynomials recomputed. Apart
//! from `sender_db.rs` (which prepares batches and runs these per bundle
//! index in parallel) because the placement rules are their own concern.

use psikit_structures::cuckoo_table::Locations;
use rayon::prelude::*;

use crate::he_psi::common::poly::Field;
use crate::he_psi::common::shape::DbShape;
use crate::he_psi::server::bundle::BinBundle;

/// Items of a batch in the form placement needs: for entry `e`, its felts
/// (item then label) at `felts[e*w..(e+1)*w]` and its distinct cuckoo bins.
pub(crate) struct Prepared {
    pub width: usize,
    pub felts: Vec<u32>,
    pub bins: Vec<Locations>,
}

impl Prepared {
    pub fn entry(&self, e: usize) -> &[u32] {
        &self.felts[e * self.width..(e + 1) * self.width]
    }

    /// Per bundle index, the `(entry, bin in bundle, is first location)`
    /// triples to place there. "First location" lets exactly one task count
    /// an item as new.
    pub fn by_bundle_index(&self, shape: &DbShape) -> Vec<Vec<(u32, u32, bool)>> {
        let mut out = vec![Vec::new(); shape.bundle_idx_count()];
        for (e, bins) in self.bins.iter().enumerate() {
            for (k, &bin) in bins.iter().enumerate() {
                let (idx, in_bundle) = shape.split_bin(bin);
                out[idx].push((e as u32, in_bundle as u32, k == 0));
            }
        }
        out
    }
}

/// Places a batch's entries at one bundle index. Returns (new items,
/// relabelled items), each counted at the item's first location only.
/// `fresh` (the database was empty and the batch has no duplicates) skips
/// the search for a present copy.
pub(crate) fn place_all(
    shape: &DbShape,
    bundles: &mut Vec<BinBundle>,
    prepared: &Prepared,
    todo: &[(u32, u32, bool)],
    fresh: bool,
) -> (usize, usize) {
    let f = shape.felts_per_item;
    let (mut inserted, mut relabelled) = (0, 0);
    for &(e, bin, first) in todo {
        let entry = prepared.entry(e as usize);
        let bin = bin as usize;
        let present = if fresh {
            None
        } else {
            bundles
                .iter()
                .enumerate()
                .find_map(|(b, bundle)| bundle.find(shape, bin, &entry[..f]).map(|r| (b, r)))
        };
        match present {
            Some((b, r)) => {
                bundles[b].set_label(shape, bin, r, &entry[f..]);
                relabelled += usize::from(first);
            }
            None => {
                place_new(shape, bundles, bin, entry);
                inserted += usize::from(first);
            }
        }
    }
    (inserted, relabelled)
}

/// Puts an entry into the first bundle whose bin accepts it, opening a new
/// bundle only if none does and no single swap makes room.
fn place_new(shape: &DbShape, bundles: &mut Vec<BinBundle>, bin: usize, entry: &[u32]) {
    let f = shape.felts_per_item;
    if let Some(b) = bundles
        .iter()
        .position(|b| b.accepts(shape, bin, &entry[..f]))
    {
        bundles[b].push(shape, bin, entry);
    } else if !swap_in(shape, bundles, bin, entry) {
        let mut fresh = BinBundle::new(shape);
        fresh.push(shape, bin, entry);
        bundles.push(fresh);
    }
}

/// The labeled collision rule refuses an item where a bin has room but
/// already holds an item sharing one of its felts. Rather than open a whole
/// new bundle for that (every later query would pay one more result
/// package with its label fragments), look for an item `z` in the same bin
/// of another bundle that the new entry can replace and that itself fits
/// where there is room. Collisions are rare (about `f·B/t` per item), so
/// this quadratic search seldom runs; it keeps the bundle count at what the
/// bin loads need, as the parameter selection assumes.
fn swap_in(shape: &DbShape, bundles: &mut [BinBundle], bin: usize, entry: &[u32]) -> bool {
    let f = shape.felts_per_item;
    let item = &entry[..f];
    let open = (0..bundles.len()).filter(|&o| bundles[o].count(bin) < shape.max_items_per_bin);
    for open in open {
        for b in (0..bundles.len()).filter(|&b| b != open) {
            let swap = (0..bundles[b].count(bin)).find(|&r| {
                let z = &bundles[b].entry(shape, bin, r)[..f];
                !bundles[b].collides(shape, bin, item, Some(r))
                    && bundles[open].accepts(shape, bin, z)
            });
            if let Some(r) = swap {
                let z = bundles[b].entry(shape, bin, r).to_vec();
                bundles[b].replace(shape, bin, r, entry);
                bundles[open].push(shape, bin, &z);
                return true;
            }
        }
    }
    false
}

/// Removes the item with felts `item` from bin `bin` of whichever bundle
/// holds it; false if none does.
pub(crate) fn remove_one(
    shape: &DbShape,
    bundles: &mut [BinBundle],
    bin: usize,
    item: &[u32],
) -> bool {
    for bundle in bundles.iter_mut() {
        if let Some(r) = bundle.find(shape, bin, item) {
            bundle.remove(shape, bin, r);
            return true;
        }
    }
    false
}

/// Recomputes the polynomials of the changed bins of every bundle at one
/// bundle index, bundles in parallel.
pub(crate) fn refresh_all(shape: &DbShape, field: &Field, bundles: &mut [BinBundle]) {
    bundles
        .par_iter_mut()
        .filter(|b| b.is_dirty())
        .for_each(|b| b.refresh(shape, field));
}
