//! Band arithmetic: 192-bit rows as three 64-bit words, and the inner
//! product of a band with table entries (the decode kernel).
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

/// Whether the band is all zeros.
pub(crate) fn is_zero(band: &Band) -> bool {
    band.iter().all(|&w| w == 0)
}

/// Index of the lowest set bit (the band must not be zero).
pub(crate) fn first_one(band: &Band) -> usize {
    let mut base = 0;
    for &w in band {
        if w != 0 {
            return base + w.trailing_zeros() as usize;
        }
        base += 64;
    }
    base
}

/// Bit `j` of the band.
pub(crate) fn bit(band: &Band, j: usize) -> bool {
    (band[j / 64] >> (j % 64)) & 1 == 1
}

/// `band >> shift` (bit `j` of the result is bit `j + shift`), `shift` below
/// 192: aligns a row to a window starting `shift` columns later.
pub(crate) fn shr(band: &Band, shift: usize) -> Band {
    let (words, bits) = (shift / 64, shift % 64);
    let mut out = [0u64; BAND_WORDS];
    for (i, o) in out.iter_mut().enumerate() {
        let lo = band.get(i + words).copied().unwrap_or(0);
        let hi = band.get(i + words + 1).copied().unwrap_or(0);
        *o = if bits == 0 {
            lo
        } else {
            (lo >> bits) | (hi << (64 - bits))
        };
    }
    out
}

/// `a ^= b`.
pub(crate) fn xor_into(a: &mut Band, b: &Band) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
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
    fn shift_moves_bits_down() {
        let band = [1 << 5, 1 << 63, 1];
        for shift in [0, 1, 5, 63, 64, 70, 127, 128, 191] {
            let s = shr(&band, shift);
            for j in 0..192 {
                let expect = j + shift < 192 && bit(&band, j + shift);
                assert_eq!(bit(&s, j), expect, "shift {shift} bit {j}");
            }
        }
        assert_eq!(first_one(&band), 5);
        assert!(is_zero(&[0; 3]));
    }
}
