//! APSI's and SEAL's limits on a parameter set, in one place so that the
//! validation and the prime search check the same numbers.

/// Largest number of cuckoo hash functions APSI allows.
pub const HASH_FUNC_COUNT_MAX: u32 = 8;
/// Range of field elements per item that APSI allows.
pub const FELTS_PER_ITEM_RANGE: std::ops::RangeInclusive<u32> = 2..=32;
/// Range of item bits (`felts_per_item * bits_per_felt`) APSI allows: below
/// 80 bits false positives become likely, above 128 bits the item value (16
/// bytes of OPRF output) runs out.
pub const ITEM_BITS_RANGE: std::ops::RangeInclusive<u32> = 80..=128;
/// SEAL's limits on the ring degree (a power of two in this range).
pub const POLY_MODULUS_DEGREE_RANGE: std::ops::RangeInclusive<u32> = 2..=131_072;
/// SEAL's limit on the bit size of any modulus it generates or accepts.
pub const MODULUS_BITS_MAX: u32 = 60;
/// SEAL's limit on the number of coefficient moduli.
pub const COEFF_MODULUS_COUNT_MAX: usize = 64;
