//! The filter family: set-up and updates of a server state directory
//! (`filter_psi::facade::{setup, update}`) and client queries
//! (`FilterClient`), as `psikit filter setup|update|query` do them.

use std::path::PathBuf;

use psikit_protocols::filter_psi::{
    self, FilterClient, FilterConfig, ServerState, SyncKind, SyncOutcome,
};
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, IntoPy};
use crate::input::Source;
use crate::{net, progress};

fn state_dict<'py>(py: Python<'py>, state: &ServerState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let f = state.filter();
    d.set_item("items", state.len())?;
    d.set_item("epoch", state.version().epoch)?;
    d.set_item("filter_bytes", f.size_bytes())?;
    d.set_item("bits_per_item", f.bits_per_item())?;
    d.set_item("fpr", f.estimated_fpr())?;
    Ok(d)
}

/// Builds a filter state in `state` from `source` (see `psikit.filter.setup`).
#[pyfunction]
#[pyo3(signature = (source, state, fpr_bits=30, bucket_size=4, load=0.90, force=false, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn filter_setup<'py>(
    py: Python<'py>,
    source: &Source,
    state: PathBuf,
    fpr_bits: u32,
    bucket_size: u32,
    load: f64,
    force: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = FilterConfig {
        fpr_log2: fpr_bits,
        bucket_size,
        build_load: load,
        rebuild_load: FilterConfig::default().rebuild_load.max(load),
        ..FilterConfig::default()
    };
    let callback = progress.map(progress::Callback::new);
    let done = py
        .detach(|| -> Result<_, Error> {
            let (path, _guard) = source.file()?;
            filter_psi::setup(
                &path,
                source.spec(),
                config,
                &state,
                force,
                progress::of(&callback),
            )
        })
        .py_err()?;
    let d = state_dict(py, &done.state)?;
    d.set_item("rows_read", done.read.rows_read)?;
    d.set_item("rows_skipped", done.read.rows_skipped)?;
    d.set_item("duplicates", done.duplicates)?;
    Ok(d)
}

/// Adds and removes items as one new epoch (see `psikit.filter.update`).
#[pyfunction]
#[pyo3(signature = (state, add=None, remove=None))]
pub fn filter_update<'py>(
    py: Python<'py>,
    state: PathBuf,
    add: Option<&Source>,
    remove: Option<&Source>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = Source::update_spec(add, remove)?;
    let (new_state, report) = py
        .detach(|| -> Result<_, Error> {
            let add = add.map(Source::file).transpose()?;
            let remove = remove.map(Source::file).transpose()?;
            filter_psi::update(
                &state,
                &spec,
                add.as_ref().map(|(p, _)| p.as_path()),
                remove.as_ref().map(|(p, _)| p.as_path()),
            )
        })
        .py_err()?;
    let d = state_dict(py, &new_state)?;
    d.set_item("added", report.added)?;
    d.set_item("already_present", report.already_present)?;
    d.set_item("removed", report.removed)?;
    d.set_item("not_found", report.not_found)?;
    d.set_item("changed_slots", report.changed_slots)?;
    d.set_item("rebuilt", report.rebuilt)?;
    Ok(d)
}

fn sync_dict<'py>(py: Python<'py>, s: &SyncOutcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let kind = match s.kind {
        SyncKind::UpToDate => "up_to_date",
        SyncKind::Full => "full",
        SyncKind::Delta => "delta",
    };
    d.set_item("kind", kind)?;
    d.set_item("epoch", s.epoch)?;
    d.set_item("bytes", s.body_bytes)?;
    Ok(d)
}

/// Syncs the filter (kept in `cache` if given) and queries the rows of
/// `source` (see `psikit.filter.query`).
#[pyfunction]
#[pyo3(signature = (server, source, cache=None, max_filter_mib=4096, timeout=60.0, max_message_mib=16, tls=None))]
#[allow(clippy::too_many_arguments)]
pub fn filter_query<'py>(
    py: Python<'py>,
    server: String,
    source: &Source,
    cache: Option<PathBuf>,
    max_filter_mib: u64,
    timeout: f64,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let server = net::server(server, tls, net::limits(timeout, max_message_mib)?)?;
    let max_bytes = max_filter_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| errors::input("max_filter_mib is too large"))?;
    let (output, done, discarded) = py
        .detach(|| -> Result<_, Error> {
            let loaded = source.load()?;
            let mut client = match &cache {
                Some(path) => FilterClient::with_cache_file(path, max_bytes)?,
                None => FilterClient::in_memory(max_bytes),
            };
            let discarded = client.discarded_cache().map(str::to_owned);
            let done = client.query_blocking(&server, &loaded.keys)?;
            let output = loaded.output_matches(&done.outcome.matches, source.is_csv());
            Ok((output, done, discarded))
        })
        .py_err()?;
    let d = output.into_py(py)?;
    let syncs = done
        .syncs
        .iter()
        .map(|s| sync_dict(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("syncs", syncs)?;
    d.set_item("bytes_sent", done.outcome.bytes_sent)?;
    d.set_item("bytes_received", done.outcome.bytes_received)?;
    d.set_item("discarded_cache", discarded)?;
    Ok(d)
}
