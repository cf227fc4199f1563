//! The receiver's side (holds the tags `v*`): Fig. 6 step 3.

use psikit_he::{dot_plain, wire, Ciphertext, PlainPoly, PublicKey};
use rayon::prelude::*;

use super::batch::{batch_index, to_outputs};
use super::digits::{add_mod, decompose, minus_twice, uniform_mod};
use super::messages::{EpcPublicKey, EpcReply, EpcSenderBatch};
use super::params::EpcParams;
use crate::error::{Error, Violation};

/// The receiver: the sender's public key and the parameters. Holds no
/// per-batch state, so batches may be evaluated in any order and in
/// parallel.
pub struct EpcReceiver {
    params: EpcParams,
    pk: PublicKey,
}

impl EpcReceiver {
    /// Takes the sender's public key (decoded with these parameters, so
    /// already checked for `(ℓ, ℓ_c)`, size and ranges).
    pub fn new(params: &EpcParams, key: &EpcPublicKey) -> Result<Self, Error> {
        if u32::from(key.ell) != params.ell() || u32::from(key.ell_c) != params.ell_c() {
            return Err(Violation::Settings(format!(
                "the EPC sender uses ℓ = {}, ℓ_c = {}, this receiver ℓ = {}, ℓ_c = {}",
                key.ell,
                key.ell_c,
                params.ell(),
                params.ell_c()
            ))
            .into());
        }
        let pk = PublicKey::from_bytes(params.he(), &key.key)?;
        Ok(Self {
            params: params.clone(),
            pk,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &EpcParams {
        &self.params
    }

    /// Step 3 for batch `index` with that batch's tags `v*` (1 to `n`, each
    /// below `2^ℓ`, padded with 1): computes
    /// `ct_d = ct_u + Σ ct_i ⊙ (-2·m*_i) + (m*_u + r*)`, an encryption of
    /// `D + r*` with `D = Σ (v_i - v*_i)²` per slot, adds a fresh public-key
    /// encryption of zero flooded with noise in `[-B_fp, B_fp]`, switches to
    /// `q_1` and drops the low bits. Returns the reply and this batch's
    /// outputs `r*` (uniform in `Z_p`, cut to `tags.len()`).
    pub fn evaluate_batch(
        &self,
        index: u32,
        batch: &EpcSenderBatch,
        tags: &[u128],
    ) -> Result<(EpcReply, Vec<u32>), Error> {
        if batch.index != index {
            return Err(Violation::OutOfOrder("EPC sender batch").into());
        }
        let params = &self.params;
        let (mut ct, r_star) = self.masked_distance(batch, tags)?;
        // Function privacy (§4.3): re-randomize and flood B* by 2^σ.
        ct.add_ciphertext(&self.pk.encrypt_zero_flooded(params.flood_bound())?)?;
        ct.switch_to_lowest()?;
        let reply = EpcReply {
            index,
            ct: wire::encode_result_ct_dropped(&ct, params.reply_drop_bits())?,
        };
        Ok((reply, to_outputs(&r_star[..tags.len()])?))
    }

    /// `ct_d`, an encryption of `D + r*` per slot with noise at most `B*`
    /// (before flooding), and `r*` for all `n` slots.
    pub(super) fn masked_distance(
        &self,
        batch: &EpcSenderBatch,
        tags: &[u128],
    ) -> Result<(Ciphertext, Vec<u64>), Error> {
        let params = &self.params;
        let (he, p, u) = (params.he(), params.plain_modulus(), params.digits());
        let slots = decompose(params, tags, 1)?;
        let cts = batch
            .chunks(params)
            .map(|bytes| wire::decode_query_ct(he, bytes))
            .collect::<Result<Vec<Ciphertext>, _>>()?;
        let [digit_cts @ .., squares_ct] = cts.as_slice() else {
            return Err(Error::Internal("an EPC batch has u + 1 ciphertexts"));
        };
        if digit_cts.len() != u {
            return Err(Error::Internal("an EPC batch has u + 1 ciphertexts"));
        }
        let multipliers = slots
            .digits
            .iter()
            .map(|digits| {
                let scaled: Vec<u64> = digits.iter().map(|&d| minus_twice(d, p)).collect();
                PlainPoly::from_slots(he, &scaled)
            })
            .collect::<Result<Vec<PlainPoly>, _>>()?;
        let r_star = uniform_mod(p, params.batch_slots())?;
        let constant: Vec<u64> = slots
            .squares
            .iter()
            .zip(&r_star)
            .map(|(&s, &r)| add_mod(s, r, p))
            .collect();
        let cts: Vec<&Ciphertext> = digit_cts.iter().collect();
        let pts: Vec<&PlainPoly> = multipliers.iter().collect();
        let mut ct = dot_plain(&cts, &pts)?;
        ct.add_ciphertext(squares_ct)?;
        ct.add_plain_slots(&constant)?;
        Ok((ct, r_star))
    }

    /// Step 3 for all batches of the `m = tags.len()` tags, in parallel:
    /// the replies in batch order and `r*`, cut to `m`. `batches` must be
    /// in batch order, one per batch.
    pub fn evaluate_all(
        &self,
        batches: &[EpcSenderBatch],
        tags: &[u128],
    ) -> Result<(Vec<EpcReply>, Vec<u32>), Error> {
        let m = tags.len();
        let expected = self.params.batches(m);
        if batches.len() != expected {
            return Err(Violation::Count {
                what: "EPC sender batches",
                got: batches.len() as u64,
                expected: expected as u64,
            }
            .into());
        }
        let parts = batches
            .par_iter()
            .enumerate()
            .map(|(k, batch)| {
                self.evaluate_batch(batch_index(k)?, batch, &tags[self.params.batch_range(k, m)])
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let mut replies = Vec::with_capacity(parts.len());
        let mut r_star = Vec::with_capacity(m);
        for (reply, outputs) in parts {
            replies.push(reply);
            r_star.extend_from_slice(&outputs);
        }
        Ok((replies, r_star))
    }
}
