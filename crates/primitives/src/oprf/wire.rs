//! Group elements as they cross the wire: validated once on receipt,
//! encoded once on creation.

use core::fmt;

use super::hash::*;
use super::suite::*;
use crate::ristretto::{self, Coordinates, Outcome};
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::traits::IsIdentity;
use rayon::prelude::*;

/// A validated group element: its canonical encoding, and the point as
/// whichever arithmetic decoded it keeps it, so that each path decodes an
/// element once.
#[derive(Clone, Copy)]
pub(super) struct WireElement {
    decoded: Decoded,
    bytes: [u8; ELEMENT_LEN],
}

/// What a [`WireElement`] keeps of its point besides the bytes.
#[derive(Clone, Copy)]
enum Decoded {
    /// Made or decoded by dalek.
    Dalek(RistrettoPoint),
    /// Decoded by the multi-buffer kernel's validation.
    Lanes(Coordinates),
    /// Made by the kernel: only the bytes.
    Bytes,
}

impl WireElement {
    pub(super) fn from_point(point: RistrettoPoint) -> Self {
        let bytes = point.compress().to_bytes();
        Self {
            decoded: Decoded::Dalek(point),
            bytes,
        }
    }

    /// Wraps an encoding the kernel produced.
    pub(super) fn from_valid_bytes(bytes: [u8; ELEMENT_LEN]) -> Self {
        Self {
            decoded: Decoded::Bytes,
            bytes,
        }
    }

    /// The point, decompressed here unless dalek made it.
    pub(super) fn point(&self) -> RistrettoPoint {
        match self.decoded {
            Decoded::Dalek(point) => point,
            _ => CompressedRistretto(self.bytes)
                .decompress()
                // Every constructor validated the bytes (the kernel and
                // dalek agree on validity: ristretto/tests.rs).
                .expect("a wire element holds a valid encoding"),
        }
    }

    /// The canonical encoding.
    pub(super) fn bytes(&self) -> [u8; ELEMENT_LEN] {
        self.bytes
    }

    /// The kernel's coordinates of the point, if its validation kept them.
    pub(super) fn coordinates(&self) -> Option<&Coordinates> {
        match &self.decoded {
            Decoded::Lanes(c) => Some(c),
            _ => None,
        }
    }

    /// RFC 9497 `DeserializeElement`: canonical encoding, not the identity.
    pub(super) fn decode(bytes: &[u8], what: &'static str) -> Result<Self> {
        let bytes: [u8; ELEMENT_LEN] = bytes.try_into().map_err(|_| OprfError::WrongLength {
            what,
            expected: ELEMENT_LEN,
            actual: bytes.len(),
        })?;
        let point = CompressedRistretto(bytes)
            .decompress()
            .ok_or(OprfError::InvalidElement)?;
        if point.is_identity() {
            return Err(OprfError::IdentityElement);
        }
        Ok(Self {
            decoded: Decoded::Dalek(point),
            bytes,
        })
    }

    /// Decodes `ELEMENT_LEN`-byte encodings laid end to end, in parallel
    /// (with the multi-buffer kernel where the CPU has one).
    pub(super) fn decode_concatenated(buf: &[u8], what: &'static str) -> Result<Vec<Self>> {
        if !buf.len().is_multiple_of(ELEMENT_LEN) {
            return Err(OprfError::RaggedElements { len: buf.len() });
        }
        let Some(kernel) = ristretto::Kernel::detect() else {
            return buf
                .par_chunks_exact(ELEMENT_LEN)
                .enumerate()
                .map(|(i, chunk)| Self::decode(chunk, what).map_err(OprfError::at(i)))
                .collect();
        };
        let encodings: Vec<[u8; ELEMENT_LEN]> = buf
            .chunks_exact(ELEMENT_LEN)
            .map(|c| {
                let mut e = [0u8; ELEMENT_LEN];
                e.copy_from_slice(c);
                e
            })
            .collect();
        let chunk = chunk_len(encodings.len());
        let parts: Vec<Vec<Self>> = encodings
            .par_chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                let mut outcomes = vec![Outcome::Invalid; part.len()];
                let mut points = vec![[[0; 5]; 4]; part.len()];
                ristretto::validate_batch(kernel, part, &mut outcomes, &mut points);
                outcomes
                    .into_iter()
                    .zip(points)
                    .enumerate()
                    .map(|(j, (o, point))| {
                        match o {
                            Outcome::Product(bytes) => Ok(Self {
                                decoded: Decoded::Lanes(point),
                                bytes,
                            }),
                            Outcome::Invalid => Err(OprfError::InvalidElement),
                            Outcome::Identity => Err(OprfError::IdentityElement),
                        }
                        .map_err(OprfError::at(c * chunk + j))
                    })
                    .collect()
            })
            .collect::<Result<_>>()?;
        Ok(parts.into_iter().flatten().collect())
    }

    pub(super) fn fmt_hex(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{name}(")?;
        self.bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        write!(f, ")")
    }
}

/// Defines a public wire type wrapping [`WireElement`]. Both message types
/// decode identically; separate types stop a caller from sending one where
/// the other is expected.
macro_rules! wire_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name(pub(super) WireElement);

        impl $name {
            /// Decodes a message from the peer. Rejects wrong lengths,
            /// non-canonical encodings and the identity; never panics.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
                WireElement::decode(bytes, $what).map(Self)
            }

            /// Decodes many messages sent back to back (32 bytes each), in
            /// parallel. Errors carry the index of the first bad element.
            pub fn decode_concatenated(buf: &[u8]) -> Result<Vec<Self>> {
                let items = WireElement::decode_concatenated(buf, $what)?;
                Ok(items.into_iter().map(Self).collect())
            }

            /// The 32-byte canonical encoding, to send to the peer.
            pub fn to_bytes(&self) -> [u8; ELEMENT_LEN] {
                self.0.bytes
            }

            /// The 32-byte canonical encoding, borrowed.
            pub fn as_bytes(&self) -> &[u8; ELEMENT_LEN] {
                &self.0.bytes
            }

            /// Concatenates the encodings of `items`, the inverse of
            /// [`Self::decode_concatenated`].
            pub fn encode_concatenated(items: &[Self]) -> Vec<u8> {
                items.iter().flat_map(|e| e.0.bytes).collect()
            }

            pub(super) fn from_point(point: RistrettoPoint) -> Self {
                Self(WireElement::from_point(point))
            }

            pub(super) fn point(&self) -> RistrettoPoint {
                self.0.point()
            }
        }

        /// Encodings are canonical, so byte equality is group equality.
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.0.bytes == other.0.bytes
            }
        }

        impl Eq for $name {}

        /// Public wire data: shown as hex.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt_hex(stringify!($name), f)
            }
        }
    };
}

wire_type!(
    /// Client → server message: the blinded input `r·H(x)`.
    BlindedElement,
    "blinded element"
);

wire_type!(
    /// Server → client message: `k·r·H(x)`.
    EvaluatedElement,
    "evaluated element"
);

/// Wire elements for `2·h` for each `h` (see [`double_and_encode`]).
pub(super) fn doubled_elements(halves: &[RistrettoPoint]) -> Vec<WireElement> {
    let encodings = double_and_encode(halves);
    halves
        .iter()
        .zip(encodings)
        .map(|(h, bytes)| WireElement {
            decoded: Decoded::Dalek(h + h),
            bytes,
        })
        .collect()
}
