//! What every protocol family's facade shares: how parties reach each
//! other ([`connect`]), progress reports for long jobs ([`Progress`]), the
//! vocabulary of results ([`Match`]) and server state directories
//! ([`state_dir`]).

pub mod connect;
pub mod files;
pub mod state_dir;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod summaries;
#[cfg(any(feature = "rr16", feature = "vole"))]
pub mod two_party;

/// One item of the querying party's input that the other party holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Position of the item in the querying party's input.
    pub index: usize,
    /// Its label, for protocols and databases that carry labels.
    pub label: Option<Vec<u8>>,
}

/// Receives progress of a long job (set-up, database builds) so a front
/// end can show it: the CLI draws a bar, Python calls a callback.
pub trait Progress: Sync {
    /// A new stage begins, with its total count of steps if known.
    fn stage(&self, what: &str, total: Option<u64>);
    /// Steps done so far in the current stage.
    fn advance(&self, done: u64);
}

/// Progress that nobody watches.
pub struct NoProgress;

impl Progress for NoProgress {
    fn stage(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
}

/// Refuses keys encoded otherwise than a server state's (when both are
/// known; `psikit_io::KeySpec::key_format`): they could never match.
/// `whose` names the other side in the message.
#[cfg(any(feature = "filter", feature = "he"))]
pub(crate) fn same_key_format(state: &str, other: &str, whose: &str) -> Result<(), crate::Error> {
    if state.is_empty() || other.is_empty() || state == other {
        return Ok(());
    }
    Err(crate::Error::Config(format!(
        "the server's keys are encoded as \"{state}\" but {whose} encodes them as \"{other}\": use the same number of key columns and the same --normalize"
    )))
}

/// Defines a message that is one fixed-size byte array and nothing else
/// (seeds, commitments, shares) under a family's protocol id.
#[cfg(any(feature = "rr16", feature = "vole"))]
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
#[cfg(any(feature = "rr16", feature = "vole"))]
pub(crate) use byte_array_message;
