//! Solving one bin: rows sorted by start, Gaussian elimination inside the
//! bands, back substitution into a randomly pre-filled table.
//!
//! Processing rows in order of their start, a row's pivot is its first set
//! bit; it is eliminated from the following rows that start at or before the
//! pivot (no others can have that bit). A row XORed into a later one lies
//! inside the later row's window (it starts at its pivot, at or after the
//! later start, and ends no later), so bands never grow: elimination costs
//! a few 256-bit XORs per row. Rows are kept in their aligned four-word
//! windows (`band::Aligned`), so a row is XORed into another with whole
//! words (the windows' offsets are whole words) and without a branch on
//! the tested bit (half the tests succeed, unpredictably). Back
//! substitution in reverse order then sets each pivot column so that its
//! row's inner product is the row's value; every other column keeps its
//! random value. Its inner products go through subset tables
//! (`subsets.rs`) built just ahead of the sweep and kept in step as pivot
//! columns are set.

use super::band::{self, Aligned, Band};
use super::hash::Row;
use super::subsets::Subsets;

/// One equation `<band, table[start..start + width]> = value`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Equation {
    /// First column of the band in the bin.
    pub start: u32,
    /// Column solved for by this row after elimination (`NO_PIVOT` if the
    /// row was redundant).
    pub pivot: u32,
    /// The band's bits in its aligned window (reduced during elimination).
    pub words: Aligned,
    /// Right-hand side.
    pub value: u128,
}

impl Equation {
    /// The equation of a row starting at `start` with bits `band`.
    pub fn new(start: u32, band: &Band, value: u128) -> Self {
        Self {
            start,
            pivot: 0,
            words: band::align(band, start as usize),
            value,
        }
    }

    /// Index of the first word of the aligned window (column `64 * base`).
    fn base(&self) -> usize {
        self.start as usize / 64
    }
}

/// Marks a row eliminated to zero with a zero value (a consistent repeat).
const NO_PIVOT: u32 = u32::MAX;

/// The rows of a bin are dependent with inconsistent values.
#[derive(Debug)]
pub(crate) struct Inconsistent;

