//! The balanced two-party PSIs through `common::two_party`'s chooser, as
//! `psikit psi send|receive` runs them: the bindings only map arguments.

use std::path::PathBuf;

use psikit_protocols::balanced::{self, Outcome, Protocol, Role, Settings};
use psikit_protocols::jobs::{self, JobInput, JobOptions, JobOutcome, JobProtocol};
use psikit_protocols::memory;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::{self, IntoPy};
use crate::input::{selected_fields, Loaded, Output, Source};
use crate::progress::Reporter;
use crate::{interrupt, net};

/// A balanced PSI party's output: the receiver's matched rows always, the
/// sender's when the intersection was revealed to it.
pub fn party_output(loaded: &Loaded, out: &Outcome, with_fields: bool) -> Option<Output> {
    (out.matches.as_deref()).map(|matches| loaded.output_matches(matches, with_fields))
}

/// This side's [`Settings`] from the Python arguments.
pub fn settings(
    protocol: &str,
    (malicious, low_comm): (bool, bool),
    reveal: bool,
    max_peer_items: u64,
    key_format: String,
) -> PyResult<Settings> {
    let protocol: Protocol = protocol.parse().py_err()?;
    let settings = Settings {
        malicious,
        low_comm,
        reveal,
        max_peer_items,
        key_format,
        ..Settings::new(protocol)
    };
    settings.check().py_err()?;
    Ok(settings)
}

/// Runs one party of a balanced PSI (see `psikit.psi.send` / `receive`),
/// telling `progress` its stages. Returns a dict with `output` (`None` for
/// a sender without reveal).
#[pyfunction]
#[pyo3(signature = (role, source, protocol="vole", listen=None, connect=None, malicious=false,
    reveal=false, max_peer_items=1<<24, accept_timeout=None, timeout=60.0, max_message_mib=16,
    tls=None, on_listening=None, progress=None, low_comm=false))]
#[allow(clippy::too_many_arguments)]
pub fn psi_run<'py>(
    py: Python<'py>,
    role: &str,
    source: &Source,
    protocol: &str,
    listen: Option<String>,
    connect: Option<String>,
    malicious: bool,
    reveal: bool,
    max_peer_items: u64,
    accept_timeout: Option<f64>,
    timeout: f64,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    on_listening: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
    low_comm: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let role = role_of(role)?;
    let limits = net::limits(timeout, max_message_mib)?;
    let peer = net::peer(listen, connect, accept_timeout, tls, limits)?;
    // One big job: freed memory is reused while it runs, as the CLI's
    // one-shot commands reuse it (declared before the data, so the data's
    // big vectors are freed before the allocator's settings come back).
    let _reuse = memory::reuse_freed_memory_during();
    let key_format = source.spec().key_format();
    let with_fields = source.is_csv();
    let reporter = Reporter::new(progress);
    let reporter = &reporter;
    let listening = net::announce(&on_listening);
    let settings = settings(
        protocol,
        (malicious, low_comm),
        reveal,
        max_peer_items,
        key_format,
    )?;
    let loaded = py.detach(|| source.load()).py_err()?;
    let party = balanced::run(&peer, role, &loaded.keys, &settings, listening, reporter);
    let out = interrupt::run_reporting(py, reporter, party)?;
    let output = party_output(&loaded, &out, with_fields);
    let d = PyDict::new(py);
    d.set_item("output", output.map(|o| o.into_py(py)).transpose()?)?;
    d.set_item("bytes_sent", out.bytes_sent)?;
    d.set_item("bytes_received", out.bytes_received)?;
    Ok(d)
}

/// The role `"send"` or `"receive"` names.
pub fn role_of(role: &str) -> PyResult<Role> {
    match role {
        "send" => Ok(Role::Sender),
        "receive" => Ok(Role::Receiver),
        other => Err(errors::input(format!(
            "role must be \"send\" or \"receive\", got {other:?}"
        ))),
    }
}

/// Runs one party of a balanced PSI as a bucketed, resumable job (see
/// `psikit.psi.send(..., job_dir=...)`): the source read once from its
/// file, the matched rows written to `output` (the receiver's, or the
/// sender's with `reveal`). Returns a dict with `matched_rows` (`None`
/// when this side learns nothing), the job's id and shape, and its costs.
#[pyfunction]
#[pyo3(signature = (role, source, job_dir, protocol="vole", listen=None, connect=None,
    malicious=false, reveal=false, resume=false, memory=jobs::DEFAULT_MEMORY, bucket_items=None, lanes=None,
    max_peer_rows=1<<40, retry=600.0, idle_timeout=600.0, output=None, return_rows=false,
    accept_timeout=None, max_message_mib=16, tls=None, on_listening=None, progress=None,
    low_comm=false))]
