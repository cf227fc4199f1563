//! The filter family: set-up and updates of a server state directory
//! (`filter_psi::facade::{setup, update}`) and client queries
//! (`FilterClient`), as `psikit filter setup|update|query` do them.

use std::path::PathBuf;

use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::filter_psi::{
    self, ClientQuery, FilterClient, FilterConfig, ServerState, SyncKind, SyncOutcome,
};
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, IntoPy};
use crate::input::{Output, Source};
use crate::{interrupt, net, progress};
use tokio::sync::Mutex;

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
    let config = config(fpr_bits, bucket_size, load);
    let reporter = progress::Reporter::new(progress);
    let outcome = py.detach(|| -> Result<_, Error> {
        let (path, _guard) = source.file()?;
        filter_psi::setup(&path, source.spec(), config, &state, force, &reporter)
    });
    setup_dict(py, &reporter.finish(outcome)?)
}

/// A set-up's options as the filter's configuration.
pub(crate) fn config(fpr_bits: u32, bucket_size: u32, load: f64) -> FilterConfig {
    FilterConfig {
        fpr_log2: fpr_bits,
        bucket_size,
        build_load: load,
        rebuild_load: FilterConfig::default().rebuild_load.max(load),
        ..FilterConfig::default()
    }
}

/// What a set-up built, for people.
pub(crate) fn setup_dict<'py>(
    py: Python<'py>,
    done: &filter_psi::SetupReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = state_dict(py, &done.state)?;
    d.set_item("rows_read", done.read.rows_read)?;
    d.set_item("rows_skipped", done.read.rows_skipped)?;
    d.set_item("duplicates", done.duplicates)?;
    Ok(d)
}

/// Adds and removes items as one new epoch (see `psikit.filter.update`).
#[pyfunction]
#[pyo3(signature = (state, add=None, remove=None, progress=None))]
pub fn filter_update<'py>(
    py: Python<'py>,
    state: PathBuf,
    add: Option<&Source>,
    remove: Option<&Source>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = Source::update_spec(add, remove)?;
    let reporter = progress::Reporter::new(progress);
    let outcome = py.detach(|| -> Result<_, Error> {
        let add = add.map(Source::file).transpose()?;
        let remove = remove.map(Source::file).transpose()?;
        filter_psi::update(
            &state,
            &spec,
            add.as_ref().map(|(p, _)| p.as_path()),
            remove.as_ref().map(|(p, _)| p.as_path()),
            &reporter,
        )
    });
    let (new_state, report) = reporter.finish(outcome)?;
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
#[pyo3(signature = (server, source, cache=None, max_filter_mib=4096, timeout=60.0, max_message_mib=16, tls=None, progress=None, tag_cache=None))]
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
    progress: Option<Py<PyAny>>,
    tag_cache: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let server = net::server(server, tls, net::limits(timeout, max_message_mib)?)?;
    let client = client(py, cache, tag_cache, max_filter_mib)?;
    query_with(py, &Mutex::new(client), &server, source, progress)
}

/// A filter client keeping its filter in `cache` (in memory only without
/// one) and its items' tags in `tag_cache` if given, downloading at most
/// `max_filter_mib` MiB.
pub fn client(
    py: Python<'_>,
    cache: Option<PathBuf>,
    tag_cache: Option<PathBuf>,
    max_filter_mib: u64,
) -> PyResult<FilterClient> {
    let max_bytes = max_filter_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| errors::input("max_filter_mib is too large"))?;
    py.detach(|| {
        let client = match cache {
            Some(path) => FilterClient::with_cache_file(&path, max_bytes)?,
            None => FilterClient::in_memory(max_bytes),
        };
        match tag_cache {
            Some(path) => client.with_tag_cache(&path),
            None => Ok(client),
        }
    })
    .py_err()
}

