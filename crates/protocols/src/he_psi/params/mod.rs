//! Public parameters of HE PSI, in Microsoft APSI's JSON parameter format.
//!
//! A parameter set fixes everything both parties must agree on before a
//! query: the client's cuckoo table (`table_params`), how an item is cut into
//! field elements (`item_params`), which powers of its items the client
//! encrypts (`query_params`) and the BFV scheme (`seal_params`). We read and
//! write APSI's files so that the two implementations can be compared on
//! identical inputs, and we enforce APSI's validity rules so that a file
//! APSI rejects is rejected here too (design note, section 3).
//!
//! This module only declares its parts and re-exports them: the types and
//! the figures derived from them are in `types`, APSI's and SEAL's limits in
//! `limits`, the parameter error in `error`, reading and writing APSI's
//! files in `apsi_json`, APSI's validity rules in `validate`, and the prime
//! search and primality test in `prime`.

mod apsi_json;
mod error;
#[cfg(test)]
mod fixtures;
mod limits;
mod prime;
mod types;
mod validate;

pub use limits::{
    COEFF_MODULUS_COUNT_MAX, FELTS_PER_ITEM_RANGE, HASH_FUNC_COUNT_MAX, ITEM_BITS_RANGE,
    MODULUS_BITS_MAX, POLY_MODULUS_DEGREE_RANGE,
};
pub use prime::{batching_prime, is_prime};
pub use types::{ItemParams, PsiParams, QueryParams, SealParams, TableParams};
