//! Wire messages of the HE protocol (protocol id [`PROTOCOL_ID`]).
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | C -> S | [`ParamsRequest`] (empty) |
//! | 2 | S -> C | [`ParamsResponse`]: parameters, label length, bundles, key format, label column names |
//! | 3 | C -> S | [`OprfRequest`]: blinded items |
//! | 4 | S -> C | [`OprfResponse`]: evaluated items, same order |
//! | 5 | C -> S | [`QueryHeader`]: database id and relinearization key |
//! | 6 | C -> S | [`QueryCt`]: one query ciphertext; bundle-index-major, source-minor |
//! | 7 | S -> C | [`ResultCt`]: one ciphertext of a result package |
//! | 8 | S -> C | [`QueryDone`]: number of packages sent |
//!
//! A query is a header frame then exactly `bundle_idx_count * |sources|`
//! ciphertext frames, each of the exact size the parameters give, so no
//! frame is ever large and the server can check every count up front. A
//! result package is `1 + c` consecutive [`ResultCt`] frames (matching
//! polynomial first, then the `c` label fragments). Every message
//! implements [`Message`]; decoders check every length against the
//! parameters before allocating. The ciphertext messages hold their
//! ciphertexts serialized, since serializing can fail and
//! [`Message::write`] cannot; the client decodes result ciphertexts
//! straight from the frame with [`DecodedResultCt`].

use psikit_he::{wire, Ciphertext, HeError, HeParams};
use psikit_primitives::oprf::BlindedElement;
use psikit_transport::{DecodeError, Message, ProtocolId, Reader, Writer};

use crate::common::messages::wire_messages;
use crate::oprf_wire;

pub const PROTOCOL_ID: u8 = psikit_transport::ids::HE_PSI;

/// Longest parameter JSON accepted.
const MAX_PARAMS_JSON: u64 = 1 << 16;
/// Most bundle indices a parameter set may have on the wire.
const MAX_BUNDLE_INDICES: u64 = 1 << 16;

/// Asks for the parameters. Empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamsRequest;

impl Message for ParamsRequest {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, _: &mut Writer) {}

    fn read(_: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self)
    }
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
    /// How the database's keys are encoded (`psikit_io::KeySpec::key_format`),
    /// or empty if unknown.
    pub key_format: String,
    /// The label columns' names (`psikit_io::KeySpec::label_names`), which
    /// clients write as headers; empty if unknown. Schema, not data.
    pub label_columns: Vec<String>,
}

impl Message for ParamsResponse {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 2;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.string(&self.params_json)
            .u32(self.max_label_bytes)
            .bytes(&self.db_id)
            .u32(self.max_query_items)
            .count(self.bundle_counts.len());
        for &c in &self.bundle_counts {
            w.u32(c);
        }
        w.string(&self.key_format);
        w.count(self.label_columns.len());
        for name in &self.label_columns {
            w.string(name);
        }
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let params_json = r.string(MAX_PARAMS_JSON, "parameters")?;
        let max_label_bytes = r.u32("max label bytes")?;
        let db_id = r.array("database id")?;
        let max_query_items = r.u32("max query items")?;
        let n = r.count(MAX_BUNDLE_INDICES, 4, "bundle counts")?;
        let bundle_counts = (0..n)
            .map(|_| r.u32("bundle count"))
            .collect::<Result<_, _>>()?;
        let key_format = r.string(psikit_io::MAX_KEY_FORMAT, "key format")?;
        let n = r.count(psikit_io::MAX_LABEL_COLUMNS as u64, 4, "label columns")?;
        let label_columns = (0..n)
            .map(|_| r.string(psikit_io::MAX_LABEL_NAME, "label column name"))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            params_json,
            max_label_bytes,
            db_id,
            max_query_items,
            bundle_counts,
            key_format,
            label_columns,
        })
    }
}

/// Blinded client items.
#[derive(Debug, PartialEq, Eq)]
pub struct OprfRequest {
    pub blinded: Vec<BlindedElement>,
}

impl Message for OprfRequest {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 3;
    /// Most items the server accepts in one request.
    type Bounds<'a> = u32;

    fn write(&self, w: &mut Writer) {
        oprf_wire::write_blinded(w, &self.blinded);
    }

    /// Rejects more than `max_items` elements and any invalid element.
    fn read(r: &mut Reader<'_>, max_items: u32) -> Result<Self, DecodeError> {
        Ok(Self {
            blinded: oprf_wire::read_blinded(r, max_items, "OPRF items")?,
        })
    }
}

/// The server's evaluations, in request order (kind 4).
pub type OprfResponse = oprf_wire::Evaluated<PROTOCOL_ID, 4>;

/// Opens a query: the database the client prepared it for and its
/// relinearization key (exactly [`wire::relin_key_size`] bytes).
#[derive(Debug, PartialEq, Eq)]
pub struct QueryHeader {
    pub db_id: [u8; 32],
    pub relin_key: Vec<u8>,
}

