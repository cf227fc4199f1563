//! Circuit PSI through `cpsi::facade`, as `psikit cpsi <app> receive|send`
//! runs it: the arguments become the protocol's `cpsi::Choices`, whose
//! one policy (roles, `reveal_to`, which option goes with which
//! application) the CLI shares, refusals named by keyword; value columns
//! are summed per key.

use std::path::PathBuf;

use psikit_protocols::common::connect::Peer;
use psikit_protocols::cpsi::facade::{self, Role};
use psikit_protocols::cpsi::{
    App, AppKind, Choices, CpsiConfig, Input, Outcome, Output, ParseError,
};
use psikit_protocols::cpsi::{Shares, Side, Spelling, Sums};
use psikit_protocols::io::KeySpec;
use psikit_protocols::jobs::{self, JobInput, JobOptions, JobProtocol};
use psikit_protocols::memory;
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{self, IntoPy};
use crate::input::{Loaded, Source};
use crate::{interrupt, net, progress, steps};

/// A word of the vocabulary, or the refusal naming its keyword.
fn word<T: std::str::FromStr<Err = ParseError>>(s: &str) -> PyResult<T> {
    s.parse()
        .map_err(|e| errors::input(Spelling::Keywords.refusal(&e).to_string()))
}

/// One value per distinct key and value column: the sum (mod 2^64) of its
/// rows' values, as the CLI's `key_values`. `names` are the columns as the
/// caller named them (for the messages).
fn key_values(source: &Source, loaded: &Loaded, names: &[String]) -> Result<Vec<Vec<u64>>, Error> {
    let positions = source.value_positions(&loaded.table, names)?;
    let input = source.input_name();
    positions
        .iter()
        .zip(names)
        .map(|(&at, name)| {
            loaded
                .rows_of_key
                .iter()
                .map(|rows| {
                    rows.iter().try_fold(0u64, |sum, &r| {
                        let row = &loaded.table.rows[r];
                        let field = row.record.get(at).ok_or_else(|| {
                            Error::Config(format!(
                                "{input}: row {} has no value column {name}",
                                row.row
                            ))
                        })?;
                        let text = std::str::from_utf8(field).unwrap_or("").trim();
                        let v: u64 = text.parse().map_err(|_| {
                            Error::Config(format!(
                                "{input}: row {}: value {:?} in column {name} is not an unsigned \
                                 integer",
                                row.row,
                                String::from_utf8_lossy(field)
                            ))
                        })?;
                        Ok(sum.wrapping_add(v))
                    })
                })
                .collect()
        })
        .collect()
}

/// The inner product takes the receiver's first value column bit by bit,
/// so each of its per-key sums must be below `2^bits` (checked by the
/// protocol too, but only once a peer is there; here before any
/// connection, naming the first row of the key).
fn check_product_factors(
    source: &Source,
    loaded: &Loaded,
    values: &[Vec<u64>],
    config: &CpsiConfig,
) -> Result<(), Error> {
    match config.oversized_factor(values) {
        Some(k) => Err(Error::Config(format!(
            "{}: row {}: the inner product takes values below 2^{}; {} is not (raise \
             product_bits)",
            source.input_name(),
            loaded.rows_of_key[k]
                .first()
                .map_or(0, |&r| loaded.table.rows[r].row),
            config.product_bits,
            values[0][k]
        ))),
        None => Ok(()),
    }
}

/// The fields of a key made of `columns` key columns (a composite key is
/// `len ‖ bytes` per field, `len` a little-endian `u32`); `None` for bytes
/// that are not such a key.
fn key_fields(key: &[u8], columns: usize) -> Option<Vec<&[u8]>> {
    if columns <= 1 {
        return Some(vec![key]);
    }
    let mut fields = Vec::with_capacity(columns);
    let mut rest = key;
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        if len > tail.len() {
            return None;
        }
        let (field, tail) = tail.split_at(len);
        fields.push(field);
        rest = tail;
    }
    (fields.len() == columns).then_some(fields)
}

/// A key for Python: a list of its fields (bytes), or its bytes as one
/// field when they do not split into `columns` fields.
fn key_to_py<'py>(py: Python<'py>, key: &[u8], columns: usize) -> Vec<Bound<'py, PyBytes>> {
    key_fields(key, columns)
        .unwrap_or_else(|| vec![key])
        .into_iter()
        .map(|f| PyBytes::new(py, f))
        .collect()
}

