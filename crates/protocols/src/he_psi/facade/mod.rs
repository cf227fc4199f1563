//! The HE protocol's facade: what a user does, with the policy every front
//! end (CLI, Python, benchmarks, the demo) shares. Front ends call these
//! and the public types they return, never the protocol's cores.
//!
//! * `setup.rs`: building and updating a server database from CSV files (a
//!   fresh OPRF key, automatic parameters, label room fixed at build);
//! * `query.rs`: client queries (padding with dummies, the key-format
//!   check, a busy server retried, a [`Client`] that keeps its parameters
//!   and keys, the sans-IO [`query_stepper`]);
//! * `labels.rs`: labels as columns (the server's label columns, or one
//!   `hex:` column for labels that are not UTF-8 CSV records).
//!
//! Everything is re-exported here, so callers write `facade::build`,
//! `facade::query_blocking`, `facade::label_cells`.

mod labels;
mod query;
pub(crate) mod setup;

pub use crate::he_psi::common::hex::hex;
pub use labels::{label_cells, label_columns, label_fields, label_names, LabelCells};
pub use query::{
    query, query_blocking, query_server, query_stepper, Client, QueryOptions, Session,
};
pub use setup::{
    build, cache_bound, collect_labeled, insert_rows, load_params, read_labeled, update,
    BuildOptions, BuildReport, UpdateReport,
};
