//! How a family declares its wire messages: once, in its `messages.rs`,
//! with [`wire_messages!`]. The list gives the family its table of kinds
//! (checked at compile time: no two messages, chunked transfers or
//! sub-protocol messages under a family's protocol id share a kind) and, under the `fuzzing` feature, the decoder
//! dispatch its fuzz target runs, so a message added to the list is
//! fuzzed without touching `fuzzing/`.

/// Declares a family's wire messages, each with the bounds a receiver
/// decodes it under when fuzzed (an expression of `$bound`, the fuzz
/// input's two bound bytes as a `u16`), optionally followed by `=> check`,
/// a function the decoded message is passed to (how the receiving party
/// uses it next), and the family's chunked-transfer kinds:
///
/// ```ignore
/// wire_messages! {
///     bound;
///     messages: Hello => (), Challenge => u32::from(bound);
///     others: KIND_SUMMARIES, KIND_REVEAL;
/// }
/// ```
///
/// It defines `KINDS` (every kind with its name, messages first in list
/// order) and, with `fuzzing`, `fuzz_decode(which, payload, bound)`, which
/// decodes `payload` as message number `which` of the list and checks
/// that it re-encodes to the same bytes; it returns `false` when `which`
/// is past the list, so the target can go on with its payload codecs.
macro_rules! wire_messages {
    (
        $bound:ident;
        messages: $($m:ty => $b:expr $(=> $check:expr)?),+ ;
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
        pub(crate) fn fuzz_decode(which: usize, payload: &[u8], $bound: u16) -> bool {
            let mut at = 0usize;
            $(
                if which == at {
                    #[allow(unused_variables)]
                    if let Some(message) = $crate::fuzzing::harness::round_trip::<$m>(payload, $b) {
                        $(($check)(message);)?
                    }
                    return true;
                }
                at += 1;
            )+
            let _ = ($bound, at);
            false
        }

        /// How many messages `fuzz_decode` picks from.
        #[cfg(feature = "fuzzing")]
        pub(crate) const FUZZED: usize = [$(stringify!($m)),+].len();
    };
}
pub(crate) use wire_messages;

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