/// One query of `client` (a sync first, then the query; a second sync and
/// a retry if the server updated in between), reporting to `progress`.
fn query_with<'py>(
    py: Python<'py>,
    client: &Mutex<FilterClient>,
    server: &ServerAddr,
    source: &Source,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let loaded = py.detach(|| source.load()).py_err()?;
    let reporter = progress::Reporter::new(progress);
    let (done, discarded) = interrupt::run_reporting(py, &reporter, async {
        let mut client = client.lock().await;
        let discarded = client
            .discarded_cache()
            .or(client.discarded_tag_cache())
            .map(str::to_owned);
        let done = client.query_at(server, &loaded.keys, &reporter).await?;
        Ok((done, discarded))
    })?;
    let output = loaded.output_matches(&done.outcome.matches, source.is_csv());
    query_dict(py, output, &done, discarded)
}

/// The dict `psikit.filter.query` gets: the matching rows, the syncs
/// done, the traffic and why a cache file was set aside, if it was.
pub fn query_dict<'py>(
    py: Python<'py>,
    output: Output,
    done: &ClientQuery,
    discarded: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = output.into_py(py)?;
    let syncs = done
        .syncs
        .iter()
        .map(|s| sync_dict(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("syncs", syncs)?;
    d.set_item("bytes_sent", done.outcome.bytes_sent)?;
    d.set_item("bytes_received", done.outcome.bytes_received)?;
    d.set_item("cached", done.outcome.cached)?;
    d.set_item("discarded_cache", discarded)?;
    Ok(d)
}

/// A filter client that keeps its copy of the server's filter between
/// calls, in memory and, with `cache`, in a file (see
/// `psikit.filter.Client`). Calls from several threads take turns.
/// (A tokio mutex: a call holds it across the awaits of its query.)
#[pyclass(module = "psikit._native", name = "FilterClient")]
pub struct PyFilterClient {
    server: ServerAddr,
    client: Mutex<FilterClient>,
}

impl PyFilterClient {
    /// Why a cache file was set aside, as `which` reports it (`None` too
    /// while a query holds the client).
    fn discarded(&self, which: fn(&FilterClient) -> Option<&str>) -> Option<String> {
        let client = self.client.try_lock().ok()?;
        which(&client).map(str::to_owned)
    }
}

#[pymethods]
impl PyFilterClient {
    #[new]
    #[pyo3(signature = (server, cache=None, max_filter_mib=4096, timeout=60.0, max_message_mib=16, tls=None, tag_cache=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        server: String,
        cache: Option<PathBuf>,
        max_filter_mib: u64,
        timeout: f64,
        max_message_mib: u32,
        tls: Option<&Bound<'_, PyDict>>,
        tag_cache: Option<PathBuf>,
    ) -> PyResult<Self> {
        let server = net::server(server, tls, net::limits(timeout, max_message_mib)?)?;
        let client = client(py, cache, tag_cache, max_filter_mib)?;
        Ok(Self {
            server,
            client: Mutex::new(client),
        })
    }

    /// Brings the filter up to date: a full download, a delta, or nothing.
    fn sync<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let outcome = interrupt::run(py, async {
            let mut client = self.client.lock().await;
            client.sync_at(&self.server).await
        })?;
        sync_dict(py, &outcome)
    }

    /// Syncs, then queries the rows of `source`, reporting to `progress`.
    #[pyo3(signature = (source, progress=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        source: &Source,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        query_with(py, &self.client, &self.server, source, progress)
    }

    /// Why the cache file given could not be used (it is replaced by the
    /// next sync), if it was damaged.
    #[getter]
    fn discarded_cache(&self) -> Option<String> {
        self.discarded(FilterClient::discarded_cache)
    }

    /// Why the tag cache file given could not be used (it is rewritten by
    /// the next query), if it was damaged.
    #[getter]
    fn discarded_tag_cache(&self) -> Option<String> {
        self.discarded(FilterClient::discarded_tag_cache)
    }

    #[getter]
    fn server(&self) -> String {
        self.server.addr.clone()
    }
}
