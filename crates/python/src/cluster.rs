//! Cluster jobs (`psikit.scale.psi`, `psikit.scale.cpsi`): the driver's
//! [`ClusterJob`] and the workers' calls, each a thin map of arguments
//! onto `psikit_protocols::jobs` (see its `cluster.rs`). Ray ships only
//! picklable options between processes; each process builds its
//! [`JobPlan`] from them with the same checks.
//!
//! Each call that runs part of a job keeps freed memory while it runs
//! (`memory::reuse_freed_memory_during`), as the CLI's job does for its
//! whole process: a worker's buckets allocate and free the same big
//! vectors bucket after bucket, and Ray's pooled worker processes go on
//! to other tasks afterwards, so the setting is not left on.

use std::path::PathBuf;

use psikit_protocols::balanced::Role;
use psikit_protocols::common::connect::{runtime, Peer};
use psikit_protocols::io::KeySpec;
use psikit_protocols::jobs::{
    self, BucketWorker, InputSummary, JobOptions, JobOutcome, JobProtocol, Step,
};
use psikit_protocols::{memory, Error, NoProgress};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::cpsi::Options;
use crate::errors::IntoPy;
use crate::input::Source;
use crate::{interrupt, net, psi};

/// What a cluster job runs and how its parts are read (CSV files with a
/// header, written by the workers from the input's batches).
#[pyclass(frozen, module = "psikit._native")]
pub struct JobPlan {
    role: Role,
    protocol: JobProtocol,
    spec: KeySpec,
    /// Circuit PSI's checked options (its result's shape).
    circuit: Option<Options>,
}

/// A part's spec: the key columns (by name or `#N`) and normalisation of
/// the job, read from CSV files with a header and `delimiter` (the
/// input's own, or `,` in the workers' copies) or Parquet files.
fn part_source(key: Vec<String>, normalize: &str, delimiter: &str) -> PyResult<Source> {
    Source::csv(PathBuf::new(), key, normalize, true, delimiter, Vec::new())
}

/// The plan of a balanced cluster job (the options of `psikit.psi.send`).
#[pyfunction]
#[pyo3(signature = (role, key, normalize, delimiter=",", protocol="vole", malicious=false,
    reveal=false, low_comm=false))]
#[allow(clippy::too_many_arguments)]
pub fn psi_plan(
    role: &str,
    key: Vec<String>,
    normalize: &str,
    delimiter: &str,
    protocol: &str,
    malicious: bool,
    reveal: bool,
    low_comm: bool,
) -> PyResult<JobPlan> {
    let source = part_source(key, normalize, delimiter)?;
    let spec = source.spec().clone();
    let mode = (malicious, low_comm);
    let settings = psi::settings(protocol, mode, reveal, 1 << 24, spec.key_format())?;
    Ok(JobPlan {
        role: psi::role_of(role)?,
        protocol: JobProtocol::Balanced(settings),
        spec,
        circuit: None,
    })
}

/// The plan of a circuit PSI cluster job (the options of
/// `psikit.cpsi.send`: cardinality, sums or a threshold).
#[pyfunction]
#[pyo3(signature = (application, role, key, normalize, delimiter=",", value_columns=Vec::new(),
    threshold=None, reveal_to="receiver", min_intersection=0, inner_product=false,
    product_bits=32, ot="silent", epc="auto"))]
#[allow(clippy::too_many_arguments)]
pub fn cpsi_plan(
    application: &str,
    role: &str,
    key: Vec<String>,
    normalize: &str,
    delimiter: &str,
    value_columns: Vec<String>,
    threshold: Option<u64>,
    reveal_to: &str,
    min_intersection: u64,
    inner_product: bool,
    product_bits: u32,
    ot: &str,
    epc: &str,
) -> PyResult<JobPlan> {
    let source = part_source(key, normalize, delimiter)?;
    let options = Options::new(
        application,
        role,
        &source,
        value_columns,
        threshold,
        reveal_to,
        min_intersection,
        inner_product,
        product_bits,
        ot,
        epc,
        1 << 24,
    )?;
    let (protocol, spec) = options.job(&source)?;
    Ok(JobPlan {
        role: options.role.into(),
        protocol,
        spec,
        circuit: Some(options),
    })
}

