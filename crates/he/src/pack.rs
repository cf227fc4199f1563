//! Bit packing of residues: every value takes exactly the bits its modulus
//! needs, least significant bit first, with no per-value framing. Used for
//! compact plaintexts and for the wire formats.

/// Bits needed to write any value below `modulus` (`modulus >= 2`).
pub(crate) fn bit_width(modulus: u64) -> usize {
    (u64::BITS - (modulus - 1).leading_zeros()) as usize
}

/// Bytes taken by `count` values of `width` bits.
pub(crate) fn packed_len(count: usize, width: usize) -> usize {
    (count * width).div_ceil(8)
}

/// Appends `values` to `out`, `width` bits each. Values must fit in `width`
/// bits (callers pass reduced residues).
pub(crate) fn pack_into(out: &mut Vec<u8>, values: impl IntoIterator<Item = u64>, width: usize) {
    // Whole 64-bit words are flushed at once (little-endian keeps the
    // least-significant-bit-first order), so at most 63 pending bits plus
    // one 64-bit value: fits in a u128.
    let mut acc: u128 = 0;
    let mut pending = 0;
    for value in values {
        acc |= u128::from(value) << pending;
        pending += width;
        if pending >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            pending -= 64;
        }
    }
    while pending > 0 {
        out.push(acc as u8);
        acc >>= 8;
        pending = pending.saturating_sub(8);
    }
}

/// Reads `count` values of `width` bits from `bytes`, which must be exactly
/// `packed_len(count, width)` long. Fails with the index of the first value
/// that is not below `modulus`; unused padding bits must be zero so that every
/// value has exactly one encoding.
pub(crate) fn unpack_checked(
    bytes: &[u8],
    count: usize,
    width: usize,
    modulus: u64,
) -> Result<Vec<u64>, usize> {
    if bytes.len() != packed_len(count, width) {
        return Err(0);
    }
    let mask = (1u128 << width) - 1;
    // Whole 64-bit words while there are (at most 63 bits held, so a word
    // fits in the u128), then single bytes for the tail.
    let mut words = bytes.chunks_exact(8);
    let mut tail = words.remainder().iter();
    let mut acc: u128 = 0;
    let mut available = 0;
    let mut out = Vec::with_capacity(count);
    for index in 0..count {
        if available < width {
            if let Some(word) = words.next() {
                let mut le = [0u8; 8];
                le.copy_from_slice(word);
                acc |= u128::from(u64::from_le_bytes(le)) << available;
                available += 64;
            }
        }
        while available < width {
            let byte = tail.next().ok_or(index)?;
            acc |= u128::from(*byte) << available;
            available += 8;
        }
        let value = (acc & mask) as u64;
        if value >= modulus {
            return Err(index);
        }
        out.push(value);
        acc >>= width;
        available -= width;
    }
    if acc != 0 {
        return Err(count);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_odd_widths() {
        for (modulus, width) in [
            (40961u64, 16),
            (3, 2),
            ((1 << 40) - 87, 40),
            (u64::MAX >> 2, 62),
        ] {
            assert_eq!(bit_width(modulus), width);
            let values: Vec<u64> = (0..24u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % modulus)
                .collect();
            let mut bytes = Vec::new();
            pack_into(&mut bytes, values.iter().copied(), width);
            assert_eq!(bytes.len(), packed_len(values.len(), width));
            assert_eq!(
                unpack_checked(&bytes, values.len(), width, modulus),
                Ok(values)
            );
        }
    }

    #[test]
    fn rejects_out_of_range_and_padding() {
        // 13 < 16 needs 4 bits; 3 values = 12 bits = 2 bytes with 4 padding bits.
        let mut bytes = Vec::new();
        pack_into(&mut bytes, [1u64, 12, 7], 4);
        assert_eq!(unpack_checked(&bytes, 3, 4, 13), Ok(vec![1, 12, 7]));
        assert_eq!(unpack_checked(&bytes, 3, 4, 12), Err(1));
        bytes[1] |= 0x80;
        assert_eq!(unpack_checked(&bytes, 3, 4, 13), Err(3));
        assert_eq!(unpack_checked(&bytes[..1], 3, 4, 13), Err(0));
    }
}
