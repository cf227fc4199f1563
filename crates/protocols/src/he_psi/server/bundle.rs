//! One bin bundle (paper section 3.1, "partitioning"): at one bundle index,
//! `bins_per_bundle` bins of at most `B` items each, and per SIMD slot the
//! polynomials the sender evaluates on the client's encrypted powers.
//!
//! Storage is flat and in plaintext-field form (`u32`, since `t < 2^32`):
//! the items' felts (the roots), their encrypted-label felts, and the
//! polynomial coefficients as slot vectors, one per (polynomial, degree).
//! The slot-vector layout is what the query needs (one plaintext per
//! coefficient); the roots and label felts are what updates need.

use std::borrow::Cow;
use std::sync::Arc;

use psikit_he::{CompactPoly, HeParams, PlainPoly};

use crate::error::Error;
use crate::he_psi::common::poly::Field;
use crate::he_psi::common::shape::DbShape;

/// A bin bundle. Bin `k` holds its items at `k * B .. k * B + counts[k]`;
/// item `r` of bin `k` has felts `felts[(k*B + r)*w .. +w]` with `w = f +
/// c*f` (item felts, then the encrypted label's felts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinBundle {
    counts: Vec<u16>,
    felts: Vec<u32>,
    /// `coeffs[(p * (B+1) + j) * n + s]`: coefficient of `y^j` of polynomial
    /// `p` (0 = matching, `1 + k` = label fragment `k`) at slot `s`.
    coeffs: Vec<u32>,
    /// Bins whose polynomials are out of date.
    dirty: Vec<bool>,
    /// The coefficients as ready-to-multiply plaintexts, if cached.
    plain: PlainCache,
}

/// Cached [`PlainPoly`]s of a bundle: for polynomial `p` and degree `j`
/// (up to the bundle's degree), entry `p * (degree + 1) + j`. Derived data,
/// so it takes no part in comparisons.
#[derive(Clone, Default)]
struct PlainCache(Option<Arc<Vec<PlainPoly>>>);

impl PartialEq for PlainCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PlainCache {}

impl std::fmt::Debug for PlainCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PlainCache({})",
            if self.0.is_some() { "full" } else { "empty" }
        )
    }
}

impl BinBundle {
    /// An empty bundle: every matching polynomial is the constant 1 (never
    /// zero, so nothing matches) and every label polynomial 0.
    pub fn new(shape: &DbShape) -> Self {
        let (bins, felts, coeffs) = Self::sizes(shape);
        let mut coeffs = vec![0u32; coeffs];
        coeffs[..shape.slots].fill(1);
        Self {
            counts: vec![0; bins],
            felts: vec![0; felts],
            coeffs,
            dirty: vec![false; bins],
            plain: PlainCache::default(),
        }
    }

    /// Lengths of the three arrays of a bundle: bin counts, entry felts,
    /// coefficients.
    pub fn sizes(shape: &DbShape) -> (usize, usize, usize) {
        let bins = shape.bins_per_bundle();
        let b = shape.max_items_per_bin;
        (
            bins,
            bins * b * shape.entry_width(),
            shape.polys() * (b + 1) * shape.slots,
        )
    }

    /// Items in bin `bin`.
    pub fn count(&self, bin: usize) -> usize {
        usize::from(self.counts[bin])
    }

    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// The highest polynomial degree in use: the fullest bin's count. The
    /// query only evaluates coefficients `0..=degree`.
    pub fn degree(&self) -> usize {
        self.counts
            .iter()
            .map(|&c| usize::from(c))
            .max()
            .unwrap_or(0)
    }

