//! What both roles of the HE protocol share, so that neither the client
//! nor the server depends on the other: the wire messages and the answer
//! stream (`messages.rs`, `answer.rs`), how OPRF outputs become field
//! elements and label keys (`hashing.rs`), the database's layout in SIMD
//! slots (`shape.rs`, which fixes the query's layout too), label
//! encryption (`label.rs`: the server encrypts, the client decrypts), the
//! plaintext-field maths (`poly.rs`), the powers plan and the groupings of
//! terms on it (`powers.rs`, `grouping.rs`: the client sends the plan's
//! sources, the server computes the rest, the selection prices it), the
//! cost model (`cost.rs`) and `hex.rs`.
//!
//! Nothing here is public except the messages (re-exported as
//! `he_psi::messages` for tests and tools that speak the wire directly).

pub(crate) mod answer;
pub(crate) mod cost;
pub(crate) mod grouping;
pub(crate) mod hashing;
pub(crate) mod hex;
pub(crate) mod label;
pub mod messages;
pub(crate) mod poly;
pub(crate) mod powers;
pub(crate) mod shape;
