//! Malicious-secure PSI from OT extension and garbled Bloom filters with
//! cut-and-choose (Rindal and Rosulek, EUROCRYPT 2017, Figure 4), plus its
//! semi-honest variant.
//!
//! # Protocol
//! The receiver Bob encodes his set in a Bloom filter; the sender Alice
//! learns, through random OTs, a random garbled Bloom filter whose entries
//! Bob knows exactly where his filter has ones. Alice sends, for each of
//! her items `x`, the summary value `H(x || XOR_{j in h*(x)} G[j])`; Bob
//! recomputes them for his items and outputs the matches.
//!
//! *Malicious mode* (default): KOS15 OT extension; Bob sets only an `alpha`
//! fraction of choice bits to one, and a cut-and-choose over a random
//! `p_chk` fraction of the OTs, with an aggregated proof of the opened
//! zero choice bits, bounds how many ones he can hold; he then maps his
//! filter onto unopened OTs with a permutation `π`. Parameters follow the
//! paper's section 5.2 ([`params`]). psikit runs the OTs in chunks so that
//! memory stays bounded (see `docs/rr16-design.md` for why this keeps the
//! paper's security).
//!
//! *Semi-honest mode*: IKNP OT extension with Bob's filter bits as choice
//! bits, no cut-and-choose and no permutation; fastest, but only secure if
//! both parties follow the protocol.
//!
//! # Security model
//! * Malicious mode is UC-secure against a malicious sender or receiver in
//!   the random-OT-hybrid model with random oracles (the Bloom filter hashes
//!   and summary hash; SHA-256 here), at 128-bit computational and 40-bit
//!   statistical security. A cheating receiver is caught (abort) when it
//!   sets too many choice bits to one, lies in its proof of choice bits, or
//!   sends a permutation that is not an injection into unopened OTs.
//! * A corrupt receiver's effective input set is bounded: with `|Q|` random
//!   oracle queries it can claim at most about `(kappa + N_bf) / (kappa -
//!   log2 |Q|)` items, below `6 n` for realistic `|Q|` (section 5.3).
//! * **Leakage.** Both parties learn each other's set size. Only the
//!   receiver learns the intersection. With
//!   [`Rr16Config::reveal_to_sender`], the receiver then sends the matched
//!   summary values to the sender. The sender's output is then only as
//!   honest as the receiver: a malicious receiver can omit matches, or name
//!   any of the sender's items (it holds all their summary values), so use
//!   this only where the receiver is trusted to report truthfully.
//! * Output errors: an item outside the intersection matches with
//!   probability at most `2^-40` over the whole run (summary values are
//!   `40 + log2 n_s + log2 n_r` bits).

mod bloom;
mod config;
pub mod facade;
pub(crate) mod messages;
pub mod params;
mod receiver;
mod sender;
mod session;
mod shuffle;

pub use config::{Rr16Config, PROTOCOL_ID};
pub use params::{Rr16Params, Search};
pub use receiver::{run_receiver, ReceiverOutcome};
pub use sender::{run_sender, SenderOutcome};
pub use session::Phases;

#[cfg(test)]
mod tests;
