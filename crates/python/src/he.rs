//! The HE family (labeled PSI, APSI design): building and updating a
//! database (`he_psi::facade::{build, update}`) and client queries
//! (`he_psi::facade::query_server`, which retries a busy server), as
//! `psikit he db build|update` and `psikit he query` do them.

use std::path::{Path, PathBuf};

use psikit_protocols::he_psi::facade::{self, BuildOptions, Session};
use psikit_protocols::he_psi::select::{Goal, SelectionInput};
use psikit_protocols::he_psi::shard::Manifest;
use psikit_protocols::he_psi::sharded;
use psikit_protocols::he_psi::HeState;
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, IntoPy};
use crate::input::{Loaded, Output, Source};
use crate::{interrupt, net, progress};

fn state_dict<'py>(py: Python<'py>, state: &HeState) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("items", state.items())?;
    d.set_item("max_label_bytes", state.max_label_bytes())?;
    d.set_item("bundles", state.memory().bundles)?;
    Ok(d)
}

/// The path of a source's file ([`Source::file`]), if there is a source.
fn path_of<T>(file: &Option<(PathBuf, T)>) -> Option<&Path> {
    file.as_ref().map(|(p, _)| p.as_path())
}

/// The workload automatic parameters are chosen for (its server size and
/// label length come from the data).
pub fn workload(client_items: u64, goal: &str, fpp_bits: u32) -> PyResult<SelectionInput> {
    let goal = match goal {
        "time" => Goal::Time,
        "comm" => Goal::Comm,
        other => {
            return Err(errors::input(format!(
                "goal must be \"time\" or \"comm\", got {other:?}"
            )))
        }
    };
    Ok(SelectionInput {
        server_items: 0,
        client_items,
        label_bytes: 0,
        goal,
        max_fpp_log2: -f64::from(fpp_bits),
        shards: 1,
    })
}

/// What a sharded database's manifest says, for people.
fn manifest_dict<'py>(py: Python<'py>, m: &Manifest) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("items", m.items.iter().sum::<u64>())?;
    d.set_item("shards", m.shards())?;
    d.set_item("items_per_shard", m.items.clone())?;
    d.set_item("epoch", m.epoch)?;
    d.set_item("max_label_bytes", m.max_label_bytes)?;
    d.set_item("db_id", m.db_id.clone())?;
    Ok(d)
}

/// Builds a database in `state` from `source`, whose label columns give
/// the labels (see `psikit.he.build_db`).
#[pyfunction]
#[pyo3(signature = (source, state, params=None, max_label_bytes=None, capacity=None,
    client_items=1024, goal="time", fpp_bits=40, force=false, progress=None, shards=None))]
#[allow(clippy::too_many_arguments)]
pub fn he_build_db<'py>(
    py: Python<'py>,
    source: &Source,
    state: PathBuf,
    params: Option<PathBuf>,
    max_label_bytes: Option<usize>,
    capacity: Option<u64>,
    client_items: u64,
    goal: &str,
    fpp_bits: u32,
    force: bool,
    progress: Option<Py<PyAny>>,
    shards: Option<u32>,
) -> PyResult<Bound<'py, PyDict>> {
    let workload = workload(client_items, goal, fpp_bits)?;
    let reporter = progress::Reporter::new(progress);
    let options = || -> Result<_, Error> {
        Ok(BuildOptions {
            params: params.as_deref().map(facade::load_params).transpose()?,
            max_label_bytes,
            capacity,
            workload,
            force,
        })
    };
    if let Some(shards) = shards {
        let outcome = py.detach(|| {
            let (path, _guard) = source.file()?;
            sharded::build_sharded(&path, source.spec(), &state, shards, options()?, &reporter)
        });
        let done = reporter.finish(outcome)?;
        let d = manifest_dict(py, &done.manifest)?;
        d.set_item("rows_read", done.read.rows_read)?;
        d.set_item("rows_skipped", done.read.rows_skipped)?;
        d.set_item("duplicates", done.duplicates)?;
        d.set_item("build_seconds", done.build_time.as_secs_f64())?;
        return Ok(d);
    }
    let outcome = py.detach(|| {
        let (path, _guard) = source.file()?;
        facade::build(&path, source.spec(), &state, options()?, &reporter)
    });
    let done = reporter.finish(outcome)?;
    let d = state_dict(py, &done.state)?;
    d.set_item("rows_read", done.read.rows_read)?;
    d.set_item("rows_skipped", done.read.rows_skipped)?;
    d.set_item("duplicates", done.stats.duplicates)?;
    d.set_item("build_seconds", done.build_time.as_secs_f64())?;
    Ok(d)
}

