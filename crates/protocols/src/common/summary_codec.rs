//! Summary values on the wire: a sorted set of pseudorandom `bits`-bit
//! values in Elias-Fano form.
//!
//! The sender's summary values are a set (their order is sorted away so
//! that it says nothing), and a set of `n` uniform `L`-bit values carries
//! only about `n·(L - log2 n + 1.44)` bits of information. Elias-Fano gets
//! within a bit of that: each value's top `b = ⌊log2 n⌋` bits (its
//! *bucket*) are sent as the gaps between consecutive buckets in unary
//! (one `1` per value after as many `0`s as the bucket advanced: at most
//! `n + 2^b ≤ 2n` bits in all), the other `L - b` bits as they are. At
//! `n = 2^20` and `L = 82` that is 64 bits per value instead of 88 for
//! whole bytes.
//!
//! The unary part is always `n + 2^b` bits long (zeros after the last
//! value's `1`), so the encoding's length depends on `n` and `L` only:
//! it says nothing of the values, and a job's equally full buckets cost
//! equal bytes.
//!
//! Written by hand: the format is this protocol's own (no crate encodes a
//! sorted set of 192-bit words), and it is a few dozen lines of bit
//! packing. The decoder takes the exact length, refuses non-zero padding
//! and a bucket past `2^b`, and allocates only for the count it was told
//! to expect at most.
//!
//! Layout: `count` (u64 LE), the unary part, then the low parts (`count ·
//! (L - b)` bits), each part little-endian in bit order and zero-padded to
//! a byte.

use psikit_transport::DecodeError;

use super::summaries::Summary;

/// Bytes of the count.
const HEADER: usize = 8;

/// How the bits of a `bits`-bit summary value split: the first word's
/// `top` value bits (the sort order's most significant) of which the
/// highest `bucket` are the unary part.
#[derive(Clone, Copy, Debug)]
struct Split {
    bits: u32,
    top: u32,
    bucket: u32,
}

impl Split {
    fn new(bits: u32, count: u64) -> Self {
        let top = bits.min(64);
        let bucket = match count {
            0 => 0,
            c => c.ilog2().min(top),
        };
        Self { bits, top, bucket }
    }

    /// Bits of a value past its bucket.
    fn low_bits(&self) -> u32 {
        self.bits - self.bucket
    }

    /// Bytes of the unary part of `count` values: `count + 2^b` bits.
    fn high_len(&self, count: u64) -> u128 {
        (u128::from(count) + (1u128 << self.bucket)).div_ceil(8)
    }

    fn bucket_of(&self, v: &Summary) -> u64 {
        shr(v[0], self.top - self.bucket)
    }

    /// Appends the value's bits past its bucket: the rest of the first
    /// word, then the second and third words' value bits.
    fn write_low(&self, v: &Summary, out: &mut BitWriter) {
        out.write(v[0] & mask(self.top - self.bucket), self.top - self.bucket);
        let rest = self.bits - self.top;
        out.write(v[1], rest.min(64));
        out.write(v[2], rest.saturating_sub(64));
    }

    fn read_value(&self, bucket: u64, low: &mut BitReader) -> Result<Summary, DecodeError> {
        let first_low = self.top - self.bucket;
        let first = match first_low {
            64 => low.read(64)?,
            k => bucket << k | low.read(k)?,
        };
        let rest = self.bits - self.top;
        Ok([
            first,
            low.read(rest.min(64))?,
            low.read(rest.saturating_sub(64))?,
        ])
    }
}

/// `x >> k`, 0 for `k = 64`.
fn shr(x: u64, k: u32) -> u64 {
    x.checked_shr(k).unwrap_or(0)
}

/// The low `k` bits set (`k ≤ 64`).
fn mask(k: u32) -> u64 {
    match k {
        64 => u64::MAX,
        k => (1 << k) - 1,
    }
}

/// Encodes `sorted` (ascending, each masked to `bits` bits).
pub fn encode(sorted: &[Summary], bits: u32) -> Vec<u8> {
    let split = Split::new(bits, sorted.len() as u64);
    let mut high = BitWriter::default();
    let mut low = BitWriter::default();
    let mut previous = 0;
    for v in sorted {
        let bucket = split.bucket_of(v);
        high.skip(bucket.checked_sub(previous).expect("values sorted"));
        high.write(1, 1);
        previous = bucket;
        split.write_low(v, &mut low);
    }
    let (mut high, low) = (high.into_bytes(), low.into_bytes());
    high.resize(split.high_len(sorted.len() as u64) as usize, 0);
    let mut out = Vec::with_capacity(HEADER + high.len() + low.len());
    out.extend_from_slice(&(sorted.len() as u64).to_le_bytes());
    out.extend_from_slice(&high);
    out.extend_from_slice(&low);
    out
}