impl Message for QueryHeader {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 5;
    /// The parameters the key must fit.
    type Bounds<'a> = &'a HeParams;

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.db_id).var_bytes(&self.relin_key);
    }

    fn read(r: &mut Reader<'_>, he: &HeParams) -> Result<Self, DecodeError> {
        let db_id = r.array("database id")?;
        let size = wire::relin_key_size(he);
        let relin_key = r.var_bytes(size as u64, "relinearization key")?;
        if relin_key.len() != size {
            return Err(DecodeError::invalid(
                "relinearization key",
                format!("{} bytes, expected {size}", relin_key.len()),
            ));
        }
        Ok(Self {
            db_id,
            relin_key: relin_key.to_vec(),
        })
    }
}

/// One query ciphertext, serialized by [`wire::encode_query_ct`] (seed and
/// `c0`, exactly [`wire::query_ct_size`] bytes).
#[derive(Debug, PartialEq, Eq)]
pub struct QueryCt {
    pub ct: Vec<u8>,
}

impl QueryCt {
    /// Serializes a fresh query ciphertext; fails for one that is not.
    pub fn encode(ct: &Ciphertext) -> Result<Self, HeError> {
        Ok(Self {
            ct: wire::encode_query_ct(ct)?,
        })
    }

    /// The ciphertext, with its residues checked against the parameters.
    pub fn ciphertext(&self, he: &HeParams) -> Result<Ciphertext, HeError> {
        wire::decode_query_ct(he, &self.ct)
    }
}

impl Message for QueryCt {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 6;
    /// The parameters that fix the ciphertext's size.
    type Bounds<'a> = &'a HeParams;

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.ct);
    }

    fn read(r: &mut Reader<'_>, he: &HeParams) -> Result<Self, DecodeError> {
        let ct = r.bytes(wire::query_ct_size(he), "query ciphertext")?;
        Ok(Self { ct: ct.to_vec() })
    }
}

/// One ciphertext of a result package: its bundle index, which polynomial
/// (0 = matching, `1 + k` = label fragment `k`) and the ciphertext at the
/// lowest level, its coefficients rounded to drop the low bits that only
/// carry noise ([`wire::safe_drop_bits`]; both sides derive the count from
/// the parameters), serialized by [`wire::encode_result_ct_dropped`].
#[derive(Debug, PartialEq, Eq)]
pub struct ResultCt {
    pub bundle_idx: u32,
    pub poly: u16,
    pub ct: Vec<u8>,
}

impl ResultCt {
    /// Serializes a result ciphertext (at the lowest level).
    pub fn encode(bundle_idx: u32, poly: u16, ct: &Ciphertext) -> Result<Self, HeError> {
        let drop = wire::safe_drop_bits(ct.params());
        Ok(Self {
            bundle_idx,
            poly,
            ct: wire::encode_result_ct_dropped(ct, drop)?,
        })
    }
}

impl Message for ResultCt {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 7;
    /// The parameters that fix the ciphertext's size.
    type Bounds<'a> = &'a HeParams;

    fn write(&self, w: &mut Writer) {
        w.u32(self.bundle_idx).u16(self.poly).bytes(&self.ct);
    }

    fn read(r: &mut Reader<'_>, he: &HeParams) -> Result<Self, DecodeError> {
        let bundle_idx = r.u32("bundle index")?;
        let poly = r.u16("polynomial index")?;
        let size = wire::result_ct_size_dropped(he, wire::safe_drop_bits(he))
            .map_err(|e| DecodeError::invalid("result ciphertext", e))?;
        let ct = r.bytes(size, "result ciphertext")?.to_vec();
        Ok(Self {
            bundle_idx,
            poly,
            ct,
        })
    }
}

/// A [`ResultCt`] as the client uses it, with the ciphertext decoded
/// straight from the frame's payload. Result ciphertexts stream by the
/// hundred per query: this path skips the copy of their bytes that
/// [`Message::decode`] into a [`ResultCt`] would make.
pub struct DecodedResultCt {
    pub bundle_idx: u32,
    pub poly: u16,
    pub ct: Ciphertext,
}

impl DecodedResultCt {
    /// Reads the header fields; the ciphertext is checked by
    /// [`wire::decode_result_ct_dropped`] (exact size, residues in range).
    pub fn decode(payload: &[u8], he: &HeParams) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let bundle_idx = r.u32("bundle index")?;
        let poly = r.u16("polynomial index")?;
        let bytes = r.bytes(r.remaining(), "result ciphertext")?;
        let ct = wire::decode_result_ct_dropped(he, bytes, wire::safe_drop_bits(he))
            .map_err(|e| DecodeError::invalid("result ciphertext", e))?;
        Ok(Self {
            bundle_idx,
            poly,
            ct,
        })
    }
}

/// Ends the answer: how many packages were sent, and how long the server
/// spent evaluating them (microseconds; for a sharded database the
/// slowest shard's), so a client can tell the server's work from its own
/// and from the network's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryDone {
    pub packages: u32,
    pub evaluation_micros: u64,
}