#[allow(clippy::too_many_arguments)]
pub fn psi_job<'py>(
    py: Python<'py>,
    role: &str,
    source: &Source,
    job_dir: PathBuf,
    protocol: &str,
    listen: Option<String>,
    connect: Option<String>,
    malicious: bool,
    reveal: bool,
    resume: bool,
    memory: u64,
    bucket_items: Option<u64>,
    lanes: Option<u8>,
    max_peer_rows: u64,
    retry: f64,
    idle_timeout: f64,
    output: Option<PathBuf>,
    return_rows: bool,
    accept_timeout: Option<f64>,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    on_listening: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
    low_comm: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let role = role_of(role)?;
    let limits = net::limits(idle_timeout, max_message_mib)?;
    let peer = net::peer(listen, connect, accept_timeout, tls, limits)?;
    let settings = settings(
        protocol,
        (malicious, low_comm),
        reveal,
        1 << 24,
        source.spec().key_format(),
    )?;
    let protocol = JobProtocol::Balanced(settings);
    let opts = JobOptions {
        return_rows,
        lanes: lanes_or_default(lanes)?,
        ..job_options(
            protocol,
            job_dir,
            resume,
            memory,
            bucket_items,
            max_peer_rows,
            (retry, idle_timeout),
            output,
        )?
    };
    // In-memory rows go to a temporary CSV: a job reads its input as a file.
    let (path, temp) = source.file().py_err()?;
    let input = JobInput {
        path,
        spec: source.spec().clone(),
    };
    let reporter = Reporter::new(progress);
    let reporter = &reporter;
    let listening = net::announce(&on_listening);
    let job = jobs::run(&peer, role, &input, &opts, listening, reporter);
    let out = interrupt::run_reporting(py, reporter, job)?;
    let d = job_details(py, &out)?;
    d.set_item("matched_rows", out.matched_rows)?;
    if let Some(rows) = &out.rows {
        // Data rows are 1-based; Python's positions count from 0.
        let positions: Vec<u8> = rows
            .iter()
            .flat_map(|&r| (r as i64 - 1).to_ne_bytes())
            .collect();
        d.set_item("positions", PyBytes::new(py, &positions))?;
        d.set_item("labels", PyList::empty(py))?;
        // A file's rows go back as their fields (`psikit.Rows`), read again.
        if temp.is_none() {
            let (headers, fields) = selected_fields(&input.path, &input.spec, rows).py_err()?;
            d.set_item("headers", headers)?;
            d.set_item("fields", Py::new(py, fields)?)?;
        }
    }
    Ok(d)
}

/// A job's options from the keyword arguments every job front end takes
/// (the rest keep `JobOptions::new`'s defaults; the pair is `retry=` and
/// `idle_timeout=`, in seconds).
#[allow(clippy::too_many_arguments)]
pub fn job_options(
    protocol: JobProtocol,
    job_dir: PathBuf,
    resume: bool,
    memory: u64,
    bucket_items: Option<u64>,
    max_peer_rows: u64,
    (retry, idle_timeout): (f64, f64),
    output: Option<PathBuf>,
) -> PyResult<JobOptions> {
    Ok(JobOptions {
        resume,
        memory,
        max_bucket_items: bucket_items,
        max_peer_rows,
        retry_for: net::seconds(retry, "retry")?,
        idle_timeout: net::seconds(idle_timeout, "idle_timeout")?,
        output,
        ..JobOptions::new(protocol, job_dir)
    })
}

/// A job's `lanes=`: `None` for the default (one per 8 cores, at most 4).
pub fn lanes_or_default(lanes: Option<u8>) -> PyResult<u8> {
    match lanes {
        None => Ok(jobs::default_lanes()),
        Some(n @ 1..=jobs::MAX_LANES) => Ok(n),
        Some(n) => Err(errors::input(format!(
            "lanes must be 1 to {}, not {n}",
            jobs::MAX_LANES
        ))),
    }
}

/// A job's id, shape and costs, as `psi_job` and `cpsi_job` return them.
pub fn job_details<'py>(py: Python<'py>, out: &JobOutcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("job_id", out.id())?;
    d.set_item("buckets", out.shape.buckets)?;
    d.set_item("sender_capacity", out.shape.sender_capacity)?;
    d.set_item("receiver_capacity", out.shape.receiver_capacity)?;
    d.set_item("buckets_run", out.buckets_run)?;
    d.set_item("reconnects", out.reconnects)?;
    d.set_item("end_confirmed", out.end_confirmed)?;
    d.set_item("rows", out.input.rows)?;
    d.set_item("bytes_sent", out.bytes_sent)?;
    d.set_item("bytes_received", out.bytes_received)?;
    Ok(d)
}
