//! Wire messages of the OT layer (protocol id [`PROTOCOL_ID`]).
//!
//! | kind | direction | payload |
//! |---|---|---|
//! | [`kind::BASE_SENDER`] (1) | base-OT sender → receiver | [`BaseSenderMessage`]: `u32 count`, `A` (32-byte ristretto255 point) |
//! | [`kind::BASE_RECEIVER`] (2) | base-OT receiver → sender | [`BaseReceiverMessage`]: `u32 count`, then `count` × (`r0`, `r1`) (2 × 32 bytes) |
//! | [`kind::EXT_HEADER`] (3) | extension receiver → sender | [`ExtHeader`]: `u8 mode`, `u16 param` (KK13: N; KOS: [`KOS_CONFIRMED`] or [`KOS_UNCONFIRMED`]; IKNP: 0), `u64 first_row`, `u64 n`, `u32 frame_rows` |
//! | [`kind::EXT_MATRIX`] (4) | extension receiver → sender | one frame of the `u` matrix: exactly `frame_rows × columns / 8` bytes |
//! | [`kind::KOS_SEED`] (5) | sender → receiver | 16-byte seed for the check's weights |
//! | [`kind::KOS_CHECK`] (6) | receiver → sender | `x̃` then `t̃_0..t̃_127`, 129 × 16 bytes |
//! | [`kind::KOS_OK`] (7) | sender → receiver | empty: the check passed (not sent in a [`KOS_UNCONFIRMED`] extension) |
//! | [`kind::SILENT_TREES`] (8) | silent OT sender → receiver | [`SilentTrees`]: `u64 count`, then per GGM tree its masked level sums (2 blocks per level) and its correction block |
//! | [`kind::SILENT_CHALLENGE`] (9) | silent OT receiver → sender | [`SilentChallenge`]: the 16-byte key of the malicious check's weights |
//! | [`kind::SILENT_CHECK`] (10) | silent OT sender → receiver | [`SilentCheck`]: the 32-byte hash the receiver compares |
//!
//! Kind 255 is the transport's error message; a failed KOS check is reported
//! with code `Aborted`, a malformed message with `BadRequest`. The base-OT
//! messages implement [`Message`], their kinds taken from [`kind`].
//!
//! A matrix travels as a run of `EXT_MATRIX` frames of about 1 MiB (65,536
//! rows × 16 bytes by default, never above the channel's frame limit) rather
//! than one `Channel::send_chunked` transfer: the header fixes the rows per
//! frame, so each frame's exact size is known before it arrives, and each
//! frame is processed as soon as it arrives. The sender's work on frame `k`
//! overlaps the receiver's work on frame `k + 1`, and neither side buffers
//! the whole matrix.

use psikit_transport::wire::{DecodeError, Reader, Writer};
use psikit_transport::{Channel, ErrorCode, ErrorMessage, Frame, Message, ProtocolId};

use crate::error::OtError;

/// Most base OTs one batch may carry (bounds the receiver's message).
pub const MAX_BASE_OTS: usize = 1 << 16;

/// Protocol id of every OT-layer message.
pub const PROTOCOL_ID: u8 = psikit_transport::ids::OT;

/// Message kinds (see the module table).
pub mod kind {
    pub const BASE_SENDER: u8 = 1;
    pub const BASE_RECEIVER: u8 = 2;
    pub const EXT_HEADER: u8 = 3;
    pub const EXT_MATRIX: u8 = 4;
    pub const KOS_SEED: u8 = 5;
    pub const KOS_CHECK: u8 = 6;
    pub const KOS_OK: u8 = 7;
    pub const SILENT_TREES: u8 = 8;
    pub const SILENT_CHALLENGE: u8 = 9;
    pub const SILENT_CHECK: u8 = 10;
}

/// Base OT, sender → receiver: the batch size and the sender's point `A`
/// (checked by the base OT, not here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaseSenderMessage {
    pub count: u32,
    pub point: [u8; 32],
}

impl Message for BaseSenderMessage {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = kind::BASE_SENDER;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u32(self.count).bytes(&self.point);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            count: r.u32("base OT count")?,
            point: r.array("base OT sender point")?,
        })
    }
}

/// Base OT, receiver → sender: the points `(r_0, r_1)` of each OT (checked
/// by the base OT, not here), at most [`MAX_BASE_OTS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseReceiverMessage {
    pub pairs: Vec<[[u8; 32]; 2]>,
}

