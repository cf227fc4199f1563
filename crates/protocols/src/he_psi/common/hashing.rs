//! From OPRF outputs to what the HE protocol computes on: the item value
//! (cut into field elements, "felts", one per SIMD slot of a bin) and the
//! key that encrypts the item's label (paper section 4.2, "OPRF with
//! extended output").

use psikit_primitives::oprf::Output;
use psikit_structures::cuckoo_table::{cuckoo_locations, Locations};

use crate::he_psi::common::label::LabelKey;
use crate::he_psi::common::shape::DbShape;

/// The part of an item's OPRF output that enters the polynomials. It is
/// pseudorandom, so its felts and cuckoo locations are too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemValue(pub [u8; 16]);

/// Splits a 64-byte OPRF output: bytes 0..16 are the item value, bytes
/// 32..64 the label key. Bytes 16..32 are unused, which keeps the two parts
/// apart.
pub fn split_oprf(output: &Output) -> (ItemValue, LabelKey) {
    let mut item = [0u8; 16];
    item.copy_from_slice(&output[..16]);
    let mut key = [0u8; 32];
    key.copy_from_slice(&output[32..]);
    (ItemValue(item), LabelKey(key))
}

/// The distinct cuckoo-table bins of an item: the server stores it in all
/// of them, the client in one.
pub fn locations(shape: &DbShape, value: &ItemValue) -> Locations {
    cuckoo_locations(&value.0, shape.hash_funcs, shape.table_size)
}

/// Cuts the low `felts.len() * bits` bits of `value` into `bits`-bit field
/// elements, lowest first. `felts.len() * bits <= 128` and `2^bits <= t`, so
/// every felt is below the plaintext modulus (parameter validation ensures
/// both).
pub fn item_felts(value: &ItemValue, bits: u32, felts: &mut [u64]) {
    let v = u128::from_le_bytes(value.0);
    let mask = (1u128 << bits) - 1;
    for (i, felt) in felts.iter_mut().enumerate() {
        *felt = ((v >> (i as u32 * bits)) & mask) as u64;
    }
}

/// Cuts a byte string into `bits`-bit felts, little-endian bit order,
/// zero-padding the last one: `felts.len()` must be at least
/// `ceil(8 * bytes.len() / bits)`.
pub fn bytes_to_felts(bytes: &[u8], bits: u32, felts: &mut [u64]) {
    let mut acc: u128 = 0;
    let mut have = 0u32;
    let mut src = bytes.iter();
    let mask = (1u128 << bits) - 1;
    for felt in felts.iter_mut() {
        while have < bits {
            acc |= u128::from(src.next().copied().unwrap_or(0)) << have;
            have += 8;
        }
        *felt = (acc & mask) as u64;
        acc >>= bits;
        have -= bits;
    }
}

/// The inverse of [`bytes_to_felts`]: fills `bytes` from felts of `bits`
/// bits each. Bits of a felt above `bits` are ignored.
pub fn felts_to_bytes(felts: &[u64], bits: u32, bytes: &mut [u8]) {
    let mut acc: u128 = 0;
    let mut have = 0u32;
    let mut felts = felts.iter();
    let mask = (1u128 << bits) - 1;
    for byte in bytes.iter_mut() {
        while have < 8 {
            acc |= (u128::from(felts.next().copied().unwrap_or(0)) & mask) << have;
            have += bits;
        }
        *byte = acc as u8;
        acc >>= 8;
        have -= 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_takes_item_and_key_from_disjoint_bytes() {
        let mut out = [0u8; 64];
        for (i, b) in out.iter_mut().enumerate() {
            *b = i as u8;
        }
        let (item, key) = split_oprf(&out);
        assert_eq!(item.0[0], 0);
        assert_eq!(item.0[15], 15);
        assert_eq!(key.0[0], 32);
        assert_eq!(key.0[31], 63);
    }

    #[test]
    fn item_felts_are_consecutive_bit_fields() {
        let value = ItemValue(u128::MAX.to_le_bytes());
        let mut felts = [0u64; 6];
        item_felts(&value, 16, &mut felts);
        assert!(felts.iter().all(|&f| f == 0xffff));
        let value = ItemValue(0x0123_4567_89ab_cdef_u128.to_le_bytes());
        let mut felts = [0u64; 4];
        item_felts(&value, 16, &mut felts);
        assert_eq!(felts, [0xcdef, 0x89ab, 0x4567, 0x0123]);
    }

    #[test]
    fn byte_felt_round_trip_for_odd_widths() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1037).collect();
        for bits in [13u32, 16, 17, 20, 24, 31] {
            let n = (bytes.len() * 8).div_ceil(bits as usize);
            let mut felts = vec![0u64; n + 2];
            bytes_to_felts(&bytes, bits, &mut felts);
            assert!(felts.iter().all(|&f| f < (1 << bits)));
            assert_eq!(felts[n..], [0, 0]);
            let mut back = vec![0u8; bytes.len()];
            felts_to_bytes(&felts, bits, &mut back);
            assert_eq!(back, bytes, "bits {bits}");
        }
    }
}
