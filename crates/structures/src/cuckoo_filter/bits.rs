//! A fixed-length, little-endian bitstring with random access to fields of
//! 1..=64 bits at arbitrary bit offsets.
//!
//! Bit `k` of the string is bit `k % 64` of word `k / 64`, which is also bit
//! `k % 8` of byte `k / 8` of the little-endian byte encoding, so converting
//! to and from bytes is a plain word-by-word copy.

use super::error::FilterError;

/// Mask with the low `width` bits set (`width` in 1..=64).
#[inline]
pub(crate) fn low_mask(width: u32) -> u64 {
    debug_assert!((1..=64).contains(&width));
    u64::MAX >> (64 - width)
}

/// Packed bitstring. One zero word is kept past the end so that a field
/// straddling the last word boundary can be read and written without a
/// branch; bits past `len_bits` are always zero.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BitTable {
    words: Vec<u64>,
}

impl BitTable {
    /// Number of `u64` words (including the spare one) for `nbits` bits.
    fn words_for(nbits: u64) -> Result<usize, FilterError> {
        usize::try_from(nbits.div_ceil(64) + 1).map_err(|_| {
            FilterError::InvalidParams(format!("{nbits}-bit table does not fit in memory"))
        })
    }

    /// All-zero bitstring of `nbits` bits.
    pub(crate) fn zeroed(nbits: u64) -> Result<Self, FilterError> {
        Ok(Self {
            words: vec![0; Self::words_for(nbits)?],
        })
    }

    /// Decodes exactly `nbits.div_ceil(8)` bytes, rejecting non-zero padding
    /// so that every bitstring has a single encoding.
    pub(crate) fn from_le_bytes(bytes: &[u8], nbits: u64) -> Result<Self, FilterError> {
        let expected = nbits.div_ceil(8);
        if bytes.len() as u64 != expected {
            return Err(FilterError::WrongLength {
                expected,
                actual: bytes.len(),
            });
        }
        let tail_bits = (nbits % 8) as u32;
        if let (Some(&last), true) = (bytes.last(), tail_bits != 0) {
            if last >> tail_bits != 0 {
                return Err(FilterError::NonZeroPadding);
            }
        }
        let mut table = Self::zeroed(nbits)?;
        for (word, chunk) in table.words.iter_mut().zip(bytes.chunks(8)) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_le_bytes(buf);
        }
        Ok(table)
    }

    /// Encodes the first `nbits` bits as `nbits.div_ceil(8)` bytes.
    pub(crate) fn to_le_bytes(&self, nbits: u64) -> Vec<u8> {
        let nbytes = nbits.div_ceil(8) as usize;
        let mut out = Vec::with_capacity(nbytes + 8);
        for word in &self.words {
            if out.len() >= nbytes {
                break;
            }
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.truncate(nbytes);
        out
    }

    /// Reads the `width`-bit field starting at bit `pos`.
    #[inline]
    pub(crate) fn get(&self, pos: u64, width: u32) -> u64 {
        let w = (pos >> 6) as usize;
        let s = (pos & 63) as u32;
        // Index w + 1 first: one bounds check then covers both reads.
        let next = self.words[w + 1];
        let lo = self.words[w] >> s;
        // Two shifts so that s == 0 yields 0 instead of an overflowing shift.
        let hi = (next << 1) << (63 - s);
        (lo | hi) & low_mask(width)
    }

    /// Overwrites the `width`-bit field at bit `pos` with `value`, which must
    /// fit in `width` bits.
    #[inline]
    pub(crate) fn set(&mut self, pos: u64, width: u32, value: u64) {
        let mask = low_mask(width);
        debug_assert_eq!(value & !mask, 0);
        let w = (pos >> 6) as usize;
        let s = (pos & 63) as u32;
        self.words[w] = (self.words[w] & !(mask << s)) | (value << s);
        // Bits that spill into the next word; both are 0 when s == 0.
        let spill_mask = (mask >> 1) >> (63 - s);
        let spill_value = (value >> 1) >> (63 - s);
        self.words[w + 1] = (self.words[w + 1] & !spill_mask) | spill_value;
    }

    /// Copies `nbits` bits from `src` at `src_pos` to `self` at `dst_pos`.
    pub(crate) fn copy_from(&mut self, dst_pos: u64, src: &BitTable, src_pos: u64, nbits: u64) {
        let mut done = 0;
        while done < nbits {
            let width = (nbits - done).min(64) as u32;
            self.set(dst_pos + done, width, src.get(src_pos + done, width));
            done += u64::from(width);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::filter::mix64;
    use super::*;

    /// Reference model: one bool per bit.
    fn model_get(model: &[bool], pos: u64, width: u32) -> u64 {
        (0..width).fold(0, |acc, k| {
            acc | (u64::from(model[(pos + u64::from(k)) as usize]) << k)
        })
    }

    #[test]
    fn random_fields_match_a_bit_model() {
        let nbits = 1000u64;
        let mut table = BitTable::zeroed(nbits).expect("small table");
        let mut model = vec![false; nbits as usize];
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..5000 {
            x = mix64(x);
            let width = (x % 64) as u32 + 1;
            let pos = (x >> 8) % (nbits - u64::from(width) + 1);
            let value = mix64(x ^ 1) & low_mask(width);
            table.set(pos, width, value);
            for k in 0..width {
                model[(pos + u64::from(k)) as usize] = (value >> k) & 1 == 1;
            }
            let probe = (x >> 20) % (nbits - u64::from(width) + 1);
            assert_eq!(table.get(probe, width), model_get(&model, probe, width));
        }
        let bytes = table.to_le_bytes(nbits);
        assert_eq!(bytes.len(), 125);
        let back = BitTable::from_le_bytes(&bytes, nbits).expect("round trip");
        assert!(back == table);
    }

    #[test]
    fn padding_must_be_zero() {
        assert_eq!(
            BitTable::from_le_bytes(&[0xff, 0x10], 12).err(),
            Some(FilterError::NonZeroPadding)
        );
        assert!(BitTable::from_le_bytes(&[0xff, 0x0f], 12).is_ok());
        assert!(matches!(
            BitTable::from_le_bytes(&[0xff], 12),
            Err(FilterError::WrongLength {
                expected: 2,
                actual: 1
            })
        ));
    }
}
