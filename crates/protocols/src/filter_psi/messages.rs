//! Wire messages of the filter protocol (protocol id [`PROTOCOL_ID`]).
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | C -> S | [`SyncRequest`]: the client's cached filter id and epoch |
//! | 2 | S -> C | [`SyncHeader`]: up to date, full filter, or delta |
//! | 3 | S -> C | [`KIND_SYNC_BODY`]: body of a full filter or of a [`DeltaBody`], as a chunked transfer |
//! | 4 | C -> S | [`QueryRequest`]: blinded elements for one filter epoch |
//! | 5 | S -> C | [`QueryResponse`]: evaluated elements, same order |
//!
//! Every frame message implements [`Message`]. Every decoder bounds counts
//! by the bytes present and by the receiver's limits before allocating.

use psikit_primitives::oprf::BlindedElement;
use psikit_transport::{DecodeError, Message, ProtocolId, Reader, Writer};

use crate::common::messages::wire_messages;
use crate::oprf_wire;

/// Protocol id of this protocol in [`psikit_transport::Frame`]s.
pub const PROTOCOL_ID: u8 = psikit_transport::ids::FILTER_PSI;

/// Kind of the chunked transfer that follows a [`SyncHeader`] in
/// [`SyncMode::Full`] (the serialized filter) or [`SyncMode::Delta`] (a
/// [`DeltaBody`]). Not a [`Message`]: the body is split over many frames
/// and may be larger than one frame may be.
pub const KIND_SYNC_BODY: u8 = 3;

/// Which filter a party holds: a random id per built filter plus an epoch
/// counting the updates applied to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterVersion {
    pub filter_id: [u8; 16],
    pub epoch: u64,
}

impl FilterVersion {
    fn write(&self, w: &mut Writer) {
        w.bytes(&self.filter_id).u64(self.epoch);
    }

    fn read(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            filter_id: r.array("filter id")?,
            epoch: r.u64("epoch")?,
        })
    }
}

/// Client asks for the filter, or for what changed since its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    pub have: Option<FilterVersion>,
}

impl Message for SyncRequest {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        match &self.have {
            None => {
                w.u8(0);
            }
            Some(v) => {
                w.u8(1);
                v.write(w);
            }
        }
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let have = match r.u8("cache flag")? {
            0 => None,
            1 => Some(FilterVersion::read(r)?),
            other => return Err(DecodeError::invalid("cache flag", other)),
        };
        Ok(Self { have })
    }
}

/// What the server will send after a [`SyncHeader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    UpToDate = 0,
    Full = 1,
    /// Changed slots since `from_epoch`.
    Delta = 2,
}

/// Server's answer to a [`SyncRequest`]; a body follows unless up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncHeader {
    pub mode: SyncMode,
    pub version: FilterVersion,
    /// For deltas: the epoch the delta starts from.
    pub from_epoch: u64,
    /// SHA-256 of the serialized filter at `version`, so the client can
    /// prove to itself that its copy is exact after applying the body.
    pub digest: [u8; 32],
    /// Most items the server accepts in one [`QueryRequest`].
    pub max_query_items: u32,
    /// How the server's keys are encoded (`psikit_io::KeySpec::key_format`),
    /// or empty if unknown.
    pub key_format: String,
}

impl Message for SyncHeader {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 2;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u8(self.mode as u8);
        self.version.write(w);
        w.u64(self.from_epoch)
            .bytes(&self.digest)
            .u32(self.max_query_items)
            .string(&self.key_format);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let mode = match r.u8("sync mode")? {
            0 => SyncMode::UpToDate,
            1 => SyncMode::Full,
            2 => SyncMode::Delta,
            other => return Err(DecodeError::invalid("sync mode", other)),
        };
        Ok(Self {
            mode,
            version: FilterVersion::read(r)?,
            from_epoch: r.u64("from epoch")?,
            digest: r.array("digest")?,
            max_query_items: r.u32("max query items")?,
            key_format: r.string(psikit_io::MAX_KEY_FORMAT, "key format")?,
        })
    }
}

/// Body of a delta: indices of changed slots and their new fingerprints.
///
/// A payload codec rather than a [`Message`]: it travels as a chunked
/// transfer of [`KIND_SYNC_BODY`] frames (which a full filter uses too),
/// never as one frame, so a `to_frame` would build a frame no peer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaBody {
    /// Strictly increasing global slot indices.
    pub slots: Vec<u64>,
    /// Fingerprints in those slots, bit-packed by the filter.
    pub packed: Vec<u8>,
}

impl DeltaBody {
    /// Indices are sent as LEB128 gaps: a 1% update costs ~1-2 bytes per
    /// changed slot for the index plus the fingerprint's bits.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.packed.len() + 2 * self.slots.len() + 16);
        w.count(self.slots.len());
        let mut prev = 0u64;
        for (i, &b) in self.slots.iter().enumerate() {
            w.varint(if i == 0 { b } else { b - prev });
            prev = b;
        }
        w.var_bytes(&self.packed);
        w.into_bytes()
    }

    pub fn decode(payload: &[u8], num_slots: u64) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let count = r.count(num_slots, 1, "changed slot count")?;
        let mut slots = Vec::with_capacity(count);
        let mut prev = 0u64;
        for i in 0..count {
            let gap = r.varint("slot index")?;
            if i > 0 && gap == 0 {
                return Err(DecodeError::invalid("slot index", "not increasing"));
            }
            let b = prev
                .checked_add(gap)
                .filter(|&b| b < num_slots)
                .ok_or_else(|| DecodeError::invalid("slot index", "out of range"))?;
            slots.push(b);
            prev = b;
        }
        let packed = r.var_bytes(u64::MAX, "slot contents")?.to_vec();
        r.finish()?;
        Ok(Self { slots, packed })
    }
}