impl Message for BaseReceiverMessage {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = kind::BASE_RECEIVER;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.count(self.pairs.len());
        for [r0, r1] in &self.pairs {
            w.bytes(r0).bytes(r1);
        }
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let count = r.count(MAX_BASE_OTS as u64, 64, "base OT count")?;
        let mut pairs = Vec::with_capacity(count);
        for _ in 0..count {
            pairs.push([r.array("base OT point")?, r.array("base OT point")?]);
        }
        Ok(Self { pairs })
    }
}

/// Silent OT, sender → receiver: for `count` correlations, each GGM tree's
/// level sums masked with the level's random-OT messages (left, right) and
/// the tree's correction `Δ ⊕ Σ leaves`, tree-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SilentTrees {
    pub count: u64,
    pub blocks: Vec<u128>,
}

impl Message for SilentTrees {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = kind::SILENT_TREES;
    /// The number of blocks the receiver's own parameters call for.
    type Bounds<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.u64(self.count);
        w.bytes(&encode_blocks(&self.blocks));
    }

    fn read(r: &mut Reader<'_>, blocks: usize) -> Result<Self, DecodeError> {
        let count = r.u64("silent OT count")?;
        let bytes = r.bytes(blocks * 16, "silent OT tree sums")?;
        Ok(Self {
            count,
            blocks: bytes.chunks_exact(16).map(block_from_le).collect(),
        })
    }
}

/// Malicious silent OT, receiver → sender, after all trees of an
/// extension: the key of the check's weights (`silent::check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SilentChallenge(pub u128);

impl Message for SilentChallenge {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = kind::SILENT_CHALLENGE;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.0.to_le_bytes());
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self(u128::from_le_bytes(
            r.array("silent check challenge")?,
        )))
    }
}

/// Malicious silent OT, sender → receiver: the hash of the sender's side
/// of the check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SilentCheck(pub [u8; 32]);

impl Message for SilentCheck {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = kind::SILENT_CHECK;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.0);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        r.array("silent check hash").map(Self)
    }
}

/// KOS header parameter: the sender confirms a passed check with
/// [`kind::KOS_OK`].
pub const KOS_CONFIRMED: u16 = 0;

/// KOS header parameter: the sender does not confirm a passed check (a failed
/// one is still reported with an error frame), and may send messages of its
/// own right after the seed; the receiver goes on without waiting. Saves a
/// round trip per extension for protocols that hear from the sender later
/// anyway ([`Confirm::No`](crate::ext::Confirm::No)).
pub const KOS_UNCONFIRMED: u16 = 1;

/// Which extension a header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Iknp = 1,
    Kos = 2,
    Kk13 = 3,
}

/// Sent by the extension receiver before its matrix, so the sender can
/// check both sides agree on what is being extended and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtHeader {
    pub mode: Mode,
    /// Mode parameter: the number of messages N for KK13, whether the check
    /// is confirmed for KOS ([`KOS_CONFIRMED`], [`KOS_UNCONFIRMED`]), 0 for
    /// IKNP.
    pub param: u16,
    /// Index of the first matrix row (PRG position) of this extension.
    pub first_row: u64,
    /// OTs requested (before padding).
    pub n: u64,
    /// Rows per matrix frame (a multiple of the sub-batch size).
    pub frame_rows: u32,
}

