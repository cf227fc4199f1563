//! Wire messages of VOLE-PSI (protocol id [`PROTOCOL_ID`]). The silent
//! VOLE's own messages travel under the OT layer's protocol id.
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | both | `common::two_party::Hello`: mode, reveal flag, own set size |
//! | 2 | R -> S | [`OkvsSeed`]: the public hashing seed of the receiver's OKVS |
//! | 3 | R -> S | [`KIND_MASKED`]: the OKVS table masked with the VOLE's `C`, a few bins a frame ([`frames`]), 128 bits per entry or the value bits of the low-communication mode |
//! | 4 | S -> R | [`KIND_SUMMARIES`]: the sender's truncated OPRF values (chunked transfer) |
//! | 5 | R -> S | [`KIND_REVEAL`]: matched values, if the result is revealed (chunked transfer) |
//! | 6 | S -> R | [`Commitment`] (malicious): the sender's commitment to its offset share |
//! | 7 | R -> S | [`ReceiverOffset`] (malicious): the receiver's offset share |
//! | 8 | S -> R | [`SenderOffset`] (malicious): the sender's offset share, opening 6 |
//!
//! Order: hellos, 6, seed, the silent VOLE (base OTs, IKNP or KOS, trees,
//! and in malicious mode its check), then 7, the frames of 3, 8, 4 and 5.
//! The masked table (about 20 MB at 2^20 items) goes as frames of whole
//! OKVS bins, each of a length both sides know from the parameters, so
//! that the sender decodes its items of those bins while the receiver
//! encodes the next ones. Kinds 4 and 5 are chunked transfers, checked by
//! `common::summaries`.

use std::ops::Range;

use psikit_structures::okvs::OkvsParams;
use psikit_transport::{DecodeError, CHUNK_BYTES};
use rayon::prelude::*;

use crate::common::messages::{byte_array_message, wire_messages};
use crate::common::two_party::Hello;

pub const PROTOCOL_ID: u8 = psikit_transport::ids::VOLE_PSI;

/// Kind of the chunked transfer of the masked OKVS table.
pub const KIND_MASKED: u8 = 3;
/// Kind of the chunked transfer of the sender's summary values.
pub const KIND_SUMMARIES: u8 = 4;
/// Kind of the chunked transfer of the matched summary values.
pub const KIND_REVEAL: u8 = 5;

byte_array_message!(
    /// The receiver's OKVS hashing seed (public).
    OkvsSeed: [u8; 16], PROTOCOL_ID, 2, "OKVS seed"
);
byte_array_message!(
    /// Malicious mode: `SHA-256(label, w_s)`, sent before the VOLE.
    Commitment: [u8; 32], PROTOCOL_ID, 6, "offset commitment"
);
byte_array_message!(
    /// Malicious mode: the receiver's share `w_r` of the offset, sent once
    /// its VOLE is done.
    ReceiverOffset: [u8; 16], PROTOCOL_ID, 7, "receiver's offset share"
);
byte_array_message!(
    /// Malicious mode: the sender's share `w_s`, opening its [`Commitment`].
    SenderOffset: [u8; 16], PROTOCOL_ID, 8, "sender's offset share"
);

wire_messages! {
    messages: Hello<PROTOCOL_ID>, OkvsSeed, Commitment, ReceiverOffset, SenderOffset;
    others: KIND_MASKED, KIND_SUMMARIES, KIND_REVEAL;
}

/// The bins of each frame of the masked table: as many whole bins as fit
/// in [`CHUNK_BYTES`] (at least one; a bin is at most about 330 KB), in
/// order.
pub fn frames(params: &OkvsParams, bits: u32) -> Vec<Range<usize>> {
    let per_frame = (CHUNK_BYTES / packed_len(params.bin_len(), bits).max(1)).max(1);
    (0..params.bins())
        .step_by(per_frame)
        .map(|first| first..(first + per_frame).min(params.bins()))
        .collect()
}

/// Values sent in groups of eight: eight values of `bits` bits fill
/// exactly `bits` bytes, so groups are packed in parallel.
const GROUP: usize = 8;

/// Values of `bits` bits each (1 to 128; higher bits are dropped), packed
/// little-endian in bit order, the last byte zero-padded. At 128 bits this
/// is each value's 16 little-endian bytes. (The receiver masks as it packs,
/// [`encode_masked_into`]; the tests and the fuzz targets pack plain
/// values.)
#[cfg(any(test, feature = "fuzzing"))]
pub fn encode_values(values: &[u128], bits: u32) -> Vec<u8> {
    let mut out = Vec::new();
    encode_masked_into(values, &vec![0; values.len()], bits, &mut out);
    out
}

/// [`encode_values`] of `values[i] ⊕ masks[i]` (`masks` as long as
/// `values`) into `out`, replacing its contents: the receiver's frames are
/// masked as they are packed, in one pass, into a buffer reused from frame
/// to frame.
pub fn encode_masked_into(values: &[u128], masks: &[u128], bits: u32, out: &mut Vec<u8>) {
    assert_eq!(masks.len(), values.len(), "one mask per value");
    out.clear();
    out.resize(packed_len(values.len(), bits), 0);
    out.par_chunks_mut(bits as usize)
        .zip(values.par_chunks(GROUP))
        .zip(masks.par_chunks(GROUP))
        .for_each(|((out, group), masks)| {
            let mut masked = [0u128; GROUP];
            for ((x, v), m) in masked.iter_mut().zip(group).zip(masks) {
                *x = v ^ m;
            }
            pack_group(&masked[..group.len()], bits, out)
        });
}

