//! Wire messages of RR16 (protocol id [`PROTOCOL_ID`]). The OT extension's
//! own messages travel under the OT layer's protocol id.
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | both | [`Hello`]: mode, reveal flag, own set size |
//! | 2 | S -> R | coin toss: commitment to the sender's share |
//! | 3 | R -> S | coin toss: the receiver's share |
//! | 4 | S -> R | coin toss: the sender's share (opening) |
//! | 5 | S -> R | cut-and-choose challenge `C_t` (index gaps) |
//! | 6 | R -> S | response: which of `C_t` used bit 0, and `r*` |
//! | 7 | R -> S | permutation `π_t`, bit-packed (chunked transfer) |
//! | 8 | S -> R | summary values (chunked transfer) |
//! | 9 | R -> S | matched summary values, if the result is revealed |
//!
//! Per chunk: the OT layer's extension header and matrix (R -> S), its KOS
//! seed (S -> R) immediately followed by the challenge (5), the KOS check
//! (R -> S), then the response (6) and `π_t` (7). The extensions are
//! *unconfirmed* (`psikit_ot::messages::KOS_UNCONFIRMED` in their header,
//! so a peer running the older flow with a confirmation round is refused
//! there): neither party waits for the other between chunks, and the
//! sender's checks report failures with an error frame.

use psikit_transport::{DecodeError, Frame, Reader, Writer};

pub const PROTOCOL_ID: u8 = psikit_transport::ids::RR16;

pub const KIND_HELLO: u8 = 1;
pub const KIND_COMMIT: u8 = 2;
pub const KIND_NONCE: u8 = 3;
pub const KIND_OPEN: u8 = 4;
pub const KIND_CHALLENGE: u8 = 5;
pub const KIND_RESPONSE: u8 = 6;
pub const KIND_PERMUTATION: u8 = 7;
pub const KIND_SUMMARIES: u8 = 8;
pub const KIND_REVEAL: u8 = 9;

/// First message of each party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub malicious: bool,
    pub reveal: bool,
    pub set_size: u64,
}

impl Hello {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        w.u8(u8::from(self.malicious))
            .u8(u8::from(self.reveal))
            .u64(self.set_size);
        Frame::new(PROTOCOL_ID, KIND_HELLO, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let hello = Self {
            malicious: flag(&mut r, "mode")?,
            reveal: flag(&mut r, "reveal flag")?,
            set_size: r.u64("set size")?,
        };
        r.finish()?;
        Ok(hello)
    }
}

fn flag(r: &mut Reader, field: &'static str) -> Result<bool, DecodeError> {
    match r.u8(field)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(DecodeError::invalid(field, format!("{other}"))),
    }
}

/// A 32-byte value (commitment, nonce, opening).
pub fn bytes32_frame(kind: u8, value: &[u8; 32]) -> Frame {
    Frame::new(PROTOCOL_ID, kind, value.to_vec())
}

pub fn decode_bytes32(payload: &[u8]) -> Result<[u8; 32], DecodeError> {
    let mut r = Reader::new(payload);
    let v = r.array("32-byte value")?;
    r.finish()?;
    Ok(v)
}

/// The cut-and-choose challenge: strictly increasing OT indices of one
/// chunk, sent as LEB128 gaps.
pub fn challenge_frame(indices: &[u32]) -> Frame {
    let mut w = Writer::with_capacity(indices.len() * 2 + 8);
    w.count(indices.len());
    let mut prev = 0u32;
    for (i, &x) in indices.iter().enumerate() {
        w.varint(u64::from(if i == 0 { x } else { x - prev }));
        prev = x;
    }
    Frame::new(PROTOCOL_ID, KIND_CHALLENGE, w.into_bytes())
}

pub fn decode_challenge(payload: &[u8], chunk_ots: u32) -> Result<Vec<u32>, DecodeError> {
    let mut r = Reader::new(payload);
    let n = r.count(u64::from(chunk_ots), 1, "challenge size")?;
    let mut out = Vec::with_capacity(n);
    let mut prev = 0u64;
    for i in 0..n {
        let gap = r.varint("challenge index")?;
        if i > 0 && gap == 0 {
            return Err(DecodeError::invalid("challenge index", "not increasing"));
        }
        let x = if i == 0 {
            gap
        } else {
            prev.saturating_add(gap)
        };
        if x >= u64::from(chunk_ots) {
            return Err(DecodeError::invalid("challenge index", "out of range"));
        }
        out.push(x as u32);
        prev = x;
    }
    r.finish()?;
    Ok(out)
}