impl ExtHeader {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(23);
        w.u8(self.mode as u8)
            .u16(self.param)
            .u64(self.first_row)
            .u64(self.n)
            .u32(self.frame_rows);
        Frame::new(PROTOCOL_ID, kind::EXT_HEADER, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, OtError> {
        let mut r = Reader::new(payload);
        let mode = match r.u8("mode").map_err(malformed)? {
            1 => Mode::Iknp,
            2 => Mode::Kos,
            3 => Mode::Kk13,
            m => return Err(OtError::Malformed(format!("unknown extension mode {m}"))),
        };
        let param = r.u16("mode parameter").map_err(malformed)?;
        let first_row = r.u64("first row").map_err(malformed)?;
        let n = r.u64("OT count").map_err(malformed)?;
        let frame_rows = r.u32("frame rows").map_err(malformed)?;
        r.finish().map_err(malformed)?;
        Ok(Self {
            mode,
            param,
            first_row,
            n,
            frame_rows,
        })
    }
}

/// Turns a decoding error into [`OtError::Malformed`].
pub(crate) fn malformed(e: impl std::fmt::Display) -> OtError {
    OtError::Malformed(e.to_string())
}

/// Decodes a payload of exactly `count` 16-byte little-endian blocks.
pub(crate) fn decode_blocks(
    payload: &[u8],
    count: usize,
    what: &str,
) -> Result<Vec<u128>, OtError> {
    if payload.len() != count * 16 {
        return Err(OtError::Malformed(format!(
            "{what}: expected {} bytes, got {}",
            count * 16,
            payload.len()
        )));
    }
    Ok(payload.chunks_exact(16).map(block_from_le).collect())
}

/// Encodes blocks as 16-byte little-endian words.
pub(crate) fn encode_blocks(blocks: &[u128]) -> Vec<u8> {
    bytemuck::cast_slice::<u128, [u8; 16]>(blocks)
        .iter()
        .flat_map(|b| *b)
        .collect()
}

/// Reads a 16-byte little-endian block (`bytes` must have 16 bytes).
pub(crate) fn block_from_le(bytes: &[u8]) -> u128 {
    u128::from_le_bytes(bytes.try_into().expect("16-byte block"))
}

/// Tells the peer why we are giving up (best effort), then returns `err`.
pub(crate) async fn abort(chan: &mut Channel, err: OtError) -> OtError {
    let code = match &err {
        OtError::ConsistencyCheck | OtError::SilentCheck => Some(ErrorCode::Aborted),
        OtError::Malformed(_) | OtError::InvalidPoint(_) | OtError::Mismatch(_) => {
            Some(ErrorCode::BadRequest)
        }
        // The peer already knows (it reported the error) or the link is gone.
        OtError::Transport(_) | OtError::Poisoned | OtError::InvalidArgument(_) => None,
    };
    if let Some(code) = code {
        chan.send_error(PROTOCOL_ID, &ErrorMessage::new(code, err.to_string()))
            .await;
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_rejects_garbage() {
        let h = ExtHeader {
            mode: Mode::Kos,
            param: 0,
            first_row: 1 << 40,
            n: 12345,
            frame_rows: 65536,
        };
        assert_eq!(ExtHeader::decode(&h.to_frame().payload).unwrap(), h);
        let mut bad = h.to_frame().payload;
        bad[0] = 9;
        assert!(ExtHeader::decode(&bad).is_err());
        assert!(ExtHeader::decode(&h.to_frame().payload[..22]).is_err());
        let mut long = h.to_frame().payload;
        long.push(0);
        assert!(ExtHeader::decode(&long).is_err());
    }

    /// Checks that `message` travels in a frame of its protocol and kind
    /// whose payload is exactly `payload`, decodes back to itself, and that
    /// the payload cut short or with a trailing byte is refused.
    fn check_message<M>(message: &M, payload: &[u8])
    where
        M: for<'a> Message<Bounds<'a> = ()> + PartialEq + std::fmt::Debug,
    {
        let frame = message.to_frame();
        assert_eq!((frame.protocol, frame.kind), (M::PROTOCOL, M::KIND));
        assert_eq!(frame.payload, payload);
        assert_eq!(&M::decode(payload, ()).unwrap(), message);
        for cut in 0..payload.len() {
            assert!(M::decode(&payload[..cut], ()).is_err(), "cut to {cut}");
        }
        let mut long = payload.to_vec();
        long.push(0);
        assert!(M::decode(&long, ()).is_err());
    }

    #[test]
    fn base_messages_round_trip_with_their_layout_and_refuse_truncation_and_trailing_bytes() {
        let sender = BaseSenderMessage {
            count: 3,
            point: [9; 32],
        };
        check_message(&sender, &[&3u32.to_be_bytes()[..], &[9; 32]].concat());
        let receiver = BaseReceiverMessage {
            pairs: vec![[[1; 32], [2; 32]], [[3; 32], [4; 32]]],
        };
        let layout = [
            &2u32.to_be_bytes()[..],
            &[1; 32],
            &[2; 32],
            &[3; 32],
            &[4; 32],
        ]
        .concat();
        check_message(&receiver, &layout);
        // More pairs than a batch may have.
        let mut w = Writer::new();
        w.u32(MAX_BASE_OTS as u32 + 1);
        assert!(BaseReceiverMessage::decode(&w.into_bytes(), ()).is_err());
    }

    #[test]
    fn blocks_round_trip_and_size_checked() {
        let b = vec![1u128, u128::MAX, 1 << 100];
        let e = encode_blocks(&b);
        assert_eq!(decode_blocks(&e, 3, "x").unwrap(), b);
        assert!(decode_blocks(&e, 2, "x").is_err());
        assert!(decode_blocks(&e[..47], 3, "x").is_err());
    }
}
