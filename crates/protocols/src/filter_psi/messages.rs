//! Wire messages of the filter protocol (protocol id [`super::PROTOCOL_ID`]).
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | C -> S | [`SyncRequest`]: the client's cached filter id and epoch |
//! | 2 | S -> C | [`SyncHeader`]: up to date, full filter, or delta |
//! | 3 | S -> C | body of a full filter or delta, as a chunked transfer |
//! | 4 | C -> S | [`QueryRequest`]: blinded elements for one filter epoch |
//! | 5 | S -> C | [`QueryResponse`]: evaluated elements, same order |
//!
//! Every decoder bounds counts by the bytes present and by the receiver's
//! limits before allocating.

use psikit_primitives::oprf::{BlindedElement, EvaluatedElement, ELEMENT_LEN};
use psikit_transport::{DecodeError, Frame, Reader, Writer};

use super::PROTOCOL_ID;
use crate::oprf_wire;

pub const KIND_SYNC_REQUEST: u8 = 1;
pub const KIND_SYNC_HEADER: u8 = 2;
pub const KIND_SYNC_BODY: u8 = 3;
pub const KIND_QUERY_REQUEST: u8 = 4;
pub const KIND_QUERY_RESPONSE: u8 = 5;

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

impl SyncRequest {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        match &self.have {
            None => {
                w.u8(0);
            }
            Some(v) => {
                w.u8(1);
                v.write(&mut w);
            }
        }
        Frame::new(PROTOCOL_ID, KIND_SYNC_REQUEST, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let have = match r.u8("cache flag")? {
            0 => None,
            1 => Some(FilterVersion::read(&mut r)?),
            other => return Err(DecodeError::invalid("cache flag", other)),
        };
        r.finish()?;
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
}

impl SyncHeader {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        w.u8(self.mode as u8);
        self.version.write(&mut w);
        w.u64(self.from_epoch)
            .bytes(&self.digest)
            .u32(self.max_query_items);
        Frame::new(PROTOCOL_ID, KIND_SYNC_HEADER, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let mode = match r.u8("sync mode")? {
            0 => SyncMode::UpToDate,
            1 => SyncMode::Full,
            2 => SyncMode::Delta,
            other => return Err(DecodeError::invalid("sync mode", other)),
        };
        let header = Self {
            mode,
            version: FilterVersion::read(&mut r)?,
            from_epoch: r.u64("from epoch")?,
            digest: r.array("digest")?,
            max_query_items: r.u32("max query items")?,
        };
        r.finish()?;
        Ok(header)
    }
}

/// Body of a delta: indices of changed slots and their new fingerprints.
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
pub struct QueryRequest {
    pub version: FilterVersion,
    pub blinded: Vec<BlindedElement>,
}

impl QueryRequest {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(32 + ELEMENT_LEN * self.blinded.len());
        self.version.write(&mut w);
        oprf_wire::write_blinded(&mut w, &self.blinded);
        Frame::new(PROTOCOL_ID, KIND_QUERY_REQUEST, w.into_bytes())
    }

    /// Rejects more than `max_items` elements and any element that is not a
    /// canonical, non-identity ristretto255 encoding.
    pub fn decode(payload: &[u8], max_items: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let version = FilterVersion::read(&mut r)?;
        let blinded = oprf_wire::read_blinded(&mut r, max_items, "query items")?;
        r.finish()?;
        Ok(Self { version, blinded })
    }
}

/// The server's evaluations, in request order.
pub struct QueryResponse {
    pub evaluated: Vec<EvaluatedElement>,
}

impl QueryResponse {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(4 + ELEMENT_LEN * self.evaluated.len());
        oprf_wire::write_evaluated(&mut w, &self.evaluated);
        Frame::new(PROTOCOL_ID, KIND_QUERY_RESPONSE, w.into_bytes())
    }

    /// The client knows how many answers it expects; anything else is an
    /// error, as is any invalid element.
    pub fn decode(payload: &[u8], expected: usize) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let evaluated = oprf_wire::read_evaluated(&mut r, expected)?;
        r.finish()?;
        Ok(Self { evaluated })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_messages_round_trip() {
        for have in [
            None,
            Some(FilterVersion {
                filter_id: [7; 16],
                epoch: 42,
            }),
        ] {
            let m = SyncRequest { have };
            assert_eq!(SyncRequest::decode(&m.to_frame().payload).unwrap(), m);
        }
        let h = SyncHeader {
            mode: SyncMode::Delta,
            version: FilterVersion {
                filter_id: [1; 16],
                epoch: 9,
            },
            from_epoch: 3,
            digest: [5; 32],
            max_query_items: 1000,
        };
        assert_eq!(SyncHeader::decode(&h.to_frame().payload).unwrap(), h);
        assert!(SyncHeader::decode(&[9]).is_err());
        assert!(SyncRequest::decode(&[2]).is_err());
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
        // Truncated anywhere.
        for cut in 0..enc.len() {
            assert!(DeltaBody::decode(&enc[..cut], 100_000).is_err());
        }
    }

    #[test]
    fn query_decoding_enforces_limits_and_validity() {
        let v = FilterVersion {
            filter_id: [0; 16],
            epoch: 1,
        };
        let mut w = Writer::new();
        w.bytes(&v.filter_id).u64(v.epoch).u32(3);
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