/// The receiver's answer: bit `i` says whether the `i`-th challenged OT used
/// choice bit 0, and `r*` is the XOR of those OTs' messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub zero_bits: Vec<bool>,
    pub proof: u128,
}

impl Response {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        w.bytes(&pack_bools(&self.zero_bits))
            .bytes(&self.proof.to_le_bytes());
        Frame::new(PROTOCOL_ID, KIND_RESPONSE, w.into_bytes())
    }

    pub fn decode(payload: &[u8], challenged: usize) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let bits = r.bytes(challenged.div_ceil(8), "response bits")?;
        let zero_bits = unpack_bools(bits, challenged)?;
        let proof = u128::from_le_bytes(r.array("proof")?);
        r.finish()?;
        Ok(Self { zero_bits, proof })
    }
}

fn pack_bools(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        out[i / 8] |= u8::from(b) << (i % 8);
    }
    out
}

fn unpack_bools(bytes: &[u8], n: usize) -> Result<Vec<bool>, DecodeError> {
    let bits: Vec<bool> = (0..n).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1).collect();
    if n % 8 != 0 && bytes[n / 8] >> (n % 8) != 0 {
        return Err(DecodeError::invalid("response bits", "non-zero padding"));
    }
    Ok(bits)
}

/// Bits needed to write any index below `bound`.
pub fn index_width(bound: u64) -> u32 {
    64 - bound.saturating_sub(1).leading_zeros()
}

/// Packs values of `width` bits each, little-endian bit order. (Values
/// must fit in `width` bits.) Emits whole 64-bit words: `π` has 2^20
/// entries per chunk, and byte-wise emission cost more than building `π`.
pub fn pack_indices(values: &[u32], width: u32) -> Vec<u8> {
    let total = (values.len() as u64 * u64::from(width)).div_ceil(8) as usize;
    let mut out = vec![0u8; total.next_multiple_of(8)];
    let mut words = out.chunks_exact_mut(8);
    let (mut acc, mut bits) = (0u128, 0u32);
    for &v in values {
        debug_assert!(
            width == 32 || v >> width == 0,
            "index wider than {width} bits"
        );
        acc |= u128::from(v) << bits;
        bits += width;
        if bits >= 64 {
            if let Some(word) = words.next() {
                word.copy_from_slice(&(acc as u64).to_le_bytes());
            }
            acc >>= 64;
            bits -= 64;
        }
    }
    if let Some(word) = words.next() {
        word.copy_from_slice(&(acc as u64).to_le_bytes());
    }
    out.truncate(total);
    out
}

/// Reverses [`pack_indices`], checking the exact length and that the
/// padding bits are zero. Reads each value with one unaligned 64-bit load
/// at its byte offset (the sender unpacks 2^20 indices per chunk; a
/// refill loop with variable-length copies cost several times more).
pub fn unpack_indices(bytes: &[u8], count: usize, width: u32) -> Result<Vec<u32>, DecodeError> {
    let total = count as u64 * u64::from(width);
    if bytes.len() as u64 != total.div_ceil(8) || width == 0 || width > 32 {
        return Err(DecodeError::invalid("permutation", "wrong length"));
    }
    let tail_bits = (total % 8) as u32;
    if tail_bits != 0 && bytes.last().is_some_and(|&b| b >> tail_bits != 0) {
        return Err(DecodeError::invalid("permutation", "non-zero padding"));
    }
    let mask = (1u64 << width) - 1;
    // Values whose 8-byte window lies inside `bytes` take the fast path;
    // the last few read a zero-padded copy of the end.
    let mut padded = [0u8; 16];
    let tail_start = bytes.len().saturating_sub(8);
    padded[..bytes.len() - tail_start].copy_from_slice(&bytes[tail_start..]);
    let word_at = |byte: usize| -> u64 {
        match bytes.get(byte..byte + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
            None => {
                let w = &padded[byte - tail_start..byte - tail_start + 8];
                u64::from_le_bytes(w.try_into().expect("8 bytes"))
            }
        }
    };
    Ok((0..count as u64)
        .map(|i| {
            let bit = i * u64::from(width);
            ((word_at((bit / 8) as usize) >> (bit % 8)) & mask) as u32
        })
        .collect())
}

