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
//! A run's values travel in 16 *segments* by their top four bits
//! ([`Layout::segmented`]), each a message of its own, so that the
//! receiver decodes and looks up one segment while the sender encodes and
//! sends the next. A segment's values share their top bits, which are not
//! sent, and its bucket is the next `b - 4` bits, `b` from the run's whole
//! count: the segments' unary parts add up to the `n + 2^b` bits of one
//! set, and the low parts are as long. Each segment's length gives its
//! count away (to the receiver, who gets the values anyway, and to an
//! observer of the traffic, to whom they are counts of pseudorandom
//! values, a multinomial sample that says nothing of the sets). The last
//! segment is padded with zeros to the run's length, a function of the
//! count only: one set's length plus 15 headers and 28 bytes for the
//! segments' roundings to a byte.
//!
//! Written by hand: the format is this protocol's own (no crate encodes a
//! sorted set of 192-bit words), and it is a few dozen lines of bit
//! packing. The decoder takes the exact length, refuses non-zero padding
//! and a bucket past `2^b`, and allocates only for the count it was told
//! to expect at most.
//!
//! Layout of a segment (or of a whole set): `count` (u64 LE), the unary
//! part, then the low parts (`count · (L - s - b)` bits, `s` the segment
//! bits), each part little-endian in bit order and zero-padded to a byte.

use psikit_transport::DecodeError;

use super::summaries::Summary;

/// Bytes of the count.
const HEADER: usize = 8;

/// Top value bits that name a segment: a run's values travel as 16
/// segments, so that the receiver looks up one while the next is sent.
const SEGMENT_BITS: u32 = 4;

/// How the bits of a run's `bits`-bit summary values split: the first
/// word's `top` value bits (the sort order's most significant), of which
/// the highest `fixed` name the value's segment (not sent: a segment's
/// values share them) and the next `bucket` are the unary part. `bucket`
/// comes from the run's whole count, so the segments' unary parts add up
/// to the `count + 2^b` bits of one Elias-Fano set of all the values.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    bits: u32,
    top: u32,
    fixed: u32,
    bucket: u32,
    /// Values in the run, all segments together.
    count: u64,
}

impl Layout {
    /// `count` values of `bits` bits (1 to 192) in one segment.
    pub fn whole(bits: u32, count: u64) -> Self {
        Self::with_segments(bits, count, 0)
    }

    /// `count` values of `bits` bits in `2^4` segments by their top bits
    /// (fewer if the first word holds fewer value bits).
    pub fn segmented(bits: u32, count: u64) -> Self {
        Self::with_segments(bits, count, SEGMENT_BITS)
    }

    fn with_segments(bits: u32, count: u64, segment_bits: u32) -> Self {
        let top = bits.min(64);
        let fixed = segment_bits.min(top);
        let all = match count {
            0 => 0,
            c => c.ilog2().min(top),
        };
        Self {
            bits,
            top,
            fixed,
            bucket: all.saturating_sub(fixed),
            count,
        }
    }

    /// Bytes of a segment of `count` values, unpadded.
    fn natural_len(&self, count: u64) -> u128 {
        HEADER as u128 + self.high_len(count) + self.low_len(count)
    }

    /// Bytes of the whole run, every segment together: the unary and low
    /// parts of one set, plus the headers and the most that the segments'
    /// roundings to a byte can add (`⌊7s/8⌋` bytes a part for `s`
    /// segments: each rounding adds at most 7 bits). The last segment is
    /// padded to it, so that the run's length depends on its count only
    /// (a job's equally full buckets still cost equal bytes).
    fn total_len(&self) -> u128 {
        let s = self.segments() as u128;
        let high = u128::from(self.count) + (s << self.bucket);
        let low = u128::from(self.count) * u128::from(self.low_bits());
        s * HEADER as u128 + high.div_ceil(8) + low.div_ceil(8) + 2 * (7 * s / 8)
    }

    /// Zero bytes after segment `segment` of `count` values when the
    /// segments before it took `before` bytes: none but after the last;
    /// `None` if the run would be longer than [`Layout::total_len`].
    fn padding(&self, segment: usize, count: u64, before: u128) -> Option<u128> {
        match segment + 1 == self.segments() {
            true => self
                .total_len()
                .checked_sub(before + self.natural_len(count)),
            false => Some(0),
        }
    }

