//! The session id every hash, KDF and PRG key of the OT layer is bound to.

use sha2::{Digest, Sha256};

/// A 32-byte session identifier, bound into every hash, KDF and PRG key of
/// the OT layer so that two sessions (or two sub-protocols of one session)
/// never share randomness. Build it from a transcript or an agreed nonce.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SessionId(pub [u8; 32]);

impl SessionId {
    /// Hashes arbitrary bytes into a session id.
    pub fn new(bytes: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(b"psikit-ot/session/v1");
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
        Self(h.finalize().into())
    }

    /// A distinct id for a named sub-protocol of this session.
    pub fn derive(&self, label: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"psikit-ot/session-derive/v1");
        h.update(self.0);
        h.update((label.len() as u64).to_be_bytes());
        h.update(label.as_bytes());
        Self(h.finalize().into())
    }
}
