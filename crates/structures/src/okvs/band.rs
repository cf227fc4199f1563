//! Band arithmetic: 192-bit rows as three 64-bit words, their aligned
//! four-word form, and the inner product of a band with table entries by
//! walking its set bits (single decodes, sparse batches, and the reference
//! the subset tables of `subsets.rs` are tested against).
//!
//! The kernel is plain portable code (the crate forbids `unsafe`, so no
//! run-time SIMD dispatch): it branches on the band's bits, so its time
//! depends on the key's hash (public seed) through the band's weight; only
//! the decoding party's own timing could show it.

/// Words of a band.
pub(crate) const BAND_WORDS: usize = 3;

/// A band of up to 192 bits, bit `j` (word `j / 64`, bit `j % 64`) for the
/// band's `j`-th column.
pub(crate) type Band = [u64; BAND_WORDS];

/// A band placed in a window of four words starting at a 64-aligned
/// column: bit `j` of word `i` for column `64 * (start / 64 + i) + j` of the
/// bin. Elimination and the subset tables work in this form, so rows are
/// combined with whole-word moves and no bit shifts.
pub(crate) type Aligned = [u64; 4];

/// The band of a row starting at column `start`, in its aligned window
/// (the low `start % 64` bits of the first word are zero; a 192-bit band
/// fits in 256 bits).
pub(crate) fn align(band: &Band, start: usize) -> Aligned {
    let s = (start % 64) as u32;
    // `x >> (64 - s)` as `(x >> 1) >> (63 - s)`: zero, not an overflow, at s = 0.
    let carry = |x: u64| (x >> 1) >> (63 - s);
    [
        band[0] << s,
        band[1] << s | carry(band[0]),
        band[2] << s | carry(band[1]),
        carry(band[2]),
    ]
}

/// Index of the lowest set bit, `None` if all words are zero.
pub(crate) fn first_one(words: &[u64]) -> Option<usize> {
    let mut base = 0;
    for &w in words {
        if w != 0 {
            return Some(base + w.trailing_zeros() as usize);
        }
        base += 64;
    }
    None
}

/// Bit `j` of the band.
pub(crate) fn bit(band: &[u64], j: usize) -> bool {
    (band[j / 64] >> (j % 64)) & 1 == 1
}

/// XOR of the entries of `cols` whose band bit is set (`cols.len()` is the
/// band width, at most 192; the band has no bits beyond it).
pub(crate) fn dot(band: &Band, cols: &[u128]) -> u128 {
    match <&[u128; 192]>::try_from(cols) {
        Ok(full) => dot_full(band, full),
        Err(_) => dot_narrow(band, cols),
    }
}

/// The kernel: walks the set bits of the three words as three independent
/// chains (one accumulator each), so the loads of one word overlap those of
/// the others; only selected entries are read (half the band on average).
/// Measured faster here than branch-free masking of all 192 entries, which
/// without AVX at compile time runs at 128 bits per operation.
#[inline]
fn dot_full(band: &Band, cols: &[u128; 192]) -> u128 {
    let (mut a, mut b, mut c) = (0u128, 0u128, 0u128);
    let [mut x, mut y, mut z] = *band;
    while (x | y | z) != 0 {
        if x != 0 {
            a ^= cols[x.trailing_zeros() as usize];
            x &= x - 1;
        }
        if y != 0 {
            b ^= cols[64 + y.trailing_zeros() as usize];
            y &= y - 1;
        }
        if z != 0 {
            c ^= cols[128 + z.trailing_zeros() as usize];
            z &= z - 1;
        }
    }
    a ^ b ^ c
}

/// The same for narrow bands (small dense tables).
fn dot_narrow(band: &Band, cols: &[u128]) -> u128 {
    cols.iter()
        .enumerate()
        .filter(|&(j, _)| bit(band, j))
        .fold(0, |acc, (_, &c)| acc ^ c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_dot(band: &Band, cols: &[u128]) -> u128 {
        (0..cols.len())
            .filter(|&j| bit(band, j))
            .fold(0, |acc, j| acc ^ cols[j])
    }

    #[test]
    fn dot_matches_reference() {
        let cols: Vec<u128> = (0..192u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
            .collect();
        let band = [
            0xdead_beef_0123_4567,
            0x8000_0000_0000_0001,
            0xffff_0000_ffff_0000,
        ];
        assert_eq!(dot(&band, &cols), reference_dot(&band, &cols));
        let short = [0b1011, 0, 0];
        assert_eq!(dot(&short, &cols[..70]), reference_dot(&short, &cols[..70]));
    }

    #[test]
    fn aligning_moves_bits_to_their_columns() {
        let band = [1 << 5 | 1, 1 << 63, 1 << 63 | 2];
        for start in [0, 1, 5, 63, 64, 70, 127, 128, 191, 1000] {
            let a = align(&band, start);
            for col in 0..256 {
                let j = (start / 64 * 64 + col).checked_sub(start);
                let expect = j.is_some_and(|j| j < 192 && bit(&band, j));
                assert_eq!(bit(&a, col), expect, "start {start} column {col}");
            }
        }
        assert_eq!(first_one(&band), Some(0));
        assert_eq!(first_one(&[0, 0, 1 << 7]), Some(135));
        assert_eq!(first_one(&[0; 4]), None);
    }
}