/// The equations of `rows` with `values` (in the same order) sorted by
/// start (a stable counting sort: starts are below `starts`), into `eqs`.
pub(crate) fn sort_by_start(
    rows: &[Row],
    values: impl Iterator<Item = u128>,
    starts: usize,
    eqs: &mut Vec<Equation>,
) {
    let mut offsets = vec![0u32; starts + 1];
    for r in rows {
        offsets[r.start as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    eqs.clear();
    eqs.resize(rows.len(), Equation::default());
    for (r, value) in rows.iter().zip(values) {
        let slot = &mut offsets[r.start as usize];
        eqs[*slot as usize] = Equation::new(r.start, &r.band, value);
        *slot += 1;
    }
}

/// Solves the sorted equations of one bin into `table` (the bin's columns,
/// pre-filled with random values), overwriting only pivot columns;
/// `subsets` is scratch space.
pub(crate) fn solve(
    eqs: &mut [Equation],
    table: &mut [u128],
    subsets: &mut Subsets,
) -> Result<(), Inconsistent> {
    eliminate(eqs)?;
    back_substitute(eqs, table, subsets);
    Ok(())
}

fn eliminate(eqs: &mut [Equation]) -> Result<(), Inconsistent> {
    for i in 0..eqs.len() {
        let (done, rest) = eqs.split_at_mut(i + 1);
        let row = &mut done[i];
        let Some(lead) = band::first_one(&row.words) else {
            if row.value != 0 {
                return Err(Inconsistent);
            }
            row.pivot = NO_PIVOT;
            continue;
        };
        row.pivot = (row.base() * 64 + lead) as u32;
        eliminate_below(row, rest);
    }
    Ok(())
}

/// Clears column `row.pivot` from the rows after `row` (sorted by start).
///
/// A later row starting at or before the pivot has its window at most three
/// words after `row`'s (the pivot lies within 191 columns of `row.start`),
/// and the pivot at most 254 columns into its window.
fn eliminate_below(row: &Equation, rest: &mut [Equation]) {
    let mut ext = [0u64; 7];
    ext[..4].copy_from_slice(&row.words);
    let (base, pivot) = (row.base(), row.pivot as usize);
    for other in rest.iter_mut().take_while(|o| o.start <= row.pivot) {
        let shift = (other.base() - base) & 3;
        let at = pivot - other.base() * 64;
        let mask = ((other.words[(at / 64) & 3] >> (at % 64)) & 1).wrapping_neg();
        for (k, w) in other.words.iter_mut().enumerate() {
            *w ^= ext[k + shift] & mask;
        }
        other.value ^= row.value & (u128::from(mask) << 64 | u128::from(mask));
    }
}

/// Sets the pivot columns, last row first. Before a row is used, the
/// subset tables are built down to its window from the current entries: no
/// column below the previous window has been set yet, and every column set
/// afterwards (at or above its row's start) is one whose group was built,
/// which [`Subsets::add`] then updates.
fn back_substitute(eqs: &[Equation], table: &mut [u128], subsets: &mut Subsets) {
    subsets.reset(table.len());
    let mut built = Subsets::groups_for(table.len());
    for row in eqs.iter().rev().filter(|r| r.pivot != NO_PIVOT) {
        let base = row.base();
        let from = base * 16;
        if from < built {
            subsets.build(table, from..built);
            built = from;
        }
        // `<row, table>` includes the pivot's current entry: XORing the
        // difference into it makes the product equal the value.
        let delta = row.value ^ subsets.dot(base, &row.words);
        let pivot = row.pivot as usize;
        table[pivot] ^= delta;
        subsets.add(pivot, delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// The solver before subset tables and aligned windows: rows as
    /// 192-bit bands shifted bit by bit, inner products by walking bits.
    fn reference_solve(
        rows: &[(u32, Band, u128)],
        width: usize,
        table: &mut [u128],
    ) -> Result<(), Inconsistent> {
        let mut rows = rows.to_vec();
        rows.sort_by_key(|r| r.0);
        let mut pivots = vec![NO_PIVOT; rows.len()];
        for i in 0..rows.len() {
            let (start, bits, value) = rows[i];
            let Some(lead) = band::first_one(&bits) else {
                if value != 0 {
                    return Err(Inconsistent);
                }
                continue;
            };
            let pivot = start + lead as u32;
            pivots[i] = pivot;
            for other in rows[i + 1..].iter_mut().take_while(|o| o.0 <= pivot) {
                let shift = (other.0 - start) as usize;
                if band::bit(&other.1, lead - shift) {
                    for j in lead..width {
                        if band::bit(&bits, j) {
                            other.1[(j - shift) / 64] ^= 1 << ((j - shift) % 64);
                        }
                    }
                    other.2 ^= value;
                }
            }
        }
        for (row, &pivot) in rows.iter().zip(&pivots).rev() {
            if pivot != NO_PIVOT {
                let start = row.0 as usize;
                let cols = &mut table[start..start + width];
                let lead = pivot as usize - start;
                cols[lead] = 0;
                cols[lead] = row.2 ^ band::dot(&row.1, cols);
            }
        }
        Ok(())
    }

    /// The solver fills exactly the table the reference fills (same pivots,
    /// same random fill), including with repeated rows.
    #[test]
    fn solve_matches_reference() {
        let mut rng = StdRng::seed_from_u64(2);
        for (n, bin_len) in [(100, 400), (1000, 1300), (3000, 3800), (500, 700)] {
            let width = 192;
            let starts = bin_len - width + 1;
            let mut rows: Vec<(u32, Band, u128)> = (0..n)
                .map(|_| {
                    let start = rng.gen_range(0..starts as u32);
                    (start, [rng.gen(), rng.gen(), rng.gen()], rng.gen())
                })
                .collect();
            rows.push(rows[n / 2]);
            let fill: Vec<u128> = (0..bin_len).map(|_| rng.gen()).collect();
            let mut expect = fill.clone();
            reference_solve(&rows, width, &mut expect).expect("reference");
            let hashed: Vec<Row> = rows
                .iter()
                .map(|&(start, band, _)| Row {
                    bin: 0,
                    start,
                    band,
                })
                .collect();
            let mut sorted = Vec::new();
            sort_by_start(&hashed, rows.iter().map(|r| r.2), starts, &mut sorted);
            let mut table = fill;
            solve(&mut sorted, &mut table, &mut Subsets::default()).expect("solve");
            assert_eq!(table, expect, "n {n}");
        }
    }

    /// Dependent rows with inconsistent values are reported.
    #[test]
    fn inconsistent_rows_fail() {
        let bits: Band = [0b1011, 1 << 40, 7];
        let row = Row {
            bin: 0,
            start: 3,
            band: bits,
        };
        let mut sorted = Vec::new();
        sort_by_start(&[row, row], [1, 2].into_iter(), 10, &mut sorted);
        let mut table = vec![0u128; 201];
        assert!(solve(&mut sorted, &mut table, &mut Subsets::default()).is_err());
    }
}