/// Exactly `count` values of `bits` bits, or an error (a wrong length or
/// non-zero padding).
pub fn decode_values(bytes: &[u8], count: usize, bits: u32) -> Result<Vec<u128>, DecodeError> {
    const FIELD: &str = "masked OKVS table";
    let want = packed_len(count, bits);
    if bytes.len() != want {
        return Err(DecodeError::invalid(
            FIELD,
            format!("{} bytes, expected {want}", bytes.len()),
        ));
    }
    let mut values = vec![0u128; count];
    values
        .par_chunks_mut(GROUP)
        .zip(bytes.par_chunks(bits as usize))
        .try_for_each(|(group, bytes)| unpack_group(bytes, bits, group))
        .map_err(|()| DecodeError::invalid(FIELD, "non-zero padding"))?;
    Ok(values)
}

/// Bytes of `count` packed values of `bits` bits.
pub fn packed_len(count: usize, bits: u32) -> usize {
    (count as u128 * u128::from(bits)).div_ceil(8) as usize
}

fn pack_group(values: &[u128], bits: u32, out: &mut [u8]) {
    let (mut acc, mut have, mut at) = (0u128, 0u32, 0usize);
    let mask = u128::MAX >> (128 - bits);
    for &v in values {
        let v = v & mask;
        for (part, k) in [
            (v as u64, bits.min(64)),
            ((v >> 64) as u64, bits.saturating_sub(64)),
        ] {
            acc |= u128::from(part) << have;
            have += k;
            if have >= 64 {
                out[at..at + 8].copy_from_slice(&(acc as u64).to_le_bytes());
                (acc, have, at) = (acc >> 64, have - 64, at + 8);
            }
        }
    }
    let tail = have.div_ceil(8) as usize;
    out[at..at + tail].copy_from_slice(&acc.to_le_bytes()[..tail]);
}

fn unpack_group(bytes: &[u8], bits: u32, values: &mut [u128]) -> Result<(), ()> {
    let (mut acc, mut have, mut at) = (0u128, 0u32, 0usize);
    let mut take = |k: u32| -> u64 {
        if have < k {
            let mut word = [0u8; 8];
            let n = (bytes.len() - at).min(8);
            word[..n].copy_from_slice(&bytes[at..at + n]);
            acc |= u128::from(u64::from_le_bytes(word)) << have;
            (have, at) = (have + 8 * n as u32, at + n);
        }
        let part = acc as u64 & u64::MAX.checked_shr(64 - k).unwrap_or(0);
        (acc, have) = (acc.checked_shr(k).unwrap_or(0), have - k);
        part
    };
    for v in values.iter_mut() {
        let low = take(bits.min(64));
        let high = take(bits.saturating_sub(64));
        *v = u128::from(high) << 64 | u128::from(low);
    }
    // Whatever of the last byte the values did not use must be zero.
    match acc {
        0 => Ok(()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec_tests::check_message;

    #[test]
    fn seed_and_blocks_round_trip_and_refuse_bad_lengths() {
        check_message(&OkvsSeed([7; 16]), (), &[7; 16]);
        check_message(&Commitment([1; 32]), (), &[1; 32]);
        check_message(&ReceiverOffset([2; 16]), (), &[2; 16]);
        check_message(&SenderOffset([3; 16]), (), &[3; 16]);
        let blocks = [1u128, u128::MAX, 3];
        let bytes = encode_values(&blocks, 128);
        assert_eq!(
            bytes,
            [1u128.to_le_bytes(), [0xff; 16], 3u128.to_le_bytes()].concat()
        );
        assert_eq!(decode_values(&bytes, 3, 128).expect("3 blocks"), blocks);
        assert!(decode_values(&bytes, 2, 128).is_err());
        assert!(decode_values(&bytes[..47], 3, 128).is_err());
    }

    #[test]
    fn values_of_any_width_pack_tightly_and_come_back() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        for bits in [1, 7, 8, 61, 64, 65, 100, 127, 128] {
            for count in [0, 1, 7, 8, 9, 1001] {
                let mask = u128::MAX >> (128 - bits);
                let values: Vec<u128> = (0..count).map(|_| rng.gen::<u128>() & mask).collect();
                let bytes = encode_values(&values, bits);
                assert_eq!(bytes.len(), packed_len(count, bits), "{bits} {count}");
                assert_eq!(decode_values(&bytes, count, bits).expect("decodes"), values);
                // Masked as packed: the bytes of the XOR, higher bits dropped.
                let masks: Vec<u128> = (0..count).map(|_| rng.gen()).collect();
                let xor: Vec<u128> = values.iter().zip(&masks).map(|(v, m)| v ^ m).collect();
                let mut masked = vec![0xaa; 3];
                encode_masked_into(&values, &masks, bits, &mut masked);
                assert_eq!(masked, encode_values(&xor, bits), "{bits} {count}");
                let padding = (count as u32 * bits) % 8;
                if padding != 0 {
                    let mut bad = bytes.clone();
                    *bad.last_mut().expect("bytes") ^= 0x80;
                    assert!(decode_values(&bad, count, bits).is_err(), "{bits} {count}");
                }
            }
        }
    }
}
