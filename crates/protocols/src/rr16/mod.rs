//! Malicious-secure PSI from OT extension and garbled Bloom filters with
//! cut-and-choose (Rindal and Rosulek, EUROCRYPT 2017). In progress: the
//! parameter analysis of section 5.2 is here; the protocol follows.

pub mod bloom;
pub mod params;

pub use params::Rr16Params;
