//! Oblivious transfer (placeholder until written).
