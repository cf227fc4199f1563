//! Random 1-out-of-N OT extension (KK13), N ≤ 256, semi-honest.
//!
//! V. Kolesnikov and R. Kumaresan, "Improved OT extension for transferring
//! short secrets", CRYPTO 2013. IKNP generalised from the repetition code to
//! a linear code `C` of length `k` and minimum distance `d ≥ κ`: with `k` base
//! OTs (sender's choice string `s ∈ {0,1}^k`), the receiver with choice
//! `w_i ∈ [N]` sends the columns of `G(k0) ⊕ G(k1) ⊕ C(w)`; the sender ends
//! with rows `q_i = t_i ⊕ (C(w_i) ∧ s)`. Its `N` messages are
//! `H(i, q_i ⊕ (C(j) ∧ s))` for `j ∈ [N]`; the receiver's is `H(i, t_i)`, equal
//! to message `w_i`. For `j ≠ w_i` the hash input differs from `t_i` in
//! `C(j) ⊕ C(w_i)`, masked by at least `d` unknown bits of `s`.
//!
//! * Code: the Walsh-Hadamard code of length 256, `C(w)_p = ⟨w, p⟩` (parity
//!   of `w & p`), whose nonzero codewords all have weight 128: `d = 128 = κ`,
//!   as KK13 requires for 128-bit security. It supports `N ≤ 256`.
//! * Base OTs: 256 (one per code bit), either fresh Masny-Rindal OTs
//!   ([`Kk13Sender::setup`]) or random OTs from a 1-out-of-2 extension in
//!   which the KK13 *sender* was the *receiver*
//!   ([`crate::ext::ReceiverOts::to_base_receiver`], no public-key work).
//! * Hash: the inputs are 256 bits, so the 128-bit fixed-key hashes do not
//!   apply directly (and XOR-ing two 128-bit hashes of the halves would allow
//!   a 2^64 meet-in-the-middle search on outputs). We use SHA-256 (random
//!   oracle; SHA-NI when present) over a precomputed 64-byte prefix holding
//!   the domain, session id and N, so each message costs one compression.
//! * Security: semi-honest (KK13). A malicious variant needs the PSS17
//!   consistency check, not implemented.

mod code;
mod receiver;
mod sender;

pub use code::{codeword, Row, CODE_BITS, MAX_N};

pub use receiver::{random_choices, Kk13Receiver, Kk13ReceiverOts};
pub use sender::{Kk13Sender, Kk13SenderOts};

#[cfg(test)]
mod tests;
