//! Silent OT: correlated OTs from a few base OTs, with communication
//! sublinear in their number (dual-LPN pseudorandom correlation
//! generators).

pub mod code;
pub mod ggm;
