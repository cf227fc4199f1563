//! EPC's wire messages (protocol [`ids::CIRCUIT_PSI`], kinds 20-22; the
//! table is in the module docs). Each has a size fixed by the
//! [`EpcParams`] both parties hold, so decoders check exact lengths before
//! anything is allocated, and the ciphertext residues against their moduli.
//! Messages keep their ciphertexts serialized: serializing can fail and
//! [`Message::write`] cannot, and the receiver decodes each ciphertext
//! where it uses it.

use psikit_he::{wire, HeError};
use psikit_transport::{ids, DecodeError, Message, ProtocolId, Reader, Writer};

use super::params::EpcParams;
use crate::common::messages::wire_messages;

/// Kind of [`EpcPublicKey`].
pub const KIND_PUBLIC_KEY: u8 = 20;
/// Kind of [`EpcSenderBatch`].
pub const KIND_SENDER_BATCH: u8 = 21;
/// Kind of [`EpcReply`].
pub const KIND_REPLY: u8 = 22;

fn he_invalid(field: &'static str) -> impl FnOnce(HeError) -> DecodeError {
    move |e| DecodeError::invalid(field, e)
}

/// The sender's public key, with the `(ℓ, ℓ_c)` it was made for so that a
/// receiver with other parameters refuses it at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpcPublicKey {
    pub(super) ell: u8,
    pub(super) ell_c: u8,
    /// [`psikit_he::PublicKey::to_bytes`]: seed ‖ `b`.
    pub(super) key: Vec<u8>,
}

impl Message for EpcPublicKey {
    const PROTOCOL: ProtocolId = ids::CIRCUIT_PSI;
    const KIND: u8 = KIND_PUBLIC_KEY;
    /// The receiver's parameters: `(ℓ, ℓ_c)` must match, the key's size and
    /// residues must fit them.
    type Bounds<'a> = &'a EpcParams;

    fn write(&self, w: &mut Writer) {
        w.u8(self.ell).u8(self.ell_c).bytes(&self.key);
    }

    fn read(r: &mut Reader<'_>, params: &EpcParams) -> Result<Self, DecodeError> {
        let ell = r.u8("EPC tag length")?;
        let ell_c = r.u8("EPC output length")?;
        if u32::from(ell) != params.ell() || u32::from(ell_c) != params.ell_c() {
            return Err(DecodeError::invalid(
                "EPC parameters",
                format!(
                    "the sender uses ℓ = {ell}, ℓ_c = {ell_c}, this receiver ℓ = {}, ℓ_c = {}",
                    params.ell(),
                    params.ell_c()
                ),
            ));
        }
        let key = r.bytes(params.public_key_bytes(), "EPC public key")?;
        // Same layout as a query ciphertext at level 0: seed ‖ b.
        wire::check_query_ct(params.he(), key).map_err(he_invalid("EPC public key"))?;
        Ok(Self {
            ell,
            ell_c,
            key: key.to_vec(),
        })
    }
}

/// One batch of the sender: its index and the `u + 1` seeded ciphertexts
/// (the digit vectors, then `Σ digit²`), each
/// [`wire::query_ct_size`] bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpcSenderBatch {
    pub(super) index: u32,
    pub(super) cts: Vec<u8>,
}

impl EpcSenderBatch {
    /// The batch's index (0-based).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The ciphertexts' bytes, one [`wire::query_ct_size`] chunk each.
    pub(super) fn chunks<'a>(&'a self, params: &EpcParams) -> impl Iterator<Item = &'a [u8]> {
        self.cts.chunks_exact(wire::query_ct_size(params.he()))
    }
}

impl Message for EpcSenderBatch {
    const PROTOCOL: ProtocolId = ids::CIRCUIT_PSI;
    const KIND: u8 = KIND_SENDER_BATCH;
    /// The parameters fix the size; residues are checked against them.
    type Bounds<'a> = &'a EpcParams;

    fn write(&self, w: &mut Writer) {
        w.u32(self.index).bytes(&self.cts);
    }

    fn read(r: &mut Reader<'_>, params: &EpcParams) -> Result<Self, DecodeError> {
        let index = r.u32("EPC batch index")?;
        let cts = r.bytes(params.sender_batch_bytes(), "EPC sender batch")?;
        let batch = Self {
            index,
            cts: cts.to_vec(),
        };
        for ct in batch.chunks(params) {
            wire::check_query_ct(params.he(), ct).map_err(he_invalid("EPC ciphertext"))?;
        }
        Ok(batch)
    }
}

/// The receiver's reply to one batch: its index and one ciphertext at
/// `q_1` with [`EpcParams::reply_drop_bits`] low bits dropped
/// ([`wire::encode_result_ct_dropped`]; every bit string of that length is
/// a valid encoding, so the exact length is the whole check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpcReply {
    pub(super) index: u32,
    pub(super) ct: Vec<u8>,
}

impl EpcReply {
    /// The index of the batch this answers.
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Message for EpcReply {
    const PROTOCOL: ProtocolId = ids::CIRCUIT_PSI;
    const KIND: u8 = KIND_REPLY;
    /// The parameters fix the size.
    type Bounds<'a> = &'a EpcParams;

    fn write(&self, w: &mut Writer) {
        w.u32(self.index).bytes(&self.ct);
    }

    fn read(r: &mut Reader<'_>, params: &EpcParams) -> Result<Self, DecodeError> {
        let index = r.u32("EPC reply index")?;
        let ct = r.bytes(params.reply_bytes(), "EPC reply")?;
        Ok(Self {
            index,
            ct: ct.to_vec(),
        })
    }
}

wire_messages! {
    messages: EpcPublicKey, EpcSenderBatch, EpcReply;
    others:;
}
