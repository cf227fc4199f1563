//! Silent OT: correlated OTs from a few base OTs, with communication
//! sublinear in their number (dual-LPN pseudorandom correlation
//! generators with regular noise).
//!
//! | module | what |
//! |---|---|
//! | [`params`] | the shape of an extension and the rule keeping it at 128-bit security |
//! | [`code`] | the Expand-Convolute code (RRT23) compressing the noise |
//! | [`ggm`] | GGM trees as punctured PRFs |
//! | [`cot`] | silent correlated OT (Δ-COT over GF(2^128)) between two parties |
//!
//! Security: semi-honest (the base OTs are IKNP; the trees carry no
//! consistency check yet).

pub mod code;
pub mod cot;
pub mod ggm;
pub mod params;

pub use cot::{SilentOtReceiver, SilentOtSender, SilentReceiverOutput, SilentSenderOutput};
pub use params::SilentParams;
