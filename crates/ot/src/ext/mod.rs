//! 1-out-of-2 OT extension: IKNP03 (semi-honest) and KOS15 (malicious),
//! one code path.
//!
//! * Y. Ishai, J. Kilian, K. Nissim, E. Petrank, "Extending oblivious
//!   transfers efficiently", CRYPTO 2003 (IKNP).
//! * M. Keller, E. Orsini, P. Scholl, "Actively secure OT extension with
//!   optimal overhead", CRYPTO 2015 (KOS), **as corrected** in the updated
//!   ePrint 2015/546.
//!
//! # Protocol
//! Setup: 128 base OTs ([`crate::base`]) with the *extension sender* as
//! base-OT receiver; its choice bits form the global `Δ`. Each base key
//! seeds an AES-CTR PRG (key derived with the session id).
//!
//! Extension for choice bits `r` (receiver-chosen, any bias): the receiver
//! sends the matrix `u_j = G(k0_j) ⊕ G(k1_j) ⊕ r` column by column, in
//! frames; the sender gets `q_j = G(k_{Δ_j}) ⊕ Δ_j·u_j`, and after
//! transposition row `i` satisfies `q_i = t_i ⊕ r_i·Δ`. That is a
//! correlated OT; random-OT messages are `H(q_i)`, `H(q_i ⊕ Δ)` and the
//! receiver's `H(t_i)`, hashed on demand ([`SenderOts`], [`ReceiverOts`]):
//! `H` is the CR hash for IKNP, and for KOS the TCCR hash tweaked by the
//! OT's index `i` (a malicious receiver chooses its rows).
//! Rows are padded to a multiple of 128 with random choice bits; padding
//! rows are discarded.
//!
//! # The KOS consistency check (malicious security)
//! A malicious receiver could use a different choice vector in each column
//! (`u_j = G(k0_j) ⊕ G(k1_j) ⊕ r^(j)`) to learn bits of `Δ`. The original KOS
//! check (random combination of the *rows* in GF(2^128)) relied on a lemma
//! that Roy ("SoftSpokenOT", CRYPTO 2022, ePrint 2022/192, §4.1.3 and App. D)
//! showed false, with an attack on some parameters. KOS updated their paper
//! (ePrint 2015/546, Fig. 10) with a SoftSpokenOT-style check, which we
//! implement:
//!
//! 1. the receiver extends `128` extra rows with uniformly random choice
//!    bits (one 128-bit block per column, used as a mask);
//! 2. after receiving the whole matrix, the sender sends a fresh seed, from
//!    which both derive weights `χ_k ∈ GF(2^128)`, one per 128-row block `k`
//!    (the last, mask block gets weight 1);
//! 3. the receiver sends `x̃ = Σ_k χ_k·r_k` and, for every column `j`,
//!    `t̃_j = Σ_k χ_k·t_{j,k}` (each column cut into 128-bit blocks);
//! 4. the sender accepts iff `t̃_j = q̃_j ⊕ Δ_j·x̃` for all `j`, where
//!    `q̃_j = Σ_k χ_k·q_{j,k}`.
//! 5. the sender confirms (`KOS_OK`), or in an *unconfirmed* extension
//!    ([`Confirm::No`]) stays silent unless the check failed, and the
//!    receiver does not wait: the confirmation only tells the receiver that
//!    the sender accepted, which the receiver's security does not depend
//!    on, and a protocol that hears from the sender later learns of a
//!    failure then.
//!
//! Because `x̃` is one-time padded by the random mask block and `t̃_j` follows
//! from `q̃_j` and `x̃`, the sender learns nothing from the answer, so the
//! weights need no coin toss (the sender alone picks the seed, but only after
//! the matrix is fixed). A receiver cheating in `c` columns passes with
//! probability `2^-c` and then learns those `c` bits of `Δ`: the inherent
//! leakage of KOS, which the TCCR output hash tolerates (see
//! [`crate::aes_hash`]). The check adds 128 rows and about 2 KiB per
//! extension and, per OT on each side, one carry-less multiply (three
//! `PCLMULQDQ`, [`gf128::ColumnSums`]) on a column copy of the matrix kept
//! until the weights are known (cheaper than transposing the rows back).
//!
//! # Steps
//! [`OtExtSender::extend`] and [`OtExtReceiver::extend`] run a whole
//! extension. A protocol that wants to act inside one (send its own
//! messages once the receiver's choice bits are fixed, or compute while the
//! peer is busy) drives it as steps instead; each step consumes the pending
//! extension and returns the next one:
//!
//! | receiver | messages | sender |
//! |---|---|---|
//! | [`OtExtReceiver::send_matrix`] → [`MatrixSent`] | header, matrix → | [`OtExtSender::receive_matrix`] → [`MatrixReceived`] |
//! | | ← KOS seed | [`MatrixReceived::send_seed`] → [`SeedSent`] |
//! | [`MatrixSent::answer_check`]: reads the seed | KOS check → | [`SeedSent::finish`]: reads and verifies the check |
//! | then, with [`Confirm::Yes`], waits for | ← `KOS_OK` | then, with [`Confirm::Yes`], confirms |
//!
//! Both first steps take the same [`Confirm`], which the header carries.
//! The steps are the same for IKNP, where the seed, the check and the
//! confirmation are simply not sent. Between two steps the caller may
//! compute anything and exchange messages of its own, as long as the peer
//! reads them at the matching point of its own flow: e.g. in an unconfirmed
//! extension the sender may send frames after [`MatrixReceived::send_seed`],
//! which the receiver reads after [`MatrixSent::answer_check`] (RR16 sends
//! its cut-and-choose challenge there); in a confirmed one they would
//! arrive where the receiver expects `KOS_OK`. A pending extension that
//! fails or is dropped before its last step leaves the instance unusable
//! ([`OtError::Poisoned`]), as a failed [`OtExtSender::extend`] does.
//!
//! # Output hash
//! Semi-honest extensions hash with the CR hash `π(x) ⊕ x`, malicious ones
//! with the TCCR hash `π(π(x) ⊕ i) ⊕ π(x)`, tweak `i` = the OT's global row.
//!
//! # Layout
//! This module holds the configuration and the types both roles share;
//! [`OtExtSender`] is in `sender.rs`, [`OtExtReceiver`] in `receiver.rs`,
//! each with its steps, what both run (matrix sizes, PRG keys, the KOS
//! weights and column sums, header checks) in `common.rs`, and what they
//! return in `outputs.rs`.
//!
//! [`gf128::ColumnSums`]: crate::gf128::ColumnSums

mod common;
mod config;
mod outputs;
mod receiver;
mod sender;

pub(crate) use common::{check_frame_rows, check_header_fields};
pub use config::{
    Confirm, ExtConfig, Security, BASE_OTS, DEFAULT_FRAME_ROWS, KOS_EXTRA_ROWS, MAX_OTS,
};
pub use outputs::{RandomReceiverOts, RandomSenderOts, ReceiverOts, SenderOts};
pub use receiver::{MatrixSent, OtExtReceiver};
pub use sender::{MatrixReceived, OtExtSender, SeedSent};

#[cfg(test)]
mod tests;
