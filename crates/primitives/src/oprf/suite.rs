//! The ciphersuite's constants, the module's error and result types: what
//! every part of the OPRF takes from below.

/// RFC 9497 `contextString` for mode OPRF and `ristretto255-SHA512`:
/// `"OPRFV1-" || I2OSP(0x00, 1) || "-" || "ristretto255-SHA512"`.
pub const CONTEXT_STRING: &[u8] = b"OPRFV1-\x00-ristretto255-SHA512";

/// Length of a serialized group element (`Ne`).
pub const ELEMENT_LEN: usize = 32;
/// Length of a serialized scalar, such as a server key (`Ns`).
pub const SCALAR_LEN: usize = 32;
/// Length of a PRF output (`Nh`, the SHA-512 digest size).
pub const OUTPUT_LEN: usize = 64;
/// Longest accepted PRF input: the RFC encodes the length in two bytes.
pub const MAX_INPUT_LEN: usize = u16::MAX as usize;

/// One PRF output, `F(k, x)`.
pub type Output = [u8; OUTPUT_LEN];

/// `"HashToGroup-" || contextString`.
pub(super) const HASH_TO_GROUP_DST: &[u8] = b"HashToGroup-OPRFV1-\x00-ristretto255-SHA512";
/// `"DeriveKeyPair" || contextString`.
pub(super) const DERIVE_KEY_PAIR_DST: &[u8] = b"DeriveKeyPairOPRFV1-\x00-ristretto255-SHA512";
/// Tag closing the hash that turns an unblinded element into the output.
pub(super) const FINALIZE_LABEL: &[u8] = b"Finalize";

/// SHA-512 digest size (`b_in_bytes` in RFC 9380).
pub(super) const XMD_DIGEST_LEN: usize = 64;
/// SHA-512 input block size (`s_in_bytes` in RFC 9380).
pub(super) const XMD_BLOCK_LEN: usize = 128;
/// Longest output of `expand_message_xmd`: 255 digest blocks.
pub(super) const XMD_MAX_OUT: usize = 255 * XMD_DIGEST_LEN;

/// Largest work unit of the batch functions. Each chunk shares one field
/// inversion for point compression (and, in [`finalize_batch`], one scalar
/// inversion), so bigger is cheaper until the chunk count starves threads.
pub(super) const MAX_CHUNK: usize = 256;
/// Smallest work unit, so that even small batches share their inversions.
pub(super) const MIN_CHUNK: usize = 16;

/// Everything that can go wrong in this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OprfError {
    /// The PRF input does not fit the RFC's 2-byte length prefix.
    #[error("OPRF input is {len} bytes; at most {MAX_INPUT_LEN} bytes are allowed")]
    InputTooLong {
        /// Length of the rejected input.
        len: usize,
    },
    /// The key-derivation `info` string does not fit its 2-byte length prefix.
    #[error("key info is {len} bytes; at most {MAX_INPUT_LEN} bytes are allowed")]
    InfoTooLong {
        /// Length of the rejected info string.
        len: usize,
    },
    /// The input hashed to the identity element (RFC `InvalidInputError`);
    /// this happens with negligible probability.
    #[error("OPRF input hashes to the identity element")]
    InvalidInput,
    /// A byte string has the wrong length for what it should encode.
    #[error("{what} must be {expected} bytes, got {actual}")]
    WrongLength {
        /// What was being decoded.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Length received.
        actual: usize,
    },
    /// A buffer of concatenated elements is not a whole number of elements.
    #[error("{len} bytes is not a whole number of {ELEMENT_LEN}-byte group elements")]
    RaggedElements {
        /// Length of the rejected buffer.
        len: usize,
    },
    /// 32 bytes that are not the canonical encoding of a ristretto255 element.
    #[error("bytes are not a canonical ristretto255 element encoding")]
    InvalidElement,
    /// The identity element, which RFC 9497 forbids in messages.
    #[error("group element is the identity, which is not allowed")]
    IdentityElement,
    /// A scalar encoding that is not reduced modulo the group order.
    #[error("scalar is not canonically encoded (it must be below the group order)")]
    NonCanonicalScalar,
    /// A zero scalar, which is not a valid key.
    #[error("scalar is zero, which is not a valid key")]
    ZeroScalar,
    /// `DeriveKeyPair` hashed to zero 256 times in a row (never in practice).
    #[error("DeriveKeyPair found no non-zero scalar in 256 attempts")]
    DeriveKeyPairFailed,
    /// Batch arguments that must be parallel slices have different lengths.
    #[error(
        "batch lengths differ: {inputs} inputs, {blinds} blinds, {evaluated} evaluated elements"
    )]
    BatchLengthMismatch {
        /// Number of inputs.
        inputs: usize,
        /// Number of blinds.
        blinds: usize,
        /// Number of evaluated elements.
        evaluated: usize,
    },
    /// Arguments outside what `expand_message_xmd` (RFC 9380) allows.
    #[error("expand_message_xmd: {0}")]
    ExpandMessage(&'static str),
    /// One item of a batch failed; `index` is its position in the batch.
    #[error("batch item {index}: {source}")]
    BatchItem {
        /// Position of the failing item.
        index: usize,
        /// Why it failed.
        source: Box<OprfError>,
    },
}

impl OprfError {
    /// Wraps an error with the batch position it happened at.
    pub(super) fn at(index: usize) -> impl Fn(OprfError) -> OprfError {
        move |e| OprfError::BatchItem {
            index,
            source: Box::new(e),
        }
    }
}

/// Result type of this module.
pub type Result<T, E = OprfError> = core::result::Result<T, E>;
