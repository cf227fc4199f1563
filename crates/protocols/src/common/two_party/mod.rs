//! What the balanced two-party PSIs (VOLE-PSI, RR16) share below the
//! families: their names ([`Protocol`]), the driver every family plugs
//! into ([`TwoParty`]) and the hello the families open with ([`hello`]),
//! which refuses a mismatched peer in the flags' terms on both sides. The
//! chooser that picks a family for a front end is `crate::balanced`, above
//! the families.
//!
//! Files: `protocol.rs` the names, `hello.rs` the hello and its refusals,
//! `driver.rs` the generic runs of a [`TwoParty`], `testing.rs` what the
//! families' tests share.

mod driver;
mod hello;
mod protocol;
#[cfg(test)]
pub(crate) mod testing;

pub use driver::{abort, TwoParty};
pub(crate) use driver::{finish, open, receiver_on, sender_on};
#[cfg(feature = "cpsi")]
pub(crate) use hello::check_peer;
pub(crate) use hello::{
    flag, job_refusal, key_refusal, mode_refusal, protocol_refusal, refused_by_peer, Refusal,
};
pub use hello::{hello, Hello, Mode, Terms};
pub use protocol::Protocol;
