//! OPRF element lists on the wire, for every protocol with an OPRF round
//! (filter PSI and HE PSI): a `u32` count, then the elements' 32-byte
//! canonical encodings back to back. Decoding checks the count against the
//! caller's bound before reading, and every element (canonical, not the
//! identity) in parallel.

use psikit_primitives::oprf::{BlindedElement, EvaluatedElement, ELEMENT_LEN};
use psikit_transport::{DecodeError, Message, ProtocolId, Reader, Writer};

pub(crate) fn write_blinded(w: &mut Writer, items: &[BlindedElement]) {
    w.count(items.len())
        .bytes(&BlindedElement::encode_concatenated(items));
}

/// At most `max_items` blinded elements; `count` names the count in errors.
pub(crate) fn read_blinded(
    r: &mut Reader<'_>,
    max_items: u32,
    count: &'static str,
) -> Result<Vec<BlindedElement>, DecodeError> {
    const WHAT: &str = "blinded elements";
    let n = r.count(u64::from(max_items), ELEMENT_LEN, count)?;
    let raw = r.bytes(n * ELEMENT_LEN, WHAT)?;
    BlindedElement::decode_concatenated(raw).map_err(|e| DecodeError::invalid(WHAT, e))
}

pub(crate) fn write_evaluated(w: &mut Writer, items: &[EvaluatedElement]) {
    w.count(items.len())
        .bytes(&EvaluatedElement::encode_concatenated(items));
}

/// Exactly `expected` evaluated elements (the client knows how many it
/// asked for); anything else is an error.
pub(crate) fn read_evaluated(
    r: &mut Reader<'_>,
    expected: usize,
) -> Result<Vec<EvaluatedElement>, DecodeError> {
    const WHAT: &str = "evaluated elements";
    let n = r.count(expected as u64, ELEMENT_LEN, WHAT)?;
    if n != expected {
        return Err(DecodeError::invalid(
            WHAT,
            format!("{n}, expected {expected}"),
        ));
    }
    let raw = r.bytes(n * ELEMENT_LEN, WHAT)?;
    EvaluatedElement::decode_concatenated(raw).map_err(|e| DecodeError::invalid(WHAT, e))
}

/// The server's OPRF evaluations, in request order: the same message in
/// every protocol with an OPRF round, under that protocol's id and kind.
#[derive(Debug, PartialEq, Eq)]
pub struct Evaluated<const PROTOCOL: ProtocolId, const KIND: u8> {
    pub evaluated: Vec<EvaluatedElement>,
}

impl<const PROTOCOL: ProtocolId, const KIND: u8> Message for Evaluated<PROTOCOL, KIND> {
    const PROTOCOL: ProtocolId = PROTOCOL;
    const KIND: u8 = KIND;
    /// How many answers the client expects.
    type Bounds<'a> = usize;

    fn write(&self, w: &mut Writer) {
        write_evaluated(w, &self.evaluated);
    }

    /// Exactly `expected` valid elements, or an error.
    fn read(r: &mut Reader<'_>, expected: usize) -> Result<Self, DecodeError> {
        Ok(Self {
            evaluated: read_evaluated(r, expected)?,
        })
    }
}