/// Blinded client items for one filter version.
#[derive(Debug, PartialEq, Eq)]
pub struct QueryRequest {
    pub version: FilterVersion,
    pub blinded: Vec<BlindedElement>,
}

impl Message for QueryRequest {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 4;
    /// Most items the server accepts in one request.
    type Bounds<'a> = u32;

    fn write(&self, w: &mut Writer) {
        self.version.write(w);
        oprf_wire::write_blinded(w, &self.blinded);
    }

    /// Rejects more than `max_items` elements and any element that is not a
    /// canonical, non-identity ristretto255 encoding.
    fn read(r: &mut Reader<'_>, max_items: u32) -> Result<Self, DecodeError> {
        Ok(Self {
            version: FilterVersion::read(r)?,
            blinded: oprf_wire::read_blinded(r, max_items, "query items")?,
        })
    }
}

/// The server's evaluations, in request order (kind 5).
pub type QueryResponse = oprf_wire::Evaluated<PROTOCOL_ID, 5>;

wire_messages! {
    messages: SyncRequest, SyncHeader, QueryRequest, QueryResponse;
    others: KIND_SYNC_BODY;
}

#[cfg(test)]
mod tests {
    use psikit_primitives::oprf::EvaluatedElement;

    use super::*;
    use crate::codec_tests::{check_message, oprf_elements};

    const VERSION: FilterVersion = FilterVersion {
        filter_id: [7; 16],
        epoch: 42,
    };

    /// `VERSION` as sent: the id, then the epoch.
    fn version_bytes() -> Vec<u8> {
        [&[7u8; 16][..], &42u64.to_be_bytes()].concat()
    }

    #[test]
    fn every_message_round_trips_with_its_layout_and_refuses_truncation_and_trailing_bytes() {
        check_message(&SyncRequest { have: None }, (), &[0]);
        let have = SyncRequest {
            have: Some(VERSION),
        };
        check_message(&have, (), &[&[1u8][..], &version_bytes()].concat());

        let header = SyncHeader {
            mode: SyncMode::Delta,
            version: VERSION,
            from_epoch: 3,
            digest: [5; 32],
            max_query_items: 1000,
            key_format: "psikit-key-v1;columns=1;normalize=trim".into(),
        };
        let layout = [
            &[2u8][..],
            &version_bytes(),
            &3u64.to_be_bytes(),
            &[5; 32],
            &1000u32.to_be_bytes(),
            &38u32.to_be_bytes(),
            b"psikit-key-v1;columns=1;normalize=trim",
        ]
        .concat();
        check_message(&header, (), &layout);

        let (blinded, evaluated) = oprf_elements(3);
        let layout = [
            version_bytes(),
            3u32.to_be_bytes().to_vec(),
            BlindedElement::encode_concatenated(&blinded),
        ]
        .concat();
        let request = QueryRequest {
            version: VERSION,
            blinded,
        };
        check_message(&request, 3, &layout);

        let layout = [
            3u32.to_be_bytes().to_vec(),
            EvaluatedElement::encode_concatenated(&evaluated),
        ]
        .concat();
        check_message(&QueryResponse { evaluated }, 3, &layout);
    }

    #[test]
    fn sync_messages_refuse_unknown_flags_and_modes() {
        assert!(SyncHeader::decode(&[9], ()).is_err());
        assert!(SyncRequest::decode(&[2], ()).is_err());
    }

    #[test]
    fn delta_body_round_trip_and_validation() {
        let d = DeltaBody {
            slots: vec![0, 5, 6, 1000, 99_999],
            packed: vec![1, 2, 3],
        };
        let enc = d.encode();
        assert_eq!(DeltaBody::decode(&enc, 100_000).unwrap(), d);
        // Out of range for a smaller filter.
        assert!(DeltaBody::decode(&enc, 99_999).is_err());
        // Repeated index.
        let dup = DeltaBody {
            slots: vec![4, 4],
            packed: vec![],
        };
        assert!(DeltaBody::decode(&dup.encode(), 10).is_err());
        // Truncated anywhere, or followed by a byte.
        for cut in 0..enc.len() {
            assert!(DeltaBody::decode(&enc[..cut], 100_000).is_err());
        }
        let mut long = enc;
        long.push(0);
        assert!(DeltaBody::decode(&long, 100_000).is_err());
    }

    #[test]
    fn query_decoding_enforces_limits_and_validity() {
        let mut w = Writer::new();
        w.bytes(&VERSION.filter_id).u64(VERSION.epoch).u32(3);
        let header_only = w.into_bytes();
        // Claims three elements, carries none.
        assert!(QueryRequest::decode(&header_only, 10).is_err());
        // Over the item limit.
        assert!(matches!(
            QueryRequest::decode(&header_only, 2),
            Err(DecodeError::TooLarge { .. })
        ));
        // Three identity encodings: invalid group elements.
        let mut bad = header_only.clone();
        bad.extend_from_slice(&[0u8; 96]);
        assert!(QueryRequest::decode(&bad, 10).is_err());
        // Non-canonical encodings.
        let mut bad = header_only;
        bad.extend_from_slice(&[0xffu8; 96]);
        assert!(QueryRequest::decode(&bad, 10).is_err());
        // A response with the wrong count.
        let mut w = Writer::new();
        w.u32(2).bytes(&[0u8; 64]);
        assert!(QueryResponse::decode(&w.into_bytes(), 3).is_err());
    }
}
