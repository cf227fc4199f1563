//! Wire messages of VOLE-PSI (protocol id [`PROTOCOL_ID`]). The silent
//! VOLE's own messages travel under the OT layer's protocol id.
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | both | `common::two_party::Hello`: mode, reveal flag, own set size |
//! | 2 | R -> S | [`OkvsSeed`]: the public hashing seed of the receiver's OKVS |
//! | 3 | R -> S | [`KIND_MASKED`]: the OKVS table masked with the VOLE's `C`, 16 bytes per entry (chunked transfer) |
//! | 4 | S -> R | [`KIND_SUMMARIES`]: the sender's truncated OPRF values (chunked transfer) |
//! | 5 | R -> S | [`KIND_REVEAL`]: matched values, if the result is revealed (chunked transfer) |
//! | 6 | S -> R | [`Commitment`] (malicious): the sender's commitment to its offset share |
//! | 7 | R -> S | [`ReceiverOffset`] (malicious): the receiver's offset share |
//! | 8 | S -> R | [`SenderOffset`] (malicious): the sender's offset share, opening 6 |
//!
//! Order: hellos, 6, seed, the silent VOLE (base OTs, IKNP or KOS, trees,
//! and in malicious mode its check), then 7, 3, 8, 4 and 5. Kinds 3 to 5
//! are larger than a frame may be (the masked table
//! is about 20 MB at 2^20 items), so they are chunked transfers whose exact
//! length is known in advance: the masked table has the length the OKVS
//! parameters give, summary values are checked by
//! `common::summaries`.

use psikit_transport::DecodeError;
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

/// 16-byte little-endian blocks as sent.
pub fn encode_blocks(blocks: &[u128]) -> Vec<u8> {
    let mut out = vec![0u8; blocks.len() * 16];
    out.par_chunks_mut(16)
        .zip(blocks.par_iter())
        .for_each(|(o, b)| o.copy_from_slice(&b.to_le_bytes()));
    out
}

/// Exactly `count` blocks, or an error.
pub fn decode_blocks(bytes: &[u8], count: usize) -> Result<Vec<u128>, DecodeError> {
    if bytes.len() != count * 16 {
        return Err(DecodeError::invalid(
            "masked OKVS table",
            format!("{} bytes, expected {}", bytes.len(), count * 16),
        ));
    }
    Ok(bytes
        .chunks_exact(16)
        .map(|b| u128::from_le_bytes(b.try_into().expect("16 bytes")))
        .collect())
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
        let bytes = encode_blocks(&blocks);
        assert_eq!(decode_blocks(&bytes, 3).expect("3 blocks"), blocks);
        assert!(decode_blocks(&bytes, 2).is_err());
        assert!(decode_blocks(&bytes[..47], 3).is_err());
    }
}
