//! Wire messages of the HE protocol (protocol id [`PROTOCOL_ID`]).
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | C -> S | [`params_request`] (empty) |
//! | 2 | S -> C | [`ParamsResponse`]: parameters, label length, bundles |
//! | 3 | C -> S | [`OprfRequest`]: blinded items |
//! | 4 | S -> C | [`OprfResponse`]: evaluated items, same order |
//! | 5 | C -> S | [`QueryHeader`]: database id and relinearization key |
//! | 6 | C -> S | one query ciphertext; bundle-index-major, source-minor |
//! | 7 | S -> C | [`ResultCt`]: one ciphertext of a result package |
//! | 8 | S -> C | [`query_done`]: number of packages sent |
//!
//! A query is a header frame then exactly `bundle_idx_count * |sources|`
//! ciphertext frames, each of the exact size the parameters give, so no
//! frame is ever large and the server can check every count up front. A
//! result package is `1 + c` consecutive [`ResultCt`] frames (matching
//! polynomial first, then the `c` label fragments). Decoders check every
//! length against the parameters before allocating.

use psikit_he::{wire, Ciphertext, HeParams};
use psikit_primitives::oprf::{BlindedElement, EvaluatedElement, ELEMENT_LEN};
use psikit_transport::{DecodeError, Frame, Reader, Writer};

use crate::oprf_wire;

pub const PROTOCOL_ID: u8 = psikit_transport::ids::HE_PSI;

pub const KIND_PARAMS_REQUEST: u8 = 1;
pub const KIND_PARAMS_RESPONSE: u8 = 2;
pub const KIND_OPRF_REQUEST: u8 = 3;
pub const KIND_OPRF_RESPONSE: u8 = 4;
pub const KIND_QUERY_HEADER: u8 = 5;
pub const KIND_QUERY_CT: u8 = 6;
pub const KIND_RESULT_CT: u8 = 7;
pub const KIND_QUERY_DONE: u8 = 8;

/// Longest parameter JSON accepted.
const MAX_PARAMS_JSON: u64 = 1 << 16;
/// Most bundle indices a parameter set may have on the wire.
const MAX_BUNDLE_INDICES: u64 = 1 << 16;

pub fn params_request() -> Frame {
    Frame::new(PROTOCOL_ID, KIND_PARAMS_REQUEST, Vec::new())
}

/// What a client needs before it can query: the public parameters, the
/// label length, the database id (a digest that changes when the
/// parameters or OPRF key do) and the bin bundles per bundle index (public;
/// it lets the client compute its false-positive bound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsResponse {
    pub params_json: String,
    pub max_label_bytes: u32,
    pub db_id: [u8; 32],
    pub max_query_items: u32,
    pub bundle_counts: Vec<u32>,
}

impl ParamsResponse {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::new();
        w.string(&self.params_json)
            .u32(self.max_label_bytes)
            .bytes(&self.db_id)
            .u32(self.max_query_items)
            .count(self.bundle_counts.len());
        for &c in &self.bundle_counts {
            w.u32(c);
        }
        Frame::new(PROTOCOL_ID, KIND_PARAMS_RESPONSE, w.into_bytes())
    }

    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let params_json = r.string(MAX_PARAMS_JSON, "parameters")?;
        let max_label_bytes = r.u32("max label bytes")?;
        let db_id = r.array("database id")?;
        let max_query_items = r.u32("max query items")?;
        let n = r.count(MAX_BUNDLE_INDICES, 4, "bundle counts")?;
        let bundle_counts = (0..n)
            .map(|_| r.u32("bundle count"))
            .collect::<Result<_, _>>()?;
        r.finish()?;
        Ok(Self {
            params_json,
            max_label_bytes,
            db_id,
            max_query_items,
            bundle_counts,
        })
    }
}

/// Blinded client items.
pub struct OprfRequest {
    pub blinded: Vec<BlindedElement>,
}

impl OprfRequest {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(4 + ELEMENT_LEN * self.blinded.len());
        oprf_wire::write_blinded(&mut w, &self.blinded);
        Frame::new(PROTOCOL_ID, KIND_OPRF_REQUEST, w.into_bytes())
    }

    /// Rejects more than `max_items` elements and any invalid element.
    pub fn decode(payload: &[u8], max_items: u32) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let blinded = oprf_wire::read_blinded(&mut r, max_items, "OPRF items")?;
        r.finish()?;
        Ok(Self { blinded })
    }
}