    /// Top value bits naming a segment.
    pub fn segment_bits(&self) -> u32 {
        self.fixed
    }

    /// Number of segments.
    pub fn segments(&self) -> usize {
        1 << self.fixed
    }

    /// `sorted` (ascending) cut into its segments, in order: one slice
    /// each, empty ones included (the tests' reference; a sender cuts its
    /// values by [`Layout::segment_of`] before sorting them).
    #[cfg(test)]
    pub fn split<'a>(&self, sorted: &'a [Summary]) -> Vec<&'a [Summary]> {
        let mut rest = sorted;
        (0..self.segments())
            .map(|segment| {
                let (part, tail) =
                    rest.split_at(rest.partition_point(|v| self.segment_of(v) == segment));
                rest = tail;
                part
            })
            .collect()
    }

    /// The segment of a value (masked to `bits` bits).
    pub fn segment_of(&self, v: &Summary) -> usize {
        shr(v[0], self.top - self.fixed) as usize
    }

    /// The first word's bits after the segment and the bucket.
    fn first_low(&self) -> u32 {
        self.top - self.fixed - self.bucket
    }

    /// Bits of a value past its segment and bucket.
    fn low_bits(&self) -> u32 {
        self.bits - self.fixed - self.bucket
    }

    /// Bytes of the unary part of `count` values: `count + 2^b` bits.
    fn high_len(&self, count: u64) -> u128 {
        (u128::from(count) + (1u128 << self.bucket)).div_ceil(8)
    }

    /// Bytes of the low parts of `count` values. In u128: a peer's count
    /// times the width cannot overflow.
    fn low_len(&self, count: u64) -> u128 {
        (u128::from(count) * u128::from(self.low_bits())).div_ceil(8)
    }

    fn bucket_of(&self, v: &Summary) -> u64 {
        shr(v[0], self.first_low()) & mask(self.bucket)
    }

    /// Appends the value's bits past its bucket: the rest of the first
    /// word, then the second and third words' value bits.
    fn write_low(&self, v: &Summary, out: &mut BitWriter) {
        out.write(v[0] & mask(self.first_low()), self.first_low());
        let rest = self.bits - self.top;
        out.write(v[1], rest.min(64));
        out.write(v[2], rest.saturating_sub(64));
    }

    /// Reads a value's bits past its bucket ([`Layout::write_low`]) in one
    /// read where they fit in a word (82-bit values at `2^20`: 44 + 18
    /// bits), else a field at a time.
    fn read_value(
        &self,
        segment: usize,
        bucket: u64,
        low: &mut BitReader,
    ) -> Result<Summary, DecodeError> {
        let k = self.first_low();
        let rest = self.bits - self.top;
        let head = shl(segment as u64, self.top - self.fixed) | shl(bucket, k);
        if k + rest <= 64 {
            let v = low.read(k + rest)?;
            return Ok([head | v & mask(k), shr(v, k), 0]);
        }
        Ok([
            head | low.read(k)?,
            low.read(rest.min(64))?,
            low.read(rest.saturating_sub(64))?,
        ])
    }
}

/// `x >> k`, 0 for `k = 64`.
fn shr(x: u64, k: u32) -> u64 {
    x.checked_shr(k).unwrap_or(0)
}

/// `x << k`, 0 for `k = 64`.
fn shl(x: u64, k: u32) -> u64 {
    x.checked_shl(k).unwrap_or(0)
}

/// The low `k` bits set (`k ≤ 64`).
fn mask(k: u32) -> u64 {
    match k {
        64 => u64::MAX,
        k => (1 << k) - 1,
    }
}

/// Encodes `sorted` (ascending, each masked to `bits` bits) as one set.
pub fn encode(sorted: &[Summary], bits: u32) -> Vec<u8> {
    encode_segment(&Layout::whole(bits, sorted.len() as u64), 0, sorted, 0)
}