/// The shares as columns: `bin`, `share`, `value_share_j` per sender value
/// column and, at the receiver, `key` (its item in the bin, as a list of
/// fields) and `row` (the 0-based input row that first holds it).
fn shares_to_py<'py>(
    py: Python<'py>,
    s: &Shares,
    loaded: &Loaded,
    columns: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let n = s.membership.len();
    d.set_item("bin", (0..n).collect::<Vec<_>>())?;
    // Integers 0 and 1 (a `Vec<u8>` would become `bytes`).
    d.set_item(
        "share",
        (0..n)
            .map(|b| u32::from(s.membership.get(b)))
            .collect::<Vec<_>>(),
    )?;
    for (j, column) in s.sender_values.iter().enumerate() {
        d.set_item(format!("value_share_{}", j + 1), column)?;
    }
    if let Some(items) = &s.item_of_bin {
        let mut keys = Vec::with_capacity(n);
        let mut rows = Vec::with_capacity(n);
        for item in items {
            let found = item.and_then(|i| {
                let i = usize::try_from(i).ok()?;
                let first = *loaded.rows_of_key.get(i)?.first()?;
                Some((&loaded.keys[i], loaded.table.rows[first].row - 1))
            });
            match found {
                Some((key, row)) => {
                    keys.push(Some(key_to_py(py, key, columns)));
                    rows.push(Some(row));
                }
                None => {
                    keys.push(None);
                    rows.push(None);
                }
            }
        }
        d.set_item("key", keys)?;
        d.set_item("row", rows)?;
    }
    Ok(d)
}

/// What this party learned, for `psikit.cpsi`'s result object; `loaded`
/// is this party's input for the union and the shares (which a job never
/// gives).
fn output_to_py<'py>(
    py: Python<'py>,
    output: &Output,
    loaded: Option<&Loaded>,
    columns: usize,
    with_fields: bool,
    min_intersection: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let sums = |d: &Bound<'py, PyDict>, s: &Sums| -> PyResult<()> {
        d.set_item("intersection_size", s.cardinality)?;
        d.set_item("sender_sums", &s.sender_values)?;
        d.set_item("receiver_sums", &s.receiver_values)?;
        d.set_item("inner_product", s.inner_product)
    };
    let input = || loaded.ok_or_else(|| errors::input("the union and the shares run one-shot"));
    let learned = match output {
        Output::Cardinality(c) => {
            d.set_item("intersection_size", c)?;
            c.is_some()
        }
        Output::Sum(s) => {
            if let Some(s) = s {
                sums(&d, s)?;
            }
            // With a minimum, both parties learn that it was reached.
            if s.is_some() || min_intersection > 0 {
                d.set_item("withheld", false)?;
            }
            s.is_some()
        }
        Output::SumWithheld(min) => {
            d.set_item("withheld", true)?;
            d.set_item("min_intersection", min)?;
            true
        }
        Output::Threshold(b) => {
            d.set_item("threshold_reached", b)?;
            b.is_some()
        }
        Output::Union(extra) => {
            if let Some(extra) = extra {
                // The union: every row of ours with a key, then the peer's
                // keys outside the intersection.
                let loaded = input()?;
                let all = vec![true; loaded.keys.len()];
                d.set_item("own", loaded.output_matches(&all, with_fields).into_py(py)?)?;
                let keys: Vec<_> = extra.iter().map(|k| key_to_py(py, k, columns)).collect();
                d.set_item("peer_keys", keys)?;
            }
            extra.is_some()
        }
        Output::Shares(s) => {
            d.set_item("shares", shares_to_py(py, s, input()?, columns)?)?;
            true
        }
    };
    d.set_item("learned", learned)?;
    Ok(d)
}

/// A party's checked options: its protocol role and the protocol's
/// configuration, from the arguments `psikit.cpsi.send` / `receive` /
/// `Party` take (checked by `Choices::resolve`, as the CLI's are).
pub struct Options {
    pub role: Role,
    pub config: CpsiConfig,
    pub value_columns: Vec<String>,
    /// The number of key columns and whether the input is a CSV file
    /// (for the result).
    pub columns: usize,
    pub csv: bool,
}

impl Options {
    /// What a job of these options runs on `source`'s rows, and how they
    /// are read (the key spec with the value columns).
    pub fn job(&self, source: &Source) -> PyResult<(JobProtocol, KeySpec)> {
        let mut spec = source.spec().clone();
        spec.value_columns = source.value_columns(&self.value_columns).py_err()?;
        let value_columns = u8::try_from(spec.value_columns.len())
            .map_err(|_| errors::input("too many value columns"))?;
        let protocol = JobProtocol::Circuit {
            config: self.config.clone(),
            value_columns,
        };
        Ok((protocol, spec))
    }