    /// Coefficient slot vector of `y^j` for polynomial `p`.
    pub fn coeff_slots<'a>(&'a self, shape: &DbShape, p: usize, j: usize) -> &'a [u32] {
        let start = (p * (shape.max_items_per_bin + 1) + j) * shape.slots;
        &self.coeffs[start..start + shape.slots]
    }

    fn entry_range(shape: &DbShape, bin: usize, r: usize) -> std::ops::Range<usize> {
        let w = shape.entry_width();
        let start = (bin * shape.max_items_per_bin + r) * w;
        start..start + w
    }

    /// Entry `r` of bin `bin`: item felts then label felts.
    pub fn entry<'a>(&'a self, shape: &DbShape, bin: usize, r: usize) -> &'a [u32] {
        &self.felts[Self::entry_range(shape, bin, r)]
    }

    /// Position in bin `bin` of the item with these felts, if present.
    pub fn find(&self, shape: &DbShape, bin: usize, item: &[u32]) -> Option<usize> {
        let f = shape.felts_per_item;
        (0..self.count(bin)).find(|&r| &self.entry(shape, bin, r)[..f] == item)
    }

    /// Whether `entry` may join bin `bin`: the bin has room and, in labeled
    /// mode, no item of the bin shares a felt with it at the same slot
    /// (section 4.2: interpolation needs distinct x per slot).
    pub fn accepts(&self, shape: &DbShape, bin: usize, item: &[u32]) -> bool {
        self.count(bin) < shape.max_items_per_bin && !self.collides(shape, bin, item, None)
    }

    /// Whether `item` shares a felt at the same slot with an item of bin
    /// `bin` other than item `skip` (always false when unlabeled).
    pub fn collides(&self, shape: &DbShape, bin: usize, item: &[u32], skip: Option<usize>) -> bool {
        if !shape.labeled() {
            return false;
        }
        let f = shape.felts_per_item;
        (0..self.count(bin)).filter(|&r| Some(r) != skip).any(|r| {
            let other = &self.entry(shape, bin, r)[..f];
            other.iter().zip(item).any(|(a, b)| a == b)
        })
    }

    /// Appends `entry` to bin `bin`; the caller checked [`Self::accepts`].
    pub fn push(&mut self, shape: &DbShape, bin: usize, entry: &[u32]) {
        let r = self.count(bin);
        let range = Self::entry_range(shape, bin, r);
        self.felts[range].copy_from_slice(entry);
        self.counts[bin] += 1;
        self.dirty[bin] = true;
    }

    /// Replaces item `r` of bin `bin` with `entry`; the caller checked that
    /// it does not collide with the bin's other items.
    pub fn replace(&mut self, shape: &DbShape, bin: usize, r: usize, entry: &[u32]) {
        let range = Self::entry_range(shape, bin, r);
        self.felts[range].copy_from_slice(entry);
        self.dirty[bin] = true;
    }

    /// Replaces the label felts of item `r` in bin `bin`.
    pub fn set_label(&mut self, shape: &DbShape, bin: usize, r: usize, label_felts: &[u32]) {
        let f = shape.felts_per_item;
        let range = Self::entry_range(shape, bin, r);
        self.felts[range][f..].copy_from_slice(label_felts);
        self.dirty[bin] = true;
    }

    /// Removes item `r` from bin `bin` (the bin's last item takes its place).
    pub fn remove(&mut self, shape: &DbShape, bin: usize, r: usize) {
        let last = self.count(bin) - 1;
        if r != last {
            let from = Self::entry_range(shape, bin, last);
            let to = Self::entry_range(shape, bin, r).start;
            self.felts.copy_within(from, to);
        }
        self.counts[bin] -= 1;
        self.dirty[bin] = true;
    }

    /// Whether any bin changed since the last [`Self::refresh`].
    pub fn is_dirty(&self) -> bool {
        self.dirty.iter().any(|&d| d)
    }

    /// Recomputes the polynomials of every changed bin (and drops the
    /// plaintext cache, now stale).
    pub fn refresh(&mut self, shape: &DbShape, field: &Field) {
        self.plain = PlainCache::default();
        let mut work = PolyWork::new(shape);
        for bin in 0..self.dirty.len() {
            if std::mem::take(&mut self.dirty[bin]) {
                self.recompute_bin(shape, field, bin, &mut work);
            }
        }
    }

    /// Recomputes, for each of the bin's `f` slots, the matching polynomial
    /// of the slot's roots and the label polynomials through (root, label
    /// felt) for every label fragment.
    fn recompute_bin(&mut self, shape: &DbShape, field: &Field, bin: usize, work: &mut PolyWork) {
        let f = shape.felts_per_item;
        let m = self.count(bin);
        for i in 0..f {
            work.xs.clear();
            for r in 0..m {
                work.xs.push(u64::from(self.entry(shape, bin, r)[i]));
            }
            let matching = field.vanishing(&work.xs);
            self.write_coeffs(shape, 0, bin * f + i, &matching);
            let frags = shape.label_fragments();
            if frags == 0 {
                continue;
            }
            for (k, col) in work.ys.iter_mut().enumerate() {
                col.clear();
                for r in 0..m {
                    col.push(u64::from(self.entry(shape, bin, r)[f + k * f + i]));
                }
            }
            let ys: Vec<&[u64]> = work.ys.iter().map(Vec::as_slice).collect();
            field.interpolate_columns(&work.xs, &ys, &mut work.out);
            for (k, g) in work.out.iter().enumerate() {
                self.write_coeffs(shape, 1 + k, bin * f + i, g);
            }
        }
    }

    /// Writes polynomial `p`'s coefficients at slot `slot`, zeroing the
    /// degrees above.
    fn write_coeffs(&mut self, shape: &DbShape, p: usize, slot: usize, coeffs: &[u64]) {
        let degrees = shape.max_items_per_bin + 1;
        for j in 0..degrees {
            let c = coeffs.get(j).copied().unwrap_or(0);
            self.coeffs[(p * degrees + j) * shape.slots + slot] = c as u32;
        }
    }

    /// The bundle's coefficients as plaintexts for the query: from the cache
    /// if present, else encoded now (an inverse batching transform mod `t`
    /// and `k` NTTs per coefficient).
    pub fn plaintexts(
        &self,
        shape: &DbShape,
        he: &HeParams,
    ) -> Result<Cow<'_, [PlainPoly]>, Error> {
        match &self.plain.0 {
            Some(cached) => Ok(Cow::Borrowed(cached.as_slice())),
            None => Ok(Cow::Owned(self.encode_plaintexts(shape, he)?)),
        }
    }

    /// Fills the plaintext cache if it is empty.
    pub fn cache_plaintexts(&mut self, shape: &DbShape, he: &HeParams) -> Result<(), Error> {
        if self.plain.0.is_none() {
            self.plain = PlainCache(Some(Arc::new(self.encode_plaintexts(shape, he)?)));
        }
        Ok(())
    }

    /// Bytes held by the plaintext cache.
    pub fn cache_bytes(&self) -> usize {
        self.plain
            .0
            .as_ref()
            .map_or(0, |v| v.iter().map(PlainPoly::byte_size).sum())
    }

    /// Bytes of the bundle's own arrays (roots, label felts, coefficients).
    pub fn data_bytes(&self) -> usize {
        self.counts.len() * 2 + (self.felts.len() + self.coeffs.len()) * 4 + self.dirty.len()
    }

    fn encode_plaintexts(&self, shape: &DbShape, he: &HeParams) -> Result<Vec<PlainPoly>, Error> {
        let degree = self.degree();
        let mut out = Vec::with_capacity(shape.polys() * (degree + 1));
        let mut slots = vec![0u64; shape.slots];
        for p in 0..shape.polys() {
            for j in 0..=degree {
                for (s, &c) in slots.iter_mut().zip(self.coeff_slots(shape, p, j)) {
                    *s = u64::from(c);
                }
                out.push(CompactPoly::from_slots(he, &slots)?.to_plain(he)?);
            }
        }
        Ok(out)
    }

    /// Raw parts for serialization: counts, entry felts, coefficients.
    pub(crate) fn parts(&self) -> (&[u16], &[u32], &[u32]) {
        (&self.counts, &self.felts, &self.coeffs)
    }

    /// Rebuilds a bundle from [`Self::parts`], checking every length and
    /// range so a corrupt file cannot make later code panic.
    pub(crate) fn from_parts(
        shape: &DbShape,
        counts: Vec<u16>,
        felts: Vec<u32>,
        coeffs: Vec<u32>,
    ) -> Option<Self> {
        let t = shape.plain_modulus;
        let ok = (counts.len(), felts.len(), coeffs.len()) == Self::sizes(shape)
            && counts
                .iter()
                .all(|&c| usize::from(c) <= shape.max_items_per_bin)
            && felts.iter().chain(&coeffs).all(|&v| u64::from(v) < t);
        ok.then(|| Self {
            dirty: vec![false; counts.len()],
            plain: PlainCache::default(),
            counts,
            felts,
            coeffs,
        })
    }
}

/// Scratch buffers reused across bins.
struct PolyWork {
    xs: Vec<u64>,
    ys: Vec<Vec<u64>>,
    out: Vec<Vec<u64>>,
}

impl PolyWork {
    fn new(shape: &DbShape) -> Self {
        let c = shape.label_fragments();
        Self {
            xs: Vec::with_capacity(shape.max_items_per_bin),
            ys: vec![Vec::new(); c],
            out: vec![Vec::new(); c],
        }
    }
}
