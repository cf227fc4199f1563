//! The balanced two-party PSIs (VOLE-PSI, RR16) behind one vocabulary:
//! which one ([`Protocol`]), how a party runs it ([`Settings`], [`Role`]),
//! what it learns ([`Outcome`]), and one entry that picks the family
//! ([`run`], [`run_blocking`], [`run_on`], [`stepper`]). Below it, the
//! driver every family plugs into ([`TwoParty`]) and the hello the families
//! open with ([`hello`]), which refuses a mismatched peer in the flags'
//! terms on both sides.
//!
//! Files: `protocol.rs` the names, `hello.rs` the hello and its refusals,
//! `driver.rs` the generic runs of a [`TwoParty`], `balanced.rs` the
//! chooser, `testing.rs` what the families' tests share.

mod balanced;
mod driver;
mod hello;
mod protocol;
#[cfg(test)]
pub(crate) mod testing;

pub use balanced::{run, run_blocking, run_on, stepper, Outcome, Phases, Role, Settings};
#[cfg(feature = "cpsi")]
pub(crate) use driver::open;
pub use driver::{abort, TwoParty};
#[cfg(feature = "cpsi")]
pub(crate) use hello::check_peer;
pub use hello::{hello, Hello, Mode, Terms};
pub use protocol::Protocol;
#[cfg(test)]
mod tests;