    /// Checks the options of `role` ("send" or "receive") for `source`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        application: &str,
        role: &str,
        source: &Source,
        value_columns: Vec<String>,
        threshold: Option<u64>,
        reveal_to: &str,
        min_intersection: u64,
        inner_product: bool,
        product_bits: u32,
        ot: &str,
        epc: &str,
        max_peer_items: u64,
    ) -> PyResult<Self> {
        let choices = Choices {
            side: word::<Side>(role)?,
            app: word::<AppKind>(application)?,
            threshold,
            reveal_to: word(reveal_to)?,
            ot: word(ot)?,
            epc: word(epc)?,
            value_columns: value_columns.len(),
            min_intersection,
            inner_product,
            product_bits,
            max_peer_items,
            key_format: source.spec().key_format(),
        };
        let (role, config) = choices
            .resolve(Spelling::Keywords)
            .map_err(|e| errors::input(e.to_string()))?;
        Ok(Self {
            role,
            config,
            value_columns,
            columns: source.spec().columns.len(),
            csv: source.is_csv(),
        })
    }

    /// Loads `source` (with the GIL released): its keys and their values
    /// per value column, the receiver's inner-product factors checked.
    pub fn load(&self, py: Python<'_>, source: &Source) -> PyResult<(Loaded, Vec<Vec<u64>>)> {
        py.detach(|| {
            let loaded = source.load()?;
            let values = key_values(source, &loaded, &self.value_columns)?;
            if self.role == Role::Receiver {
                check_product_factors(source, &loaded, &values, &self.config)?;
            }
            Ok((loaded, values))
        })
        .py_err()
    }

    /// What this party learned, as the dict `psikit.cpsi` reads.
    pub fn result<'py>(
        &self,
        py: Python<'py>,
        out: &Outcome,
        loaded: &Loaded,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.output(
            py,
            &out.output,
            Some(loaded),
            (out.bytes_sent, out.bytes_received),
        )
    }

    /// [`Self::result`] of an output and its traffic (sent, received).
    pub fn output<'py>(
        &self,
        py: Python<'py>,
        output: &Output,
        loaded: Option<&Loaded>,
        (sent, received): (u64, u64),
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = output_to_py(
            py,
            output,
            loaded,
            self.columns,
            self.csv,
            self.config.min_intersection,
        )?;
        d.set_item("application", self.config.app.name())?;
        d.set_item("bytes_sent", sent)?;
        d.set_item("bytes_received", received)?;
        Ok(d)
    }
}

/// Runs one party of circuit PSI (see `psikit.cpsi.send` / `receive`),
/// telling `progress` its stages. Returns a dict of what it learned
/// (`learned`: whether the result was revealed to it).
#[pyfunction]
#[pyo3(signature = (application, role, source, value_columns=Vec::new(), threshold=None,
    reveal_to="receiver", min_intersection=0, inner_product=false, product_bits=32, ot="silent", epc="auto", listen=None, connect=None,
    max_peer_items=1<<24, accept_timeout=None, timeout=60.0, max_message_mib=16, tls=None,
    on_listening=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn cpsi_run<'py>(
    py: Python<'py>,
    application: &str,
    role: &str,
    source: &Source,
    value_columns: Vec<String>,
    threshold: Option<u64>,
    reveal_to: &str,
    min_intersection: u64,
    inner_product: bool,
    product_bits: u32,
    ot: &str,
    epc: &str,
    listen: Option<String>,
    connect: Option<String>,
    max_peer_items: u64,
    accept_timeout: Option<f64>,
    timeout: f64,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    on_listening: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = Options::new(
        application,
        role,
        source,
        value_columns,
        threshold,
        reveal_to,
        min_intersection,
        inner_product,
        product_bits,
        ot,
        epc,
        max_peer_items,
    )?;
    let limits = net::limits(timeout, max_message_mib)?;
    let peer: Peer = net::peer(listen, connect, accept_timeout, tls, limits)?;
    let listening = net::announce(&on_listening);
    // One big job: freed memory is reused while it runs (see `psi_run`).
    let _reuse = memory::reuse_freed_memory_during();
    let (loaded, values) = options.load(py, source)?;
    let input = Input {
        keys: &loaded.keys,
        values: &values,
    };
    let reporter = progress::Reporter::new(progress);
    let party = facade::run(
        &peer,
        options.role,
        input,
        &options.config,
        listening,
        &reporter,
    );
    let out = interrupt::run_reporting(py, &reporter, party)?;
    options.result(py, &out, &loaded)
}