/// Decodes at most `max_count` values of `bits` bits sent as one set
/// ([`encode`]).
pub fn decode(bytes: &[u8], bits: u32, max_count: u64) -> Result<Vec<Summary>, DecodeError> {
    check_bits(bits)?;
    // The layout's bucket comes from the count the bytes give.
    let count = count_of(bytes)?;
    decode_segment(&Layout::whole(bits, count), 0, bytes, max_count, 0)
}

/// Encodes segment `segment` of `layout`: `sorted`, ascending, every value
/// of that segment; `before`, the bytes of the segments before it (the
/// last one is padded to the run's length).
pub fn encode_segment(
    layout: &Layout,
    segment: usize,
    sorted: &[Summary],
    before: u128,
) -> Vec<u8> {
    let mut high = BitWriter::default();
    let mut low = BitWriter::default();
    let mut previous = 0;
    for v in sorted {
        assert_eq!(layout.segment_of(v), segment, "a value of another segment");
        let bucket = layout.bucket_of(v);
        high.skip(bucket.checked_sub(previous).expect("values sorted"));
        high.write(1, 1);
        previous = bucket;
        layout.write_low(v, &mut low);
    }
    let count = sorted.len() as u64;
    let (mut high, low) = (high.into_bytes(), low.into_bytes());
    high.resize(layout.high_len(count) as usize, 0);
    let pad = layout
        .padding(segment, count, before)
        .expect("the run's values fit its length");
    let mut out = Vec::with_capacity(HEADER + high.len() + low.len() + pad as usize);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&high);
    out.extend_from_slice(&low);
    out.resize(out.len() + pad as usize, 0);
    out
}

const FIELD: &str = "summary values";

fn check_bits(bits: u32) -> Result<(), DecodeError> {
    match (1..=192).contains(&bits) {
        true => Ok(()),
        false => Err(DecodeError::invalid(FIELD, format!("{bits}-bit values"))),
    }
}

/// The count a segment's bytes start with.
fn count_of(bytes: &[u8]) -> Result<u64, DecodeError> {
    bytes
        .get(..HEADER)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or(DecodeError::Truncated { field: FIELD })
}

