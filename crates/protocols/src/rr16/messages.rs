//! Wire messages of RR16 (protocol id [`PROTOCOL_ID`]). The OT extension's
//! own messages travel under the OT layer's protocol id.
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | both | `common::two_party::Hello`: mode, reveal flag, own set size, key format |
//! | 2 | S -> R | [`Commit`]: coin toss, commitment to the sender's share |
//! | 3 | R -> S | [`Nonce`]: coin toss, the receiver's share |
//! | 4 | S -> R | [`Open`]: coin toss, the sender's share (opening) |
//! | 5 | S -> R | [`Challenge`]: cut-and-choose challenge `C_t` (index gaps) |
//! | 6 | R -> S | [`Response`]: which of `C_t` used bit 0, and `r*` |
//! | 7 | R -> S | [`KIND_PERMUTATION`]: permutation `π_t`, bit-packed (chunked transfer) |
//! | 8 | S -> R | [`KIND_SUMMARIES`]: summary values (chunked transfer) |
//! | 9 | R -> S | [`KIND_REVEAL`]: matched summary values, if the result is revealed (chunked transfer) |
//!
//! Kinds 1 to 6 are single frames and implement [`Message`]. Kinds 7 to 9
//! are chunked transfers (`Channel::send_chunked`), larger than a frame may
//! be (a chunk's `π_t` is 2.6 MB at 2^20 OTs, the summary values `n`
//! times up to 21 bytes), so they are not [`Message`]s: their payloads are
//! encoded by [`pack_indices`] and `common::summaries`, and decoded by
//! [`unpack_indices`] and `common::summaries`.
//!
//! Per chunk: the OT layer's extension header and matrix (R -> S), its KOS
//! seed (S -> R) immediately followed by the challenge (5), the KOS check
//! (R -> S), then the response (6) and `π_t` (7). The extensions are
//! *unconfirmed* (`psikit_ot::messages::KOS_UNCONFIRMED` in their header,
//! so a peer running the older flow with a confirmation round is refused
//! there): neither party waits for the other between chunks, and the
//! sender's checks report failures with an error frame.

use psikit_transport::{DecodeError, Message, ProtocolId, Reader, Writer};

use crate::common::messages::{byte_array_message, wire_messages};
use crate::common::two_party::Hello;

pub const PROTOCOL_ID: u8 = psikit_transport::ids::RR16;

/// Kind of the chunked transfer of a chunk's permutation `π_t`.
pub const KIND_PERMUTATION: u8 = 7;
/// Kind of the chunked transfer of the sender's summary values.
pub const KIND_SUMMARIES: u8 = 8;
/// Kind of the chunked transfer of the matched summary values.
pub const KIND_REVEAL: u8 = 9;

byte_array_message!(
    /// Coin toss: the sender's commitment to its share.
    Commit: [u8; 32], PROTOCOL_ID, 2, "coin-toss commitment"
);
byte_array_message!(
    /// Coin toss: the receiver's share.
    Nonce: [u8; 32], PROTOCOL_ID, 3, "coin-toss share"
);
byte_array_message!(
    /// Coin toss: the sender's share, opening its commitment.
    Open: [u8; 32], PROTOCOL_ID, 4, "coin-toss opening"
);

wire_messages! {
    messages: Hello<PROTOCOL_ID>, Commit, Nonce, Open, Challenge, Response;
    others: KIND_PERMUTATION, KIND_SUMMARIES, KIND_REVEAL;
}

/// The cut-and-choose challenge: strictly increasing OT indices of one
/// chunk, sent as LEB128 gaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub indices: Vec<u32>,
}

impl Message for Challenge {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 5;
    /// OTs per chunk: every index is below it.
    type Bounds<'a> = u32;

    fn write(&self, w: &mut Writer) {
        w.count(self.indices.len());
        let mut prev = 0u32;
        for (i, &x) in self.indices.iter().enumerate() {
            w.varint(u64::from(if i == 0 { x } else { x - prev }));
            prev = x;
        }
    }