/// Runs one party of circuit PSI's cardinality, sums or threshold as a
/// bucketed, resumable job (see `psikit.cpsi.send(..., job_dir=...)`): the
/// source read once from its file with its value columns, each bucket's
/// result kept in shares, the job's result opened once. Returns the dict
/// `cpsi_run` returns, with the job's id, shape and costs under `"job"`.
#[pyfunction]
#[pyo3(signature = (application, role, source, job_dir, value_columns=Vec::new(),
    threshold=None, reveal_to="receiver", min_intersection=0, inner_product=false,
    product_bits=32, ot="silent", epc="auto", listen=None, connect=None, resume=false,
    memory=jobs::DEFAULT_MEMORY, bucket_items=None, lanes=None, max_peer_rows=1<<40, retry=600.0,
    idle_timeout=600.0, output=None, accept_timeout=None, max_message_mib=16, tls=None, on_listening=None,
    progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn cpsi_job<'py>(
    py: Python<'py>,
    application: &str,
    role: &str,
    source: &Source,
    job_dir: PathBuf,
    value_columns: Vec<String>,
    threshold: Option<u64>,
    reveal_to: &str,
    min_intersection: u64,
    inner_product: bool,
    product_bits: u32,
    ot: &str,
    epc: &str,
    listen: Option<String>,
    connect: Option<String>,
    resume: bool,
    memory: u64,
    bucket_items: Option<u64>,
    lanes: Option<u8>,
    max_peer_rows: u64,
    retry: f64,
    idle_timeout: f64,
    output: Option<PathBuf>,
    accept_timeout: Option<f64>,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    on_listening: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let options = Options::new(
        application,
        role,
        source,
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
    let limits = net::limits(idle_timeout, max_message_mib)?;
    let peer = net::peer(listen, connect, accept_timeout, tls, limits)?;
    let (protocol, spec) = options.job(source)?;
    let opts = JobOptions {
        lanes: crate::psi::lanes_or_default(lanes)?,
        ..crate::psi::job_options(
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
    let (path, _guard) = source.file().py_err()?;
    let input = JobInput { path, spec };
    let role = options.role.into();
    let reporter = progress::Reporter::new(progress);
    let listening = net::announce(&on_listening);
    let job = jobs::run(&peer, role, &input, &opts, listening, &reporter);
    let out = interrupt::run_reporting(py, &reporter, job)?;
    let app = options.config.app;
    if let Some(n) = out.written {
        // The shares or the union went to `output`, bucket by bucket.
        let d = PyDict::new(py);
        d.set_item("application", app.name())?;
        d.set_item("learned", true)?;
        let what = match app {
            App::Union => "union_keys",
            _ => "membership_shares",
        };
        d.set_item(what, n)?;
        d.set_item("bytes_sent", out.bytes_sent)?;
        d.set_item("bytes_received", out.bytes_received)?;
        d.set_item("job", crate::psi::job_details(py, &out)?)?;
        return Ok(d);
    }
    // The union's provider opens nothing: the peer learned it.
    let provided = Output::Union(None);
    let output = out.circuit.as_ref().unwrap_or(&provided);
    let traffic = (out.bytes_sent, out.bytes_received);
    let d = options.output(py, output, None, traffic)?;
    d.set_item("job", crate::psi::job_details(py, &out)?)?;
    Ok(d)
}

/// One party of circuit PSI at the message level (see `psikit.cpsi.Party`):
/// `cpsi::facade::stepper` as the one message-level [`steps::Party`] every
/// family has, bytes in and bytes out; its result is the dict `cpsi_run`
/// returns. No sockets, no runtime, no timeouts.
#[pyfunction]
#[pyo3(signature = (application, role, source, value_columns=Vec::new(), threshold=None,
    reveal_to="receiver", min_intersection=0, inner_product=false, product_bits=32,
    ot="silent", epc="auto", max_peer_items=1<<24, max_message_mib=16))]
#[allow(clippy::too_many_arguments)]
pub fn cpsi_party(
    py: Python<'_>,
    application: &str,
    role: &str,
    source: &Source,
    value_columns: Vec<String>,
    threshold: Option<u64>,
    reveal_to: &str,
    min_intersection: u64,
    inner_product: bool,
    product_bits: u32,
    ot: &str,
    epc: &str,
    max_peer_items: u64,
    max_message_mib: u32,
) -> PyResult<steps::Party> {
    let options = Options::new(
        application,
        role,
        source,
        value_columns,
        threshold,
        reveal_to,
        min_intersection,
        inner_product,
        product_bits,
        ot,
        epc,
        max_peer_items,
    )?;
    // The stepper keeps no timeouts; only the frame size limit applies.
    let limits = net::limits(60.0, max_message_mib)?;
    let (loaded, values) = options.load(py, source)?;
    let stepper = facade::stepper(
        options.role,
        loaded.keys.clone(),
        values,
        options.config.clone(),
        limits,
    );
    Ok(steps::Party::new(steps::drive(stepper, move |out| {
        Ok(Box::new(move |py: Python<'_>| {
            Ok(options.result(py, &out, &loaded)?.unbind())
        }))
    })))
}
