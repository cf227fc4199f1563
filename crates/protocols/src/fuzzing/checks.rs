//! What a receiving party does next with a decoded message, as the fuzz
//! targets run it: a message that decodes must be usable (named in the
//! families' `wire_messages!` lists).

use psikit_he::{wire, RelinKey};

use super::harness::{epc_parties, he_params};
use crate::cpsi::epc::{EpcPublicKey, EpcReceiver, EpcReply, EpcSenderBatch};
use crate::he_psi::messages::{ParamsResponse, QueryCt, QueryHeader};
use crate::he_psi::params::PsiParams;

/// The parameters a client reads from the server's answer.
pub(crate) fn params_response(response: ParamsResponse) {
    drop(PsiParams::from_apsi_json(&response.params_json));
}

/// The relinearisation key a query header carries, as the server loads it.
pub(crate) fn query_header(header: QueryHeader) {
    if let Ok(key) = RelinKey::from_bytes(he_params(), &header.relin_key) {
        assert_eq!(key.to_bytes().ok(), Some(header.relin_key));
    }
}

/// A query ciphertext, as the server loads it.
pub(crate) fn query_ct(query: QueryCt) {
    if let Ok(ct) = query.ciphertext(he_params()) {
        assert_eq!(wire::encode_query_ct(&ct).ok(), Some(query.ct));
    }
}

/// An EPC public key, taken by a receiver.
pub(crate) fn epc_key(key: EpcPublicKey) {
    let (params, _, _) = epc_parties();
    assert!(EpcReceiver::new(params, &key).is_ok());
}

/// An EPC sender batch, evaluated by the receiver.
pub(crate) fn epc_batch(batch: EpcSenderBatch) {
    let (_, _, receiver) = epc_parties();
    let tags = [1, 2, 255];
    assert!(receiver
        .evaluate_batch(batch.index(), &batch, &tags)
        .is_ok());
}

/// An EPC reply, decrypted by the sender.
pub(crate) fn epc_reply(reply: EpcReply) {
    let (_, sender, _) = epc_parties();
    assert!(sender.decrypt_reply(reply.index(), &reply, 3).is_ok());
}
