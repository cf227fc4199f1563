//! Bounded encoding and decoding of message payloads.
//!
//! Every protocol message is decoded with a [`Reader`] over a payload that
//! [`crate::frame`] has already bounded in size. The reader checks every
//! length against what is actually left in the buffer *before* it allocates,
//! so a hostile peer can neither make a decoder panic nor make it reserve
//! memory the payload does not contain. All integers are big-endian.

use thiserror::Error;

/// Why a payload could not be decoded. Messages are meant for humans: they
/// name the field that was wrong.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message truncated while reading {field}")]
    Truncated { field: &'static str },
    #[error("{field} is {got}, above the limit of {max}")]
    TooLarge {
        field: &'static str,
        got: u64,
        max: u64,
    },
    #[error("{count} unexpected trailing bytes after the message")]
    TrailingBytes { count: usize },
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

impl DecodeError {
    /// A field whose value is out of range or inconsistent.
    pub fn invalid(field: &'static str, reason: impl std::fmt::Display) -> Self {
        Self::Invalid {
            field,
            reason: reason.to_string(),
        }
    }
}

/// A cursor over a received payload.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Takes exactly `n` bytes.
    pub fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated { field });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, field)?);
        Ok(out)
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    /// Reads a `u32` count and checks it against `max` and against the bytes
    /// left, assuming each counted element takes at least `min_elem_len`
    /// bytes. Callers can then allocate `count` elements safely.
    pub fn count(
        &mut self,
        max: u64,
        min_elem_len: usize,
        field: &'static str,
    ) -> Result<usize, DecodeError> {
        let count = u64::from(self.u32(field)?);
        if count > max {
            return Err(DecodeError::TooLarge {
                field,
                got: count,
                max,
            });
        }
        let needed = count.saturating_mul(min_elem_len as u64);
        if needed > self.buf.len() as u64 {
            return Err(DecodeError::Truncated { field });
        }
        usize::try_from(count).map_err(|_| DecodeError::TooLarge {
            field,
            got: count,
            max,
        })
    }

    /// A `u32`-length-prefixed byte string of at most `max` bytes.
    pub fn var_bytes(&mut self, max: u64, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.count(max, 1, field)?;
        self.bytes(len, field)
    }

    /// A `u32`-length-prefixed UTF-8 string of at most `max` bytes.
    pub fn string(&mut self, max: u64, field: &'static str) -> Result<String, DecodeError> {
        let raw = self.var_bytes(max, field)?;
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::Invalid {
            field,
            reason: "not UTF-8".into(),
        })
    }

    /// An unsigned LEB128 integer of at most 10 bytes, in its shortest
    /// form (what [`Writer::varint`] writes): with overlong forms accepted,
    /// one message would have many encodings.
    pub fn varint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(field)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(DecodeError::invalid(
                        field,
                        "varint is not in its shortest form",
                    ));
                }
                return Ok(value);
            }
        }
        Err(DecodeError::Invalid {
            field,
            reason: "varint overflows 64 bits".into(),
        })
    }

    /// Fails unless the whole payload was consumed: a message with trailing
    /// garbage is malformed, not "probably fine".
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                count: self.buf.len(),
            })
        }
    }
}

/// Appends big-endian fields to a payload buffer; the mirror of [`Reader`].
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: Vec::with_capacity(n),
        }
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// Writes a `u32` element count. Panics only on a local programming error
    /// (more than 2^32 elements in one message), never on peer data.
    pub fn count(&mut self, n: usize) -> &mut Self {
        let n = u32::try_from(n).expect("message element count exceeds u32");
        self.u32(n)
    }

    pub fn var_bytes(&mut self, v: &[u8]) -> &mut Self {
        self.count(v.len()).bytes(v)
    }

    pub fn string(&mut self, v: &str) -> &mut Self {
        self.var_bytes(v.as_bytes())
    }

    pub fn varint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_field_kinds() {
        let mut w = Writer::new();
        w.u8(7)
            .u16(300)
            .u32(70_000)
            .u64(u64::MAX)
            .string("héllo")
            .varint(0)
            .varint(300)
            .varint(u64::MAX);
        let buf = w.into_bytes();
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u16("b").unwrap(), 300);
        assert_eq!(r.u32("c").unwrap(), 70_000);
        assert_eq!(r.u64("d").unwrap(), u64::MAX);
        assert_eq!(r.string(16, "e").unwrap(), "héllo");
        assert_eq!(r.varint("f").unwrap(), 0);
        assert_eq!(r.varint("g").unwrap(), 300);
        assert_eq!(r.varint("h").unwrap(), u64::MAX);
        r.finish().unwrap();
    }

    #[test]
    fn counts_are_checked_before_allocation() {
        // Claims 2^32-1 elements of 32 bytes but carries none.
        let buf = u32::MAX.to_be_bytes();
        let err = Reader::new(&buf).count(u64::MAX, 32, "items").unwrap_err();
        assert_eq!(err, DecodeError::Truncated { field: "items" });
        let err = Reader::new(&buf).count(10, 32, "items").unwrap_err();
        assert!(
            matches!(err, DecodeError::TooLarge { got, max: 10, .. } if got == u32::MAX as u64)
        );
    }

    #[test]
    fn truncation_trailing_and_bad_varint_are_errors() {
        assert!(Reader::new(&[1, 2]).u32("x").is_err());
        let mut r = Reader::new(&[1, 2]);
        r.u8("x").unwrap();
        assert_eq!(
            r.finish().unwrap_err(),
            DecodeError::TrailingBytes { count: 1 }
        );
        assert!(Reader::new(&[0xff; 11]).varint("v").is_err());
        // Overlong forms of 0 and 56 (found by the filter_messages fuzzer).
        assert!(Reader::new(&[0x80, 0x00]).varint("v").is_err());
        assert!(Reader::new(&[0xb8, 0x00]).varint("v").is_err());
        assert_eq!(Reader::new(&[0xb8, 0x01]).varint("v"), Ok(184));
        assert!(Reader::new(&[0xff; 3]).varint("v").is_err());
        assert!(Reader::new(&[0, 0, 0, 1, 0xff]).string(8, "s").is_err());
    }
}
