//! How the fuzz targets bound and use each listed message
//! ([`Fuzzed`]): the receiver's limits (fixed small ones, or the fuzz
//! input's two bound bytes) and what the receiver does next with what
//! decodes. One impl per message of every family's `wire_messages!` list:
//! a message added to a list does not build until it has one here.

use psikit_he::{wire, HeParams, RelinKey};

use super::harness::{epc_parties, he_params, EXPECTED_ANSWERS, MAX_ITEMS};
use crate::common::messages::Fuzzed;
use crate::common::two_party::Hello;
use crate::cpsi::epc::{EpcParams, EpcPublicKey, EpcReceiver, EpcReply, EpcSenderBatch};
use crate::cpsi::messages as cpsi;
use crate::filter_psi::messages as filter;
use crate::he_psi::messages as he;
use crate::he_psi::params::PsiParams;
use crate::jobs::terms as job;
use crate::rr16::messages as rr16;
use crate::vole_psi::messages as vole;

/// Messages decoded without bounds and not used further.
macro_rules! unbounded {
    ($($m:ty),+ $(,)?) => {
        $(impl Fuzzed for $m {
            fn fuzz_bounds(_: u16) {}
        })+
    };
}

unbounded!(
    filter::SyncRequest,
    filter::SyncHeader,
    Hello<{ rr16::PROTOCOL_ID }>,
    rr16::Commit,
    rr16::Nonce,
    rr16::Open,
    Hello<{ vole::PROTOCOL_ID }>,
    vole::OkvsSeed,
    vole::Commitment,
    vole::ReceiverOffset,
    vole::SenderOffset,
    cpsi::Hello,
    cpsi::Seeds,
    cpsi::HintSeed,
    he::ParamsRequest,
    he::QueryDone,
    he::ShardQuery,
    job::JobHello,
    job::JobDone,
    job::ClusterOpen,
    job::ClusterReady,
    job::Attach,
);

/// The job's bucket count, from the fuzz input's bound bytes.
impl Fuzzed for job::Committed {
    fn fuzz_bounds(bound: u16) -> u64 {
        u64::from(bound)
    }
}

impl Fuzzed for job::BucketStart {
    fn fuzz_bounds(bound: u16) -> u64 {
        u64::from(bound)
    }
}

impl Fuzzed for job::BucketCommitted {
    fn fuzz_bounds(bound: u16) -> u64 {
        u64::from(bound)
    }
}

impl Fuzzed for job::NextBucket {
    fn fuzz_bounds(bound: u16) -> u64 {
        u64::from(bound)
    }
}

/// The connection's lane count.
impl Fuzzed for job::Lane {
    fn fuzz_bounds(bound: u16) -> u8 {
        bound.to_be_bytes()[1]
    }
}

impl Fuzzed for filter::QueryRequest {
    fn fuzz_bounds(_: u16) -> u32 {
        MAX_ITEMS
    }
}

impl Fuzzed for filter::QueryResponse {
    fn fuzz_bounds(_: u16) -> usize {
        EXPECTED_ANSWERS
    }
}

/// OTs per chunk: the fuzz input's bound.
impl Fuzzed for rr16::Challenge {
    fn fuzz_bounds(bound: u16) -> u32 {
        u32::from(bound)
    }
}

/// Challenged OTs: the fuzz input's bound.
impl Fuzzed for rr16::Response {
    fn fuzz_bounds(bound: u16) -> usize {
        usize::from(bound)
    }
}

/// Bits per share: the fuzz input's bound, below 64.
impl Fuzzed for cpsi::Share {
    fn fuzz_bounds(bound: u16) -> usize {
        usize::from(bound) % 64
    }
}

/// The parameters a client reads from the server's answer.
impl Fuzzed for he::ParamsResponse {
    fn fuzz_bounds(_: u16) {}

    fn use_decoded(self) {
        drop(PsiParams::from_apsi_json(&self.params_json));
    }
}

impl Fuzzed for he::OprfRequest {
    fn fuzz_bounds(_: u16) -> u32 {
        MAX_ITEMS
    }
}

impl Fuzzed for he::OprfResponse {
    fn fuzz_bounds(_: u16) -> usize {
        EXPECTED_ANSWERS
    }
}

/// The relinearisation key a query header carries, as the server loads it.
impl Fuzzed for he::QueryHeader {
    fn fuzz_bounds(_: u16) -> &'static HeParams {
        he_params()
    }

    fn use_decoded(self) {
        if let Ok(key) = RelinKey::from_bytes(he_params(), &self.relin_key) {
            assert_eq!(key.to_bytes().ok(), Some(self.relin_key));
        }
    }
}

/// A query ciphertext, as the server loads it.
impl Fuzzed for he::QueryCt {
    fn fuzz_bounds(_: u16) -> &'static HeParams {
        he_params()
    }

    fn use_decoded(self) {
        if let Ok(ct) = self.ciphertext(he_params()) {
            assert_eq!(wire::encode_query_ct(&ct).ok(), Some(self.ct));
        }
    }
}

impl Fuzzed for he::ResultCt {
    fn fuzz_bounds(_: u16) -> &'static HeParams {
        he_params()
    }
}

/// An EPC public key, taken by a receiver.
impl Fuzzed for EpcPublicKey {
    fn fuzz_bounds(_: u16) -> &'static EpcParams {
        &epc_parties().0
    }

    fn use_decoded(self) {
        assert!(EpcReceiver::new(&epc_parties().0, &self).is_ok());
    }
}

/// An EPC sender batch, evaluated by the receiver.
impl Fuzzed for EpcSenderBatch {
    fn fuzz_bounds(_: u16) -> &'static EpcParams {
        &epc_parties().0
    }

    fn use_decoded(self) {
        let tags = [1, 2, 255];
        let receiver = &epc_parties().2;
        assert!(receiver.evaluate_batch(self.index(), &self, &tags).is_ok());
    }
}

/// An EPC reply, decrypted by the sender.
impl Fuzzed for EpcReply {
    fn fuzz_bounds(_: u16) -> &'static EpcParams {
        &epc_parties().0
    }

    fn use_decoded(self) {
        assert!(epc_parties()
            .1
            .decrypt_reply(self.index(), &self, 3)
            .is_ok());
    }
}