    fn read(r: &mut Reader<'_>, chunk_ots: u32) -> Result<Self, DecodeError> {
        let n = r.count(u64::from(chunk_ots), 1, "challenge size")?;
        let mut indices = Vec::with_capacity(n);
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
            indices.push(x as u32);
            prev = x;
        }
        Ok(Self { indices })
    }
}

/// The receiver's answer: bit `i` says whether the `i`-th challenged OT used
/// choice bit 0, and `r*` is the XOR of those OTs' messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub zero_bits: Vec<bool>,
    pub proof: u128,
}

impl Message for Response {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 6;
    /// How many OTs the challenge opened.
    type Bounds<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.bytes(&pack_bools(&self.zero_bits))
            .bytes(&self.proof.to_le_bytes());
    }

    fn read(r: &mut Reader<'_>, challenged: usize) -> Result<Self, DecodeError> {
        let bits = r.bytes(challenged.div_ceil(8), "response bits")?;
        let zero_bits = unpack_bools(bits, challenged)?;
        let proof = u128::from_le_bytes(r.array("proof")?);
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
    if !n.is_multiple_of(8) && bytes[n / 8] >> (n % 8) != 0 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec_tests::check_message;
    use crate::common::two_party::{Hello, Mode};

    #[test]
    fn every_message_round_trips_with_its_layout_and_refuses_truncation_and_trailing_bytes() {
        // RR16's hello is the shared one under RR16's id: layout unchanged.
        let hello = Hello::<PROTOCOL_ID> {
            mode: Mode {
                malicious: true,
                low_comm: false,
                reveal: false,
            },
            set_size: 1 << 20,
            key_format: String::new(),
        };
        let layout = [&[1u8, 0][..], &(1u64 << 20).to_be_bytes(), &[0, 0, 0, 0]].concat();
        check_message(&hello, (), &layout);

        check_message(&Commit([1; 32]), (), &[1; 32]);
        check_message(&Nonce([2; 32]), (), &[2; 32]);
        check_message(&Open([3; 32]), (), &[3; 32]);

        // Gaps 0, 3, 1, 996 and 98_999 as LEB128.
        let challenge = Challenge {
            indices: vec![0, 3, 4, 1000, 99_999],
        };
        let layout = [
            &5u32.to_be_bytes()[..],
            &[0, 3, 1, 0xe4, 0x07, 0xb7, 0x85, 0x06],
        ]
        .concat();
        check_message(&challenge, 100_000, &layout);

        let response = Response {
            zero_bits: vec![true, false, true, true, false, false, true, false, true],
            proof: 0x1234,
        };
        let layout = [&[0b0100_1101u8, 1][..], &0x1234u128.to_le_bytes()].concat();
        check_message(&response, 9, &layout);
    }

    #[test]
    fn challenge_rejects_garbage() {
        let f = Challenge {
            indices: vec![0, 3, 4, 1000, 99_999],
        }
        .to_frame();
        // An index out of range for a smaller chunk.
        assert!(Challenge::decode(&f.payload, 99_999).is_err());
        // A repeated index.
        let repeated = [&2u32.to_be_bytes()[..], &[5, 0]].concat();
        assert!(Challenge::decode(&repeated, 100).is_err());
    }

    #[test]
    fn response_and_indices_round_trip() {
        let r = Response {
            zero_bits: vec![true, false, true, true, false, false, true, false, true],
            proof: 0x1234,
        };
        assert_eq!(Response::decode(&r.to_frame().payload, 9).unwrap(), r);
        assert!(Response::decode(&r.to_frame().payload, 8).is_err());
        // Padding bits past the ninth must be zero.
        let mut padded = r.to_frame().payload;
        padded[1] |= 0x80;
        assert!(Response::decode(&padded, 9).is_err());

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
    }
}
