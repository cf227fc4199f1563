//! What every protocol family's facade shares: how parties reach each
//! other ([`connect`]), progress reports for long jobs ([`Progress`]), the
//! vocabulary of results ([`Match`]) and server state directories
//! ([`state_dir`]).

pub mod changelog;
#[cfg(feature = "net")]
pub mod connect;
pub mod files;
mod matches;
pub(crate) mod messages;
#[cfg(feature = "unbalanced")]
pub mod oprf_stage;
mod progress;
pub mod state_dir;
#[cfg(feature = "two-party")]
pub mod statistical;
#[cfg(feature = "two-party")]
pub mod summaries;
#[cfg(feature = "two-party")]
pub(crate) mod summary_codec;
#[cfg(feature = "two-party")]
pub mod two_party;

pub use matches::Match;
/// The channel and its limits, for front ends that drive a party over a
/// transport of their own (a [`Stepper`]); `Message` lets them size and
/// encode a family's messages (the benchmarks count the bytes of sans-IO
/// queries this way).
pub use psikit_transport::{Channel, Frame, Limits, Message, Stepper};
// Long jobs report and cancel through these: the unbalanced set-ups and
// builds, and the two-party bucketed jobs (`advance` only).
#[cfg(any(feature = "unbalanced", feature = "two-party"))]
pub(crate) use progress::advance;
#[cfg(feature = "unbalanced")]
pub(crate) use progress::check_cancelled;
pub use progress::{NoProgress, Progress};
#[cfg(feature = "unbalanced")]
pub(crate) use state_dir::same_key_format;