impl Message for QueryDone {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 8;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u32(self.packages).u64(self.evaluation_micros);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            packages: r.u32("package count")?,
            evaluation_micros: r.u64("evaluation time")?,
        })
    }
}

/// Sent by a sharded database's router before a query's header: the epoch
/// the query must be answered at, so every shard answers from the same
/// update (see `shard/router.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardQuery {
    pub epoch: u64,
}

impl Message for ShardQuery {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 9;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.u64(self.epoch);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            epoch: r.u64("epoch")?,
        })
    }
}

wire_messages! {
    messages: ParamsRequest, ParamsResponse, OprfRequest, OprfResponse, QueryHeader, QueryCt, ResultCt, QueryDone, ShardQuery;
    others:;
}

#[cfg(test)]
mod tests {
    use psikit_he::{Evaluator, RelinKey, SecretKey};

    use psikit_primitives::oprf::EvaluatedElement;

    use super::*;
    use crate::codec_tests::{check_message, oprf_elements};
    use crate::he_psi::params::PsiParams;
    use crate::he_psi::presets::apsi_preset;

    #[test]
    fn every_message_round_trips_with_its_layout_and_refuses_truncation_and_trailing_bytes() {
        check_message(&ParamsRequest, (), &[]);

        let params = ParamsResponse {
            params_json: "{}".into(),
            max_label_bytes: 16,
            db_id: [3; 32],
            max_query_items: 500,
            bundle_counts: vec![4, 0, 9],
            key_format: "k1".into(),
            label_columns: vec!["name".into(), "tier".into()],
        };
        let layout = [
            &2u32.to_be_bytes()[..],
            b"{}",
            &16u32.to_be_bytes(),
            &[3; 32],
            &500u32.to_be_bytes(),
            &3u32.to_be_bytes(),
            &4u32.to_be_bytes(),
            &0u32.to_be_bytes(),
            &9u32.to_be_bytes(),
            &2u32.to_be_bytes(),
            b"k1",
            &2u32.to_be_bytes(),
            &4u32.to_be_bytes(),
            b"name",
            &4u32.to_be_bytes(),
            b"tier",
        ]
        .concat();
        check_message(&params, (), &layout);

        let (blinded, evaluated) = oprf_elements(2);
        let layout = [
            2u32.to_be_bytes().to_vec(),
            BlindedElement::encode_concatenated(&blinded),
        ]
        .concat();
        check_message(&OprfRequest { blinded }, 2, &layout);
        let layout = [
            2u32.to_be_bytes().to_vec(),
            EvaluatedElement::encode_concatenated(&evaluated),
        ]
        .concat();
        check_message(&OprfResponse { evaluated }, 2, &layout);

        let he = PsiParams::from_apsi_json(apsi_preset("256K-1024").expect("shipped preset"))
            .unwrap()
            .he_params()
            .unwrap();
        let sk = SecretKey::generate(&he).unwrap();
        let relin = RelinKey::generate(&sk).unwrap();
        let header = QueryHeader {
            db_id: [8; 32],
            relin_key: relin.to_bytes().unwrap(),
        };
        let layout = [
            &[8u8; 32][..],
            &(header.relin_key.len() as u32).to_be_bytes(),
            &header.relin_key,
        ]
        .concat();
        check_message(&header, &he, &layout);

        let slots: Vec<u64> = (0..he.degree() as u64).map(|i| i % 7).collect();
        let mut ct = sk.encrypt_slots(&slots).unwrap();
        let query = QueryCt::encode(&ct).unwrap();
        check_message(&query, &he, &wire::encode_query_ct(&ct).unwrap());
        assert_eq!(
            sk.decrypt_slots(&query.ciphertext(&he).unwrap()).unwrap(),
            slots
        );

        Evaluator::new(&he, &relin)
            .unwrap()
            .to_lowest(&mut ct)
            .unwrap();
        let result = ResultCt::encode(5, 2, &ct).unwrap();
        let bytes = wire::encode_result_ct_dropped(&ct, wire::safe_drop_bits(&he)).unwrap();
        let layout = [&5u32.to_be_bytes()[..], &2u16.to_be_bytes(), &bytes].concat();
        check_message(&result, &he, &layout);
        // The client's path decodes the same payload to the ciphertext.
        let decoded = DecodedResultCt::decode(&layout, &he).unwrap();
        assert_eq!((decoded.bundle_idx, decoded.poly), (5, 2));
        assert_eq!(sk.decrypt_slots(&decoded.ct).unwrap(), slots);
        assert!(DecodedResultCt::decode(&layout[..layout.len() - 1], &he).is_err());
        assert!(DecodedResultCt::decode(&[&layout[..], &[0]].concat(), &he).is_err());

        let done = QueryDone {
            packages: 12,
            evaluation_micros: 7,
        };
        check_message(
            &done,
            (),
            &[&12u32.to_be_bytes()[..], &7u64.to_be_bytes()].concat(),
        );
    }
}