/// Decodes at most `max_count` values of `bits` bits, in ascending order;
/// refuses values out of order and anything else [`encode`] would not
/// have made.
pub fn decode(bytes: &[u8], bits: u32, max_count: u64) -> Result<Vec<Summary>, DecodeError> {
    const FIELD: &str = "summary values";
    if !(1..=192).contains(&bits) {
        return Err(DecodeError::invalid(FIELD, format!("{bits}-bit values")));
    }
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or(DecodeError::Truncated { field: FIELD })
    };
    let count = word(0)?;
    if count > max_count {
        return Err(DecodeError::TooLarge {
            field: FIELD,
            got: count,
            max: max_count,
        });
    }
    let split = Split::new(bits, count);
    // Lengths in u128: a peer's count times the width cannot overflow. The
    // exact length bounds the count by the bytes received (each value has
    // a bit of the unary part) before anything is allocated for it.
    let low_len = (u128::from(count) * u128::from(split.low_bits())).div_ceil(8);
    let high_len = split.high_len(count);
    if (bytes.len() - HEADER) as u128 != high_len + low_len {
        return Err(DecodeError::invalid(
            FIELD,
            "length does not match the count",
        ));
    }
    let (high, low) = bytes[HEADER..].split_at(high_len as usize);
    let mut low = BitReader::new(low);
    let mut ones = BitReader::new(high);
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = ones
            .next_one()
            .ok_or_else(|| DecodeError::invalid(FIELD, "fewer buckets than values"))?;
        let bucket = at - i;
        if bucket >> split.bucket != 0 {
            return Err(DecodeError::invalid(FIELD, "a bucket past the last"));
        }
        let value = split.read_value(bucket, &mut low)?;
        if out.last().is_some_and(|last| *last > value) {
            return Err(DecodeError::invalid(FIELD, "values out of order"));
        }
        out.push(value);
    }
    if !ones.rest_is_zero() || !low.rest_is_zero() {
        return Err(DecodeError::invalid(FIELD, "non-zero padding"));
    }
    Ok(out)
}

/// Bits appended little-endian into words.
#[derive(Default)]
struct BitWriter {
    words: Vec<u64>,
    len: u64,
}

impl BitWriter {
    /// Appends the low `k` bits of `x` (`k ≤ 64`).
    fn write(&mut self, x: u64, k: u32) {
        if k == 0 {
            return;
        }
        let x = x & mask(k);
        let offset = (self.len % 64) as u32;
        if offset == 0 {
            self.words.push(x);
        } else {
            *self.words.last_mut().expect("a started word") |= x << offset;
            if offset + k > 64 {
                self.words.push(x >> (64 - offset));
            }
        }
        self.len += u64::from(k);
    }

    /// Appends `k` zero bits.
    fn skip(&mut self, k: u64) {
        self.len += k;
        self.words.resize(self.len.div_ceil(64) as usize, 0);
    }

    fn into_bytes(self) -> Vec<u8> {
        let mut out: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.truncate(self.len.div_ceil(8) as usize);
        out
    }
}

/// Reads bits little-endian from bytes.
struct BitReader<'a> {
    bytes: &'a [u8],
    at: u64,
}