/// Where a worker writes part `part`'s rows.
#[pyfunction]
pub fn cluster_part_path(job_dir: PathBuf, part: u64) -> PathBuf {
    jobs::part_rows_path(&job_dir, part)
}

/// A worker's first pass over part `part`, the file `rows` (a file of the
/// input, or the worker's copy at `cluster_part_path`): the part's
/// summary, a picklable tuple `(digest, rows_read, rows, longest_key)`
/// for the driver.
#[pyfunction]
pub fn cluster_spool_part<'py>(
    py: Python<'py>,
    plan: &JobPlan,
    job_dir: PathBuf,
    part: u64,
    rows: PathBuf,
) -> PyResult<Summary<'py>> {
    let _reuse = memory::reuse_freed_memory_during();
    let s = py
        .detach(|| jobs::spool_part(&job_dir, part, &rows, &plan.spec))
        .py_err()?;
    Ok((
        PyBytes::new(py, &s.digest),
        s.rows_read,
        s.rows,
        s.longest_key,
    ))
}

/// A part's summary as Python holds it.
type Summary<'py> = (Bound<'py, PyBytes>, u64, u64, u64);

/// The connecting party's task for a run of buckets: see
/// `BucketWorker::run_remote`. Returns its bytes each way and retries.
#[pyfunction]
#[pyo3(signature = (plan, job_dir, buckets, connect, token, tls=None, retry=600.0,
    idle_timeout=600.0, max_message_mib=16))]
#[allow(clippy::too_many_arguments)]
pub fn cluster_run_buckets<'py>(
    py: Python<'py>,
    plan: &JobPlan,
    job_dir: PathBuf,
    buckets: Vec<u64>,
    connect: String,
    token: [u8; 16],
    tls: Option<&Bound<'py, PyDict>>,
    retry: f64,
    idle_timeout: f64,
    max_message_mib: u32,
) -> PyResult<Bound<'py, PyDict>> {
    let limits = net::limits(idle_timeout, max_message_mib)?;
    let server = net::server(connect, tls, limits)?;
    let retry = net::seconds(retry, "retry")?;
    let _reuse = memory::reuse_freed_memory_during();
    let worker = BucketWorker::open(&job_dir, plan.role, plan.protocol.clone(), limits).py_err()?;
    let cost = interrupt::run(py, worker.run_remote(&buckets, &server, token, retry))?;
    let d = PyDict::new(py);
    d.set_item("buckets", buckets)?;
    d.set_item("bytes_sent", cost.bytes_sent)?;
    d.set_item("bytes_received", cost.bytes_received)?;
    d.set_item("retries", cost.retries)?;
    Ok(d)
}

/// A listening party's worker: see `BucketWorker::serve`. Returns the
/// buckets it ran.
#[pyfunction]
#[pyo3(signature = (plan, job_dir, relay, ticket, idle_timeout=600.0, max_message_mib=16))]
pub fn cluster_serve(
    py: Python<'_>,
    plan: &JobPlan,
    job_dir: PathBuf,
    relay: String,
    ticket: [u8; 16],
    idle_timeout: f64,
    max_message_mib: u32,
) -> PyResult<u64> {
    let limits = net::limits(idle_timeout, max_message_mib)?;
    let _reuse = memory::reuse_freed_memory_during();
    let worker = BucketWorker::open(&job_dir, plan.role, plan.protocol.clone(), limits).py_err()?;
    interrupt::run(py, worker.serve(&relay, ticket))
}

/// A cluster job's driver (one per party): the job directory, the link
/// to the peer and, at the listening party, the relay its workers attach
/// to, kept on a runtime of its own between calls.
#[pyclass(module = "psikit._native")]
pub struct ClusterJob {
    job: jobs::ClusterJob,
    plan: Py<JobPlan>,
    runtime: tokio::runtime::Runtime,
}

