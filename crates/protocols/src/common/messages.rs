//! How a family declares its wire messages: once, in its `messages.rs`,
//! with [`wire_messages!`]. The list gives the family its table of kinds
//! (checked at compile time: no two messages, chunked transfers or
//! sub-protocol messages under a family's protocol id share a kind) and,
//! under the `fuzzing` feature, the decoder dispatch its fuzz target runs:
//! a message added to the list is fuzzed, and the build fails until the
//! fuzz code says how its receiver bounds it ([`Fuzzed`]). The families
//! depend only on this file; the fuzz code implements [`Fuzzed`].

/// Declares a family's wire messages and the other kinds under its
/// protocol id (chunked transfers, a sub-protocol's messages):
///
/// ```ignore
/// wire_messages! {
///     messages: Hello<PROTOCOL_ID>, Challenge, Response;
///     others: KIND_SUMMARIES, KIND_REVEAL;
/// }
/// ```
///
/// It defines `KINDS` (every kind with its name, messages first in list
/// order) and, with `fuzzing`, `FUZZED` (how many messages) and
/// `fuzz_decode(which, payload, bound)`, which decodes `payload` as message
/// number `which` of the list ([`fuzz_one`]); it returns `false` when
/// `which` is past the list, so the target can go on with its payload
/// codecs.
macro_rules! wire_messages {
    (
        messages: $($m:ty),+ ;
        others: $($k:path),* $(;)?
    ) => {
        /// Every kind of this family's frames and chunked transfers, with
        /// its name; the messages first, in the order `fuzz_decode` counts
        /// them.
        pub(crate) const KINDS: &[(u8, &str)] = &[
            $((<$m as psikit_transport::Message>::KIND, stringify!($m)),)+
            $(($k, stringify!($k)),)*
        ];

        const _: () = $crate::common::messages::assert_distinct(KINDS);

        /// Decodes `payload` as message number `which` of this family's
        /// list (see [`KINDS`]); `false` if `which` is past the list.
        #[cfg(feature = "fuzzing")]
        pub(crate) fn fuzz_decode(which: usize, payload: &[u8], bound: u16) -> bool {
            let decoders: &[fn(&[u8], u16)] = &[$($crate::common::messages::fuzz_one::<$m>),+];
            match decoders.get(which) {
                Some(decode) => {
                    decode(payload, bound);
                    true
                }
                None => false,
            }
        }

        /// How many messages `fuzz_decode` picks from.
        #[cfg(feature = "fuzzing")]
        pub(crate) const FUZZED: usize = [$(stringify!($m)),+].len();
    };
}
pub(crate) use wire_messages;

/// A listed message as the fuzz targets decode it: under the bounds its
/// receiver would use (from the fuzz input's two bound bytes where the
/// target has them), then used as the receiver uses it next. Implemented
/// in `fuzzing/` for every message of every family's list.
#[cfg(feature = "fuzzing")]
pub(crate) trait Fuzzed: psikit_transport::Message {
    /// The receiver's bounds for this fuzz input.
    fn fuzz_bounds(bound: u16) -> Self::Bounds<'static>;

    /// What the receiver does next with a decoded message (must not fail
    /// on what decodes).
    fn use_decoded(self) {}
}

/// Decodes `payload` as an `M` within `bounds`; a message that decodes
/// must re-encode to exactly `payload` (one message, one encoding).
#[cfg(feature = "fuzzing")]
pub(crate) fn round_trip<M: psikit_transport::Message>(
    payload: &[u8],
    bounds: M::Bounds<'_>,
) -> Option<M> {
    let message = M::decode(payload, bounds).ok()?;
    assert_eq!(
        message.to_frame().payload,
        payload,
        "{} re-encodes differently",
        std::any::type_name::<M>()
    );
    Some(message)
}

/// [`round_trip`] of a listed message under its fuzz bounds, then its use.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_one<M: Fuzzed>(payload: &[u8], bound: u16) {
    if let Some(message) = round_trip::<M>(payload, M::fuzz_bounds(bound)) {
        message.use_decoded();
    }
}

/// Panics (at compile time, where it is called in a `const`) if two
/// entries share a kind.
pub(crate) const fn assert_distinct(kinds: &[(u8, &str)]) {
    let mut i = 0;
    while i < kinds.len() {
        let mut j = i + 1;
        while j < kinds.len() {
            assert!(
                kinds[i].0 != kinds[j].0,
                "two messages of a family share a kind"
            );
            j += 1;
        }
        i += 1;
    }
}

#[cfg(feature = "two-party")]
/// Defines a message that is one fixed-size byte array and nothing else
/// (seeds, commitments, shares) under a family's protocol id.
macro_rules! byte_array_message {
    ($(#[$doc:meta])* $name:ident: [u8; $len:literal], $protocol:expr, $kind:literal, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub [u8; $len]);

        impl psikit_transport::Message for $name {
            const PROTOCOL: psikit_transport::ProtocolId = $protocol;
            const KIND: u8 = $kind;
            type Bounds<'a> = ();

            fn write(&self, w: &mut psikit_transport::Writer) {
                w.bytes(&self.0);
            }

            fn read(
                r: &mut psikit_transport::Reader<'_>,
                (): (),
            ) -> Result<Self, psikit_transport::DecodeError> {
                r.array($field).map(Self)
            }
        }
    };
}
#[cfg(feature = "two-party")]
pub(crate) use byte_array_message;