/// Splits a received run of fixed-size summary values.
pub fn split_values(bytes: &[u8], len: usize, max_count: u64) -> Result<Vec<&[u8]>, DecodeError> {
    if len == 0 || bytes.len() % len != 0 {
        return Err(DecodeError::invalid(
            "summary values",
            "length is not a multiple of the value size",
        ));
    }
    let count = (bytes.len() / len) as u64;
    if count > max_count {
        return Err(DecodeError::TooLarge {
            field: "summary values",
            got: count,
            max: max_count,
        });
    }
    Ok(bytes.chunks_exact(len).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_and_challenge_round_trip_and_reject_garbage() {
        let h = Hello {
            malicious: true,
            reveal: false,
            set_size: 1 << 20,
        };
        assert_eq!(Hello::decode(&h.to_frame().payload).unwrap(), h);
        assert!(Hello::decode(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());

        let c = vec![0, 3, 4, 1000, 99_999];
        let f = challenge_frame(&c);
        assert_eq!(decode_challenge(&f.payload, 100_000).unwrap(), c);
        assert!(decode_challenge(&f.payload, 99_999).is_err());
        for cut in 0..f.payload.len() {
            assert!(decode_challenge(&f.payload[..cut], 100_000).is_err());
        }
    }

    #[test]
    fn response_and_indices_round_trip() {
        let r = Response {
            zero_bits: vec![true, false, true, true, false, false, true, false, true],
            proof: 0x1234,
        };
        assert_eq!(Response::decode(&r.to_frame().payload, 9).unwrap(), r);
        assert!(Response::decode(&r.to_frame().payload, 8).is_err());

        for width in [1u32, 7, 20, 22, 32] {
            let max = if width == 32 {
                u32::MAX
            } else {
                (1u32 << width) - 1
            };
            let v: Vec<u32> = (0..1000u32)
                .map(|i| i.wrapping_mul(2_654_435_761) & max)
                .collect();
            let packed = pack_indices(&v, width);
            assert_eq!(unpack_indices(&packed, v.len(), width).unwrap(), v);
            assert!(unpack_indices(&packed[1..], v.len(), width).is_err());
        }
        // Every length around the 8-byte windows, against a bit-by-bit
        // reference.
        for width in [1u32, 5, 21, 32] {
            for count in 0..40usize {
                let v: Vec<u32> = (0..count as u32)
                    .map(|i| i.wrapping_mul(0x9e37_79b9) >> (32 - width))
                    .collect();
                let packed = pack_indices(&v, width);
                let mut reference = vec![0u8; (count * width as usize).div_ceil(8)];
                for (i, &x) in v.iter().enumerate() {
                    for b in 0..width as usize {
                        let at = i * width as usize + b;
                        reference[at / 8] |= (((x >> b) & 1) as u8) << (at % 8);
                    }
                }
                assert_eq!(packed, reference, "{width} x {count}");
                assert_eq!(unpack_indices(&packed, count, width).unwrap(), v);
            }
        }
        // 3 values of 7 bits leave 3 padding bits, which must be zero.
        let mut packed = pack_indices(&[127, 0, 127], 7);
        assert_eq!(unpack_indices(&packed, 3, 7).unwrap(), vec![127, 0, 127]);
        packed[2] |= 0x80;
        assert!(unpack_indices(&packed, 3, 7).is_err());
        assert_eq!(index_width(1 << 20), 20);
        assert_eq!(index_width((1 << 20) + 1), 21);
        assert!(split_values(&[0u8; 30], 10, 2).is_err());
        assert_eq!(split_values(&[0u8; 30], 10, 3).unwrap().len(), 3);
        assert!(split_values(&[0u8; 31], 10, 9).is_err());
    }
}