impl<'a> BitReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// The next `k` bits (`k ≤ 64`).
    fn read(&mut self, k: u32) -> Result<u64, DecodeError> {
        if k == 0 {
            return Ok(0);
        }
        let end = self.at + u64::from(k);
        if end > self.bytes.len() as u64 * 8 {
            return Err(DecodeError::Truncated {
                field: "summary values",
            });
        }
        // Up to nine bytes hold the bits: read them as one u128.
        let first = (self.at / 8) as usize;
        let last = end.div_ceil(8) as usize;
        let mut buf = [0u8; 16];
        buf[..last - first].copy_from_slice(&self.bytes[first..last]);
        let v = u128::from_le_bytes(buf) >> (self.at % 8);
        self.at = end;
        Ok(v as u64 & mask(k))
    }

    /// The position of the next set bit, reading through it (the unary
    /// part's next value).
    fn next_one(&mut self) -> Option<u64> {
        let mut byte = (self.at / 8) as usize;
        let mut bits = u32::from(*self.bytes.get(byte)?) >> (self.at % 8) << (self.at % 8);
        while bits == 0 {
            byte += 1;
            bits = u32::from(*self.bytes.get(byte)?);
        }
        let at = byte as u64 * 8 + u64::from(bits.trailing_zeros());
        self.at = at + 1;
        Some(at)
    }

    /// Whether every bit past the read ones is zero.
    fn rest_is_zero(&self) -> bool {
        let first = (self.at / 8) as usize;
        match self.bytes.get(first..) {
            Some([partial, rest @ ..]) => {
                partial >> (self.at % 8) == 0 && rest.iter().all(|&b| b == 0)
            }
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::summaries::pack;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, bits: u32, rng: &mut impl Rng) -> Vec<Summary> {
        let mut v: Vec<Summary> = (0..n).map(|_| pack(&rng.gen::<[u8; 24]>(), bits)).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn values_of_every_width_and_count_come_back() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for bits in [1, 7, 42, 63, 64, 65, 82, 127, 128, 129, 168, 192] {
            for n in [0, 1, 2, 3, 100, 4097] {
                let values = random(n, bits, &mut rng);
                let bytes = encode(&values, bits);
                assert_eq!(
                    decode(&bytes, bits, n as u64).expect("decodes"),
                    values,
                    "{bits} {n}"
                );
                if n > 0 {
                    assert!(
                        decode(&bytes, bits, n as u64 - 1).is_err(),
                        "over the count"
                    );
                }
            }
        }
    }

    #[test]
    fn a_million_values_of_82_bits_take_64_bits_each() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let n = 1 << 20;
        let values = random(n, 82, &mut rng);
        let bytes = encode(&values, 82);
        assert_eq!(
            bytes.len(),
            8 + n * 64 / 8,
            "62 low bits and 2 unary bits each"
        );
        assert_eq!(decode(&bytes, 82, n as u64).expect("decodes"), values);
    }

    #[test]
    fn skewed_and_repeated_values_come_back() {
        let values: Vec<Summary> = [[0, 0, 0], [0, 0, 0], [5, 1, 0], [u64::MAX, 3, 0]].to_vec();
        let bytes = encode(&values, 66);
        assert_eq!(decode(&bytes, 66, 4).expect("decodes"), values);
    }

    #[test]
    fn the_length_depends_on_the_count_only() {
        let low: Vec<Summary> = (0..100u64).map(|i| [i, 0, 0]).collect();
        let high: Vec<Summary> = (0..100u64).map(|i| [u64::MAX - 100 + i, 0, 0]).collect();
        assert_eq!(encode(&low, 64).len(), encode(&high, 64).len());
    }

    #[test]
    fn every_damage_is_refused() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let values = random(301, 50, &mut rng);
        let bytes = encode(&values, 50);
        assert!(decode(&bytes, 50, 301).is_ok());
        for cut in [0, 7, 8, 9, bytes.len() - 1] {
            assert!(decode(&bytes[..cut], 50, 301).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer, 50, 301).is_err(), "a trailing byte");
        // A flipped padding bit of the low part (the last byte's top bit:
        // 301 values of 42 low bits leave six bits of padding).
        let mut padded = bytes.clone();
        *padded.last_mut().expect("bytes") ^= 0x80;
        assert!(decode(&padded, 50, 301).is_err(), "non-zero padding");
        // A count larger than the unary part holds.
        let mut count = bytes.clone();
        count[..8].copy_from_slice(&302u64.to_le_bytes());
        assert!(decode(&count, 50, 1000).is_err(), "count");
        // A huge count within the limit must not allocate it.
        let mut huge = bytes;
        huge[..8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        assert!(decode(&huge, 50, u64::MAX).is_err(), "huge count");
        assert!(decode(&[0; 8], 0, 1).is_err(), "zero-bit values");
        // A stray one past the last value in the unary part (3 values
        // have 5 bits of it: bit 7 of its first byte is padding).
        let mut stray = encode(&random(3, 50, &mut rng), 50);
        stray[8] |= 0x80;
        assert!(decode(&stray, 50, 3).is_err(), "a one in the unary padding");
    }
}