/// Removes the keys of `remove`, then adds or relabels the rows of `add`
/// (see `psikit.he.update_db`).
#[pyfunction]
#[pyo3(signature = (state, add=None, remove=None, progress=None))]
pub fn he_update_db<'py>(
    py: Python<'py>,
    state: PathBuf,
    add: Option<&Source>,
    remove: Option<&Source>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = Source::update_spec(add, remove)?;
    let reporter = progress::Reporter::new(progress);
    let files = || -> Result<_, Error> {
        Ok((
            add.map(Source::file).transpose()?,
            remove.map(Source::file).transpose()?,
        ))
    };
    if sharded::is_sharded(&state) {
        let outcome = py.detach(|| {
            let (add, remove) = files()?;
            sharded::update_sharded(&state, &spec, path_of(&add), path_of(&remove), &reporter)
        });
        let done = reporter.finish(outcome)?;
        let d = manifest_dict(py, &done.manifest)?;
        let s = &done.stats;
        d.set_item("removed", s.removed)?;
        d.set_item("not_found", s.missing)?;
        d.set_item("added", s.inserted)?;
        d.set_item("relabelled", s.relabelled)?;
        d.set_item("duplicates", s.duplicates)?;
        return Ok(d);
    }
    let outcome = py.detach(|| {
        let (add, remove) = files()?;
        facade::update(&state, &spec, path_of(&add), path_of(&remove), &reporter)
    });
    let done = reporter.finish(outcome)?;
    let d = state_dict(py, &done.state)?;
    if let Some(s) = &done.removed {
        d.set_item("removed", s.removed)?;
        d.set_item("not_found", s.missing)?;
    }
    if let Some((s, _)) = &done.added {
        d.set_item("added", s.inserted)?;
        d.set_item("relabelled", s.relabelled)?;
        d.set_item("duplicates", s.duplicates)?;
    }
    Ok(d)
}

/// Queries the rows of `source` against an HE server; matched rows come
/// with their label columns (see `psikit.he.query`).
#[pyfunction]
#[pyo3(signature = (server, source, pad_to=None, label_names=Vec::new(), timeout=60.0,
    max_message_mib=16, tls=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn he_query<'py>(
    py: Python<'py>,
    server: String,
    source: &Source,
    pad_to: Option<usize>,
    label_names: Vec<String>,
    timeout: f64,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let server = net::server(server, tls, net::limits(timeout, max_message_mib)?)?;
    let loaded = py.detach(|| source.load()).py_err()?;
    let options = facade::QueryOptions {
        pad_to,
        key_format: source.spec().key_format(),
    };
    let reporter = progress::Reporter::new(progress);
    let session = interrupt::run_reporting(
        py,
        &reporter,
        facade::query_server(&server, &loaded.keys, &options, &reporter),
    )?;
    let (output, names) = py
        .detach(|| query_output(&session, &loaded, source.is_csv(), &label_names))
        .py_err()?;
    query_dict(py, output, names, &session)
}

/// A finished query's matching rows with their label columns, and the
/// columns' names (`given`, or the CLI's defaults).
pub fn query_output(
    session: &Session,
    loaded: &Loaded,
    csv: bool,
    given: &[String],
) -> Result<(Output, Vec<String>), Error> {
    let (names, cells) = facade::label_columns(session, loaded.keys.len(), given, "label_names")?;
    Ok((loaded.output(&cells, csv), names))
}

/// The dict `psikit.he.query` gets: the matching rows, the label names,
/// the traffic, the false-positive bound and the padded size.
pub fn query_dict<'py>(
    py: Python<'py>,
    output: Output,
    names: Vec<String>,
    session: &Session,
) -> PyResult<Bound<'py, PyDict>> {
    let d = output.into_py(py)?;
    d.set_item("label_names", names)?;
    d.set_item("bytes_sent", session.bytes_sent)?;
    d.set_item("bytes_received", session.bytes_received)?;
    d.set_item("fpp_log2", session.fpp_log2)?;
    d.set_item("queried", session.queried)?;
    Ok(d)
}

/// A client of one HE server keeping the database's parameters and its
/// keys between queries (see `psikit.he.Client`). Calls from several
/// threads take turns (a tokio mutex: a call holds it across its awaits).
#[pyclass(module = "psikit._native", name = "HeClient")]
pub struct PyHeClient {
    addr: String,
    client: tokio::sync::Mutex<facade::Client>,
}

#[pymethods]
impl PyHeClient {
    #[new]
    #[pyo3(signature = (server, timeout=60.0, max_message_mib=16, tls=None))]
    fn new(
        server: String,
        timeout: f64,
        max_message_mib: u32,
        tls: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let server = net::server(server, tls, net::limits(timeout, max_message_mib)?)?;
        Ok(Self {
            addr: server.addr.clone(),
            client: tokio::sync::Mutex::new(facade::Client::new(server)),
        })
    }

    /// Queries the rows of `source`, as `he_query` does.
    #[pyo3(signature = (source, pad_to=None, label_names=Vec::new(), progress=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        source: &Source,
        pad_to: Option<usize>,
        label_names: Vec<String>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let loaded = py.detach(|| source.load()).py_err()?;
        let options = facade::QueryOptions {
            pad_to,
            key_format: source.spec().key_format(),
        };
        let reporter = progress::Reporter::new(progress);
        let session = interrupt::run_reporting(py, &reporter, async {
            let mut client = self.client.lock().await;
            client.query(&loaded.keys, &options, &reporter).await
        })?;
        let (output, names) = py
            .detach(|| query_output(&session, &loaded, source.is_csv(), &label_names))
            .py_err()?;
        let d = query_dict(py, output, names, &session)?;
        d.set_item("setup_secs", session.setup.as_secs_f64())?;
        Ok(d)
    }

    #[getter]
    fn server(&self) -> String {
        self.addr.clone()
    }
}