/// Decodes segment `segment` of `layout` (at most `max_count` values), in
/// ascending order; refuses values out of order and anything else
/// [`encode_segment`] would not have made.
pub fn decode_segment(
    layout: &Layout,
    segment: usize,
    bytes: &[u8],
    max_count: u64,
    before: u128,
) -> Result<Vec<Summary>, DecodeError> {
    check_bits(layout.bits)?;
    if segment >= layout.segments() {
        return Err(DecodeError::invalid(FIELD, "a segment past the last"));
    }
    let count = count_of(bytes)?;
    if count > max_count {
        return Err(DecodeError::TooLarge {
            field: FIELD,
            got: count,
            max: max_count,
        });
    }
    // The exact length bounds the count by the bytes received (each value
    // has a bit of the unary part) before anything is allocated for it.
    let pad = layout.padding(segment, count, before);
    let natural = layout.natural_len(count);
    if pad.map(|p| natural + p) != Some(bytes.len() as u128) {
        return Err(DecodeError::invalid(
            FIELD,
            "length does not match the count",
        ));
    }
    let padded = bytes.len() - natural as usize;
    let (high, low) = bytes[HEADER..bytes.len() - padded].split_at(layout.high_len(count) as usize);
    if bytes[bytes.len() - padded..].iter().any(|&b| b != 0) {
        return Err(DecodeError::invalid(FIELD, "non-zero padding"));
    }
    let mut low = BitReader::new(low);
    let mut ones = BitReader::new(high);
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = ones
            .next_one()
            .ok_or_else(|| DecodeError::invalid(FIELD, "fewer buckets than values"))?;
        let bucket = at - i;
        if bucket >> layout.bucket != 0 {
            return Err(DecodeError::invalid(FIELD, "a bucket past the last"));
        }
        let value = layout.read_value(segment, bucket, &mut low)?;
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
        // Up to nine bytes hold the bits: read them as one u128, a whole
        // 16-byte load where the bytes allow (a copy of variable length
        // is a `memcpy` call, which cost most of the decoding).
        let first = (self.at / 8) as usize;
        let word = match self.bytes.get(first..first + 16) {
            Some(whole) => u128::from_le_bytes(whole.try_into().expect("16 bytes")),
            None => {
                let last = end.div_ceil(8) as usize;
                let mut buf = [0u8; 16];
                buf[..last - first].copy_from_slice(&self.bytes[first..last]);
                u128::from_le_bytes(buf)
            }
        };
        let v = word >> (self.at % 8);
        self.at = end;
        Ok(v as u64 & mask(k))
    }

    /// The position of the next set bit, reading through it (the unary
    /// part's next value): eight bytes at a time where the bytes allow,
    /// then byte by byte at the end.
    fn next_one(&mut self) -> Option<u64> {
        let mut byte = (self.at / 8) as usize;
        let mut skip = self.at % 8;
        while let Some(word) = self.bytes.get(byte..byte + 8) {
            let bits = u64::from_le_bytes(word.try_into().expect("8 bytes")) >> skip;
            if bits != 0 {
                let at = byte as u64 * 8 + skip + u64::from(bits.trailing_zeros());
                self.at = at + 1;
                return Some(at);
            }
            (byte, skip) = (byte + 8, 0);
        }
        let mut bits = u32::from(*self.bytes.get(byte)?) >> skip << skip;
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

    /// A run split into segments comes back segment by segment, and its
    /// length (the last segment padded) depends on its count only.
    #[test]
    fn segments_come_back_in_a_length_of_the_count() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        for (bits, n) in [
            (3, 20),
            (6, 100),
            (50, 0),
            (50, 5),
            (82, 70_000),
            (130, 3000),
        ] {
            let layout = Layout::segmented(bits, n as u64);
            let mut totals = Vec::new();
            for skewed in [false, true] {
                let mut values = random(n, bits, &mut rng);
                if skewed {
                    // Every value in the first segments: other roundings.
                    values.iter_mut().for_each(|v| v[0] >>= 2);
                    values.sort_unstable();
                }
                let (mut before, mut back) = (0, Vec::<Summary>::new());
                for (segment, part) in layout.split(&values).into_iter().enumerate() {
                    let bytes = encode_segment(&layout, segment, part, before);
                    let got = decode_segment(&layout, segment, &bytes, n as u64, before);
                    assert_eq!(got.expect("decodes"), part, "{bits} {n} {segment}");
                    if !part.is_empty() && segment + 2 < layout.segments() {
                        let other = decode_segment(&layout, segment + 1, &bytes, n as u64, before);
                        assert_ne!(other.ok(), Some(part.to_vec()), "another segment's values");
                    }
                    before += bytes.len() as u128;
                    back.extend_from_slice(part);
                }
                assert_eq!(back, values);
                totals.push(before);
            }
            assert_eq!(totals, [layout.total_len(); 2], "{bits} {n}");
            let whole = encode(&random(n, bits, &mut rng), bits).len() as u128;
            assert!(
                totals[0] <= whole + 9 * 2 * layout.segments() as u128,
                "{bits} {n}"
            );
            let past = decode_segment(&layout, layout.segments(), &encode(&[], bits), 1, 0);
            assert!(past.is_err(), "a segment past the last");
        }
    }

    /// The last segment's padding is exact and zero.
    #[test]
    fn the_last_segments_padding_is_checked() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let values = random(300, 50, &mut rng);
        let layout = Layout::segmented(50, 300);
        let last = layout.segments() - 1;
        // As if the earlier segments took 100 bytes.
        let bytes = encode_segment(&layout, last, layout.split(&values)[last], 100);
        assert!(decode_segment(&layout, last, &bytes, 300, 100).is_ok());
        assert!(
            decode_segment(&layout, last, &bytes, 300, 101).is_err(),
            "short"
        );
        assert!(
            decode_segment(&layout, last, &bytes, 300, 99).is_err(),
            "long"
        );
        let mut dirty = bytes;
        *dirty.last_mut().expect("padding") = 1;
        assert!(
            decode_segment(&layout, last, &dirty, 300, 100).is_err(),
            "non-zero"
        );
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