#[pymethods]
impl ClusterJob {
    #[new]
    #[pyo3(signature = (plan, job_dir, listen=None, connect=None, tls=None,
        relay_listen="127.0.0.1:0", workers=1, resume=false, memory=jobs::DEFAULT_MEMORY,
        bucket_items=None, max_peer_rows=1<<40, retry=600.0, idle_timeout=600.0, output=None,
        max_message_mib=16, on_listening=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        plan: Py<JobPlan>,
        job_dir: PathBuf,
        listen: Option<String>,
        connect: Option<String>,
        tls: Option<&Bound<'_, PyDict>>,
        relay_listen: &str,
        workers: u32,
        resume: bool,
        memory: u64,
        bucket_items: Option<u64>,
        max_peer_rows: u64,
        retry: f64,
        idle_timeout: f64,
        output: Option<PathBuf>,
        max_message_mib: u32,
        on_listening: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let limits = net::limits(idle_timeout, max_message_mib)?;
        // A cluster job's listening driver waits for its peer as long as
        // the peer's buckets take: no accept timeout.
        let peer: Peer = net::peer(listen, connect, None, tls, limits)?;
        let p = plan.get();
        let opts = JobOptions {
            lanes: 1,
            ..psi::job_options(
                p.protocol.clone(),
                job_dir,
                resume,
                memory,
                bucket_items,
                max_peer_rows,
                (retry, idle_timeout),
                output,
            )?
        };
        let runtime = runtime().py_err()?;
        let listening = net::announce(&on_listening);
        let open = jobs::ClusterJob::open(
            p.role,
            opts,
            p.spec.clone(),
            &peer,
            relay_listen,
            workers,
            listening,
        );
        let job = interrupt::run_on(py, &runtime, open)?;
        Ok(Self { job, plan, runtime })
    }

    /// Whether the input's parts are recorded (a resumed job skips them).
    fn has_input(&self) -> PyResult<bool> {
        Ok(self.job.input().py_err()?.is_some())
    }

    /// Records the parts (each its file and `cluster_spool_part`'s tuple,
    /// in part order); returns the job's rows.
    #[allow(clippy::type_complexity)]
    fn set_parts(&self, parts: Vec<(PathBuf, ([u8; 32], u64, u64, u64))>) -> PyResult<u64> {
        let parts: Vec<(PathBuf, InputSummary)> = parts
            .into_iter()
            .map(|(path, (digest, rows_read, rows, longest_key))| {
                let summary = InputSummary {
                    digest,
                    rows_read,
                    rows,
                    longest_key,
                };
                (path, summary)
            })
            .collect();
        Ok(self.job.set_parts(&parts).py_err()?.rows)
    }

    /// On resume: the input's files still have the digests the job began
    /// with.
    fn check_parts(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.job.check_parts()).py_err()
    }

    /// One control connection: `("todo", [buckets])` or `("done", result)`
    /// (the dict `psikit.psi` or `psikit.cpsi` jobs return).
    fn step<'py>(&self, py: Python<'py>) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
        let _reuse = memory::reuse_freed_memory_during();
        let step = interrupt::run_on(py, &self.runtime, self.job.step(&NoProgress))?;
        match step {
            Step::Todo(todo) => Ok(("todo", PyList::new(py, todo)?.into_any())),
            Step::Done(out) => Ok(("done", self.result(py, &out)?.into_any())),
        }
    }

    /// The connecting party's `(token, peer_workers)` for its bucket
    /// tasks, after a step; `None` at the listening party.
    fn bucket_token<'py>(&self, py: Python<'py>) -> Option<(Bound<'py, PyBytes>, u32)> {
        let (token, workers) = self.job.bucket_token()?;
        Some((PyBytes::new(py, &token), workers))
    }

    /// The listening party's `(relay address, ticket)` for its workers;
    /// `None` at the connecting party.
    fn relay<'py>(&self, py: Python<'py>) -> Option<(String, Bound<'py, PyBytes>)> {
        let (addr, ticket) = self.job.relay()?;
        Some((addr, PyBytes::new(py, &ticket)))
    }
}

impl ClusterJob {
    /// The finished job as the one-machine job's dict.
    fn result<'py>(&self, py: Python<'py>, out: &JobOutcome) -> PyResult<Bound<'py, PyDict>> {
        let details = psi::job_details(py, out)?;
        details.set_item("split_s", out.times.split.as_secs_f64())?;
        details.set_item("output_s", out.times.output.as_secs_f64())?;
        let Some(options) = &self.plan.get().circuit else {
            details.set_item("matched_rows", out.matched_rows)?;
            return Ok(details);
        };
        let output = out
            .circuit
            .as_ref()
            .ok_or(Error::Internal("a circuit PSI job's result"))
            .py_err()?;
        let d = options.output(py, output, None, (out.bytes_sent, out.bytes_received))?;
        d.set_item("job", details)?;
        Ok(d)
    }
}
