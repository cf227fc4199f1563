//! The stages of a sharded HE build (`he_psi::sharded`), one call each, for
//! a distributed engine: `psikit.scale` runs them on Ray (plan on the
//! driver, OPRF in actors that load the key once, one task per shard,
//! finish on the driver). What passes between stages is plain data: the
//! plan (the manifest as JSON, no key), shard batches (bytes) and each
//! shard's counts (JSON).

use std::path::PathBuf;

use psikit_protocols::he_psi::facade::BuildOptions;
use psikit_protocols::he_psi::shard::Manifest;
use psikit_protocols::he_psi::sharded::{self, BuiltShard, ShardBatch, ShardOprf};
use psikit_protocols::{Error, NoProgress};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::errors::IntoPy;
use crate::input::Source;

/// Before stage 1: the rows of `source` (keys and labels, as a build reads
/// them) and the longest label's length, summed and maxed over the
/// batches by the caller to size the plan.
#[pyfunction]
pub fn he_shard_scan(py: Python<'_>, source: &Source) -> PyResult<(usize, usize)> {
    py.detach(|| {
        let items = source.labeled_items()?;
        let longest = items.iter().map(|i| i.label.len()).max().unwrap_or(0);
        Ok::<_, Error>((items.len(), longest))
    })
    .py_err()
}

/// Stage 1: makes the OPRF key in `router_dir` and returns the plan (JSON)
/// of a database of `rows` rows in `shards` shards, with parameters from
/// `params` (APSI JSON file) or chosen for the workload.
#[pyfunction]
#[pyo3(signature = (router_dir, shards, rows, max_label_bytes, key_format, params=None,
    client_items=1024, goal="time", fpp_bits=40))]
#[allow(clippy::too_many_arguments)]
pub fn he_shard_plan(
    py: Python<'_>,
    router_dir: PathBuf,
    shards: u32,
    rows: usize,
    max_label_bytes: usize,
    key_format: String,
    params: Option<PathBuf>,
    client_items: u64,
    goal: &str,
    fpp_bits: u32,
) -> PyResult<String> {
    let workload = crate::he::workload(client_items, goal, fpp_bits)?;
    py.detach(|| -> Result<String, Error> {
        let options = BuildOptions {
            params: params
                .as_deref()
                .map(psikit_protocols::he_psi::facade::load_params)
                .transpose()?,
            max_label_bytes: Some(max_label_bytes),
            capacity: None,
            workload,
            force: false,
        };
        let (plan, _) = sharded::plan_database(
            &router_dir,
            shards,
            rows,
            max_label_bytes,
            key_format,
            &options,
            &NoProgress,
        )?;
        Ok(plan.to_json())
    })
    .py_err()
}

/// Stage 2: the router's key, loaded once, evaluating batches of rows into
/// one batch (bytes) per shard (see `psikit.scale`).
#[pyclass(frozen, module = "psikit._native")]
pub struct ShardOprfWorker {
    oprf: ShardOprf,
}

#[pymethods]
impl ShardOprfWorker {
    #[new]
    fn new(py: Python<'_>, router_dir: PathBuf, plan: &str) -> PyResult<Self> {
        let plan = Manifest::from_json(plan).py_err()?;
        let oprf = py.detach(|| ShardOprf::open(&router_dir, &plan)).py_err()?;
        Ok(Self { oprf })
    }

    /// The rows of `source` (keys and labels, as a build reads them) as
    /// one batch per shard, in shard order.
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        source: &Source,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let batches = py
            .detach(|| -> Result<Vec<Vec<u8>>, Error> {
                let items = source.labeled_items()?;
                let rows: Vec<(&[u8], &[u8])> =
                    items.iter().map(|i| (&i.key[..], &i.label[..])).collect();
                let batches = self.oprf.evaluate(&rows, &NoProgress)?;
                Ok(batches.iter().map(ShardBatch::to_bytes).collect())
            })
            .py_err()?;
        Ok(batches.iter().map(|b| PyBytes::new(py, b)).collect())
    }
}

/// Stage 3: shard `index` built from its batches (from every OPRF worker)
/// into `dir`; returns its counts (JSON) for [`he_shard_finish`].
#[pyfunction]
pub fn he_build_shard(
    py: Python<'_>,
    plan: &str,
    index: u32,
    batches: Vec<PyBackedBytes>,
    dir: PathBuf,
) -> PyResult<String> {
    let plan = Manifest::from_json(plan).py_err()?;
    py.detach(|| -> Result<String, Error> {
        let batches = batches
            .iter()
            .map(|b| ShardBatch::from_bytes(b, plan.max_label_bytes))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sharded::build_shard(&plan, index, &batches, &dir)?.to_json())
    })
    .py_err()
}

/// Stage 4: writes the manifest with every shard's counts (in shard
/// order) to `router_dir`; returns it (JSON).
#[pyfunction]
pub fn he_shard_finish(
    py: Python<'_>,
    router_dir: PathBuf,
    plan: &str,
    built: Vec<String>,
) -> PyResult<String> {
    let plan = Manifest::from_json(plan).py_err()?;
    py.detach(|| -> Result<String, Error> {
        let built = (built.iter())
            .map(|b| BuiltShard::from_json(b))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sharded::finish(&router_dir, plan, &built)?.to_json())
    })
    .py_err()
}
