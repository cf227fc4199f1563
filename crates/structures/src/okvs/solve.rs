//! Solving one bin: rows sorted by start, Gaussian elimination inside the
//! bands, back substitution into a randomly pre-filled table.
//!
//! Processing rows in order of their start, a row's pivot is its first set
//! bit; it is eliminated from the following rows that start at or before the
//! pivot (no others can have that bit). A row XORed into a later one lies
//! inside the later row's window (it starts at its pivot, at or after the
//! later start, and ends no later), so bands never grow: elimination costs
//! a few 192-bit XORs per row. Back substitution in reverse order then sets
//! each pivot column so that its row's inner product is the row's value;
//! every other column keeps its random value.

use super::band::{self, Band};

/// One equation `<band, table[start..start + width]> = value`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Equation {
    /// First column of the band in the bin.
    pub start: u32,
    /// Column solved for by this row after elimination (`NO_PIVOT` if the
    /// row was redundant).
    pub pivot: u32,
    /// The band's bits (reduced during elimination).
    pub band: Band,
    /// Right-hand side.
    pub value: u128,
}

/// Marks a row eliminated to zero with a zero value (a consistent repeat).
const NO_PIVOT: u32 = u32::MAX;

/// The rows of a bin are dependent with inconsistent values.
#[derive(Debug)]
pub(crate) struct Inconsistent;

/// `eqs` sorted by start (a counting sort: starts are below `starts`).
pub(crate) fn sort_by_start(eqs: &[Equation], starts: usize) -> Vec<Equation> {
    let mut offsets = vec![0u32; starts + 1];
    for e in eqs {
        offsets[e.start as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut sorted = vec![Equation::default(); eqs.len()];
    for e in eqs {
        let slot = &mut offsets[e.start as usize];
        sorted[*slot as usize] = *e;
        *slot += 1;
    }
    sorted
}

/// Solves the sorted equations of one bin into `table` (the bin's columns,
/// pre-filled with random values), overwriting only pivot columns.
pub(crate) fn solve(
    eqs: &mut [Equation],
    width: usize,
    table: &mut [u128],
) -> Result<(), Inconsistent> {
    eliminate(eqs)?;
    back_substitute(eqs, width, table);
    Ok(())
}

fn eliminate(eqs: &mut [Equation]) -> Result<(), Inconsistent> {
    for i in 0..eqs.len() {
        let (done, rest) = eqs.split_at_mut(i + 1);
        let row = &mut done[i];
        if band::is_zero(&row.band) {
            if row.value != 0 {
                return Err(Inconsistent);
            }
            row.pivot = NO_PIVOT;
            continue;
        }
        let lead = band::first_one(&row.band);
        row.pivot = row.start + lead as u32;
        eliminate_below(row, lead, rest);
    }
    Ok(())
}

/// Clears column `row.pivot` from the rows after `row` (sorted by start).
fn eliminate_below(row: &Equation, lead: usize, rest: &mut [Equation]) {
    for other in rest.iter_mut().take_while(|o| o.start <= row.pivot) {
        let shift = (other.start - row.start) as usize;
        if band::bit(&other.band, lead - shift) {
            band::xor_into(&mut other.band, &band::shr(&row.band, shift));
            other.value ^= row.value;
        }
    }
}

fn back_substitute(eqs: &[Equation], width: usize, table: &mut [u128]) {
    for row in eqs.iter().rev().filter(|r| r.pivot != NO_PIVOT) {
        let start = row.start as usize;
        let cols = &mut table[start..start + width];
        let lead = (row.pivot - row.start) as usize;
        cols[lead] = 0;
        cols[lead] = row.value ^ band::dot(&row.band, cols);
    }
}