/// The server's evaluations, in request order.
pub struct OprfResponse {
    pub evaluated: Vec<EvaluatedElement>,
}

impl OprfResponse {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(4 + ELEMENT_LEN * self.evaluated.len());
        oprf_wire::write_evaluated(&mut w, &self.evaluated);
        Frame::new(PROTOCOL_ID, KIND_OPRF_RESPONSE, w.into_bytes())
    }

    /// Exactly `expected` valid elements, or an error.
    pub fn decode(payload: &[u8], expected: usize) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let evaluated = oprf_wire::read_evaluated(&mut r, expected)?;
        r.finish()?;
        Ok(Self { evaluated })
    }
}

/// Opens a query: the database the client prepared it for and its
/// relinearization key (exactly [`wire::relin_key_size`] bytes).
pub struct QueryHeader {
    pub db_id: [u8; 32],
    pub relin_key: Vec<u8>,
}

impl QueryHeader {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(40 + self.relin_key.len());
        w.bytes(&self.db_id).var_bytes(&self.relin_key);
        Frame::new(PROTOCOL_ID, KIND_QUERY_HEADER, w.into_bytes())
    }

    pub fn decode(payload: &[u8], he: &HeParams) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let db_id = r.array("database id")?;
        let size = wire::relin_key_size(he);
        let relin_key = r.var_bytes(size as u64, "relinearization key")?;
        if relin_key.len() != size {
            return Err(DecodeError::invalid(
                "relinearization key",
                format!("{} bytes, expected {size}", relin_key.len()),
            ));
        }
        r.finish()?;
        Ok(Self {
            db_id,
            relin_key: relin_key.to_vec(),
        })
    }
}

/// One query ciphertext frame.
pub fn query_ct_frame(ct: &Ciphertext) -> Result<Frame, psikit_he::HeError> {
    Ok(Frame::new(
        PROTOCOL_ID,
        KIND_QUERY_CT,
        wire::encode_query_ct(ct)?,
    ))
}

/// One ciphertext of a result package: its bundle index, which polynomial
/// (0 = matching, `1 + k` = label fragment `k`) and the ciphertext at the
/// lowest level.
pub struct ResultCt {
    pub bundle_idx: u32,
    pub poly: u16,
    pub ct: Vec<u8>,
}

impl ResultCt {
    pub fn to_frame(&self) -> Frame {
        let mut w = Writer::with_capacity(6 + self.ct.len());
        w.u32(self.bundle_idx).u16(self.poly).bytes(&self.ct);
        Frame::new(PROTOCOL_ID, KIND_RESULT_CT, w.into_bytes())
    }

    /// A result ciphertext's frame: coefficients rounded to drop the low
    /// bits that only carry noise ([`wire::safe_drop_bits`]; both sides
    /// derive the count from the parameters).
    pub fn encode(
        bundle_idx: u32,
        poly: u16,
        ct: &Ciphertext,
    ) -> Result<Frame, psikit_he::HeError> {
        let drop = wire::safe_drop_bits(ct.params());
        let ct = wire::encode_result_ct_dropped(ct, drop)?;
        Ok(Self {
            bundle_idx,
            poly,
            ct,
        }
        .to_frame())
    }

    /// Reads the header fields; the ciphertext is checked by
    /// [`wire::decode_result_ct_dropped`] (exact size).
    pub fn decode(payload: &[u8], he: &HeParams) -> Result<(u32, u16, Ciphertext), DecodeError> {
        let mut r = Reader::new(payload);
        let bundle_idx = r.u32("bundle index")?;
        let poly = r.u16("polynomial index")?;
        let bytes = r.bytes(r.remaining(), "result ciphertext")?;
        let ct = wire::decode_result_ct_dropped(he, bytes, wire::safe_drop_bits(he))
            .map_err(|e| DecodeError::invalid("result ciphertext", e))?;
        Ok((bundle_idx, poly, ct))
    }
}

/// Ends the answer: how many packages were sent.
pub fn query_done(packages: u32) -> Frame {
    let mut w = Writer::new();
    w.u32(packages);
    Frame::new(PROTOCOL_ID, KIND_QUERY_DONE, w.into_bytes())
}

pub fn decode_query_done(payload: &[u8]) -> Result<u32, DecodeError> {
    let mut r = Reader::new(payload);
    let n = r.u32("package count")?;
    r.finish()?;
    Ok(n)
}
