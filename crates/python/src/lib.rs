//! `psikit._native`: the Rust half of the `psikit` Python package.
//!
//! The bindings are a front end like the CLI: they call the protocols'
//! facades (`filter_psi::facade`, `he_psi::facade`, `common::two_party`
//! with `rr16::facade::Rr16` / `vole_psi::facade::VolePsi`, and
//! `cpsi::facade` for circuit PSI), the service layer for
//! [`server::Server`], and `io` for the key encoding, never a lower crate. The Python modules (`python/psikit/`) turn lists, data
//! frames, Arrow tables and CSV paths into a [`input::Source`] and the
//! results back into the caller's kind of table.
//!
//! Every call that reads data or talks to a peer runs with the GIL
//! released (`Python::detach`). Errors become `psikit.PsikitError` or one
//! of its subclasses, with the one-line message the CLI prints.

mod cluster;
mod cpsi;
mod errors;
mod filter;
mod he;
mod input;
mod interrupt;
mod net;
mod progress;
mod psi;
mod scale;
mod server;
mod steps;

use pyo3::prelude::*;

/// The Rust half's big blocks on transparent huge pages, as in the CLI
/// (see `memory::HugePages`); Python's own objects keep its allocator.
#[global_allocator]
static ALLOCATOR: psikit_protocols::memory::HugePages = psikit_protocols::memory::HugePages;

/// Makes the allocator keep freed memory for later allocations instead of
/// returning it to the kernel, as the CLI's one-shot commands do (see
/// `psikit.reuse_freed_memory`).
#[pyfunction]
fn reuse_freed_memory() {
    psikit_protocols::memory::reuse_freed_memory();
}

/// The extension module.
/// A server's log events (a failed reload, a failed handshake) go to
/// stderr from warnings up, or as `RUST_LOG` says.
fn log_warnings() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi);
    // Already set (the module imported twice, or by the application).
    let _ = logs.with_writer(std::io::stderr).try_init();
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    log_warnings();
    m.add("PsikitError", py.get_type::<errors::PsikitError>())?;
    m.add("InputError", py.get_type::<errors::InputError>())?;
    m.add("ProtocolError", py.get_type::<errors::ProtocolError>())?;
    m.add(
        "StaleFilterError",
        py.get_type::<errors::StaleFilterError>(),
    )?;
    m.add("ParametersError", py.get_type::<errors::ParametersError>())?;
    m.add_class::<input::Source>()?;
    m.add_class::<input::MatchedFields>()?;
    m.add_class::<interrupt::Cancel>()?;
    m.add_class::<server::Server>()?;
    m.add_class::<filter::PyFilterClient>()?;
    m.add_class::<he::PyHeClient>()?;
    m.add_class::<scale::OprfWorker>()?;
    m.add_class::<scale::StateLock>()?;
    m.add_class::<steps::Party>()?;
    m.add_class::<cluster::JobPlan>()?;
    m.add_class::<cluster::ClusterJob>()?;
    m.add_function(wrap_pyfunction!(cluster::psi_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cpsi_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_part_path, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_spool_part, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_run_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(cluster::cluster_serve, m)?)?;
    m.add_function(wrap_pyfunction!(filter::filter_setup, m)?)?;
    m.add_function(wrap_pyfunction!(filter::filter_update, m)?)?;
    m.add_function(wrap_pyfunction!(filter::filter_query, m)?)?;
    m.add_function(wrap_pyfunction!(he::he_build_db, m)?)?;
    m.add_function(wrap_pyfunction!(he::he_update_db, m)?)?;
    m.add_function(wrap_pyfunction!(he::he_query, m)?)?;
    m.add_function(wrap_pyfunction!(scale::oprf_stage_key, m)?)?;
    m.add_function(wrap_pyfunction!(scale::filter_setup_from_spool, m)?)?;
    m.add_function(wrap_pyfunction!(scale::he_shard_plan, m)?)?;
    m.add_function(wrap_pyfunction!(scale::he_build_shard, m)?)?;
    m.add_function(wrap_pyfunction!(scale::he_shard_finish, m)?)?;
    m.add_function(wrap_pyfunction!(scale::he_update_shard, m)?)?;
    m.add_function(wrap_pyfunction!(scale::he_shard_finish_update, m)?)?;
    m.add_function(wrap_pyfunction!(psi::psi_run, m)?)?;
    m.add_function(wrap_pyfunction!(psi::psi_job, m)?)?;
    m.add_function(wrap_pyfunction!(cpsi::cpsi_run, m)?)?;
    m.add_function(wrap_pyfunction!(cpsi::cpsi_job, m)?)?;
    m.add_function(wrap_pyfunction!(cpsi::cpsi_party, m)?)?;
    m.add_function(wrap_pyfunction!(steps::psi_party, m)?)?;
    m.add_function(wrap_pyfunction!(steps::he_query_party, m)?)?;
    m.add_function(wrap_pyfunction!(steps::filter_query_party, m)?)?;
    m.add_function(wrap_pyfunction!(input::encode_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reuse_freed_memory, m)?)?;
    // The balanced PSIs' words, from the chooser itself (`psi.PROTOCOLS`).
    let protocols = psikit_protocols::common::two_party::Protocol::ALL.map(|p| p.to_string());
    m.add("PSI_PROTOCOLS", protocols.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
