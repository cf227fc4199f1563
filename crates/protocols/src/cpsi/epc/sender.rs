//! The sender's side (key owner, holds the tags `v`): Fig. 6 steps 1, 2
//! and 4.

use psikit_he::{wire, PublicKey, SecretKey};
use rayon::prelude::*;

use super::batch::{batch_index, check_batch_len, to_outputs};
use super::digits::decompose;
use super::messages::{EpcPublicKey, EpcReply, EpcSenderBatch};
use super::params::EpcParams;
use crate::error::{Error, Violation};

/// The sender: its secret key and the parameters. Holds no per-batch
/// state, so batches may be encrypted and replies decrypted in any order
/// and from several threads.
pub struct EpcSender {
    params: EpcParams,
    /// Visible to the tests, which measure reply noise with it.
    pub(super) sk: SecretKey,
}

impl EpcSender {
    /// Step 1: a fresh key pair; the public key goes to the receiver first.
    pub fn new(params: &EpcParams) -> Result<(Self, EpcPublicKey), Error> {
        let sk = SecretKey::generate(params.he())?;
        let pk = PublicKey::generate(&sk)?;
        let message = EpcPublicKey {
            ell: narrow(params.ell())?,
            ell_c: narrow(params.ell_c())?,
            key: pk.to_bytes().to_vec(),
        };
        let sender = Self {
            params: params.clone(),
            sk,
        };
        Ok((sender, message))
    }

    /// The parameters.
    pub fn params(&self) -> &EpcParams {
        &self.params
    }

    /// Step 2 for batch `index`: `tags` are that batch's tags (1 to `n`,
    /// each below `2^ℓ`; [`EpcParams::batch_range`]), padded with 0. Sends
    /// the `u` digit vectors and `Σ digit²`, encrypted under the secret key
    /// (seeded: each ciphertext travels as a seed and one polynomial).
    pub fn encrypt_batch(&self, index: u32, tags: &[u128]) -> Result<EpcSenderBatch, Error> {
        let slots = decompose(&self.params, tags, 0)?;
        let mut cts = Vec::with_capacity(self.params.sender_batch_bytes());
        for vector in slots.digits.iter().chain(std::iter::once(&slots.squares)) {
            let ct = self.sk.encrypt_slots(vector)?;
            cts.extend_from_slice(&wire::encode_query_ct(&ct)?);
        }
        Ok(EpcSenderBatch { index, cts })
    }

    /// Step 2 for all `m = tags.len()` tags, batches in parallel on the
    /// rayon pool, in batch order.
    pub fn encrypt_all(&self, tags: &[u128]) -> Result<Vec<EpcSenderBatch>, Error> {
        let m = tags.len();
        (0..self.params.batches(m))
            .into_par_iter()
            .map(|k| self.encrypt_batch(batch_index(k)?, &tags[self.params.batch_range(k, m)]))
            .collect()
    }

    /// Step 4 for batch `index`: decrypts the receiver's reply to the
    /// outputs `r` of the batch's `len` real tags (the padding is cut).
    pub fn decrypt_reply(
        &self,
        index: u32,
        reply: &EpcReply,
        len: usize,
    ) -> Result<Vec<u32>, Error> {
        if reply.index != index {
            return Err(Violation::OutOfOrder("EPC reply").into());
        }
        check_batch_len(&self.params, len)?;
        let he = self.params.he();
        let ct = wire::decode_result_ct_dropped(he, &reply.ct, self.params.reply_drop_bits())?;
        let slots = self.sk.decrypt_slots(&ct)?;
        to_outputs(&slots[..len])
    }

    /// Steps 4 and 5 for all batches of `m` tags, in parallel: `r`, cut to
    /// `m`. `replies` must be in batch order, one per batch.
    pub fn decrypt_all(&self, replies: &[EpcReply], m: usize) -> Result<Vec<u32>, Error> {
        let batches = self.params.batches(m);
        if replies.len() != batches {
            return Err(Violation::Count {
                what: "EPC replies",
                got: replies.len() as u64,
                expected: batches as u64,
            }
            .into());
        }
        let parts = replies
            .par_iter()
            .enumerate()
            .map(|(k, reply)| {
                self.decrypt_reply(batch_index(k)?, reply, self.params.batch_range(k, m).len())
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(parts.concat())
    }
}

fn narrow(bits: u32) -> Result<u8, Error> {
    u8::try_from(bits).map_err(|_| Error::Internal("EPC bit lengths fit in a byte"))
}
