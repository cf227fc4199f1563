//! The stages of a server build split for a distributed engine, one call
//! each: `psikit.scale` runs them on Ray. Both families share the OPRF
//! stage (`common::oprf_stage`): a key made once, OPRF workers that load it
//! once and spool their outputs per shard to files, and a last stage per
//! family (a sharded HE database: plan, one task per shard, finish; a
//! filter state: one task that builds the filter). What passes between
//! stages is plain data: paths, counts and the plan (the manifest as JSON,
//! no key).

use std::path::PathBuf;
use std::sync::Mutex;

use psikit_protocols::common::oprf_stage::{self, Spool};
use psikit_protocols::common::state_dir;
use psikit_protocols::filter_psi;
use psikit_protocols::he_psi::facade::{self, BuildOptions};
use psikit_protocols::he_psi::shard::Manifest;
use psikit_protocols::he_psi::sharded::{self, BuiltShard, ShardOprf};
use psikit_protocols::{Error, NoProgress};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPy;
use crate::input::Source;

/// Stage 1 of both families: a fresh OPRF key in the owner-only file
/// `path` (refused if one is there).
#[pyfunction]
pub fn oprf_stage_key(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.detach(|| oprf_stage::create_key(&path)).py_err()
}

/// Stage 2 of both families: the key in `key_dir`, loaded once, evaluating
/// batches of rows and spooling the outputs (with their labels) of each of
/// `shards` shards to files under `spool` (a filter has one shard).
#[pyclass(frozen, module = "psikit._native")]
pub struct OprfWorker {
    oprf: ShardOprf,
    spool: Mutex<Spool>,
}

#[pymethods]
impl OprfWorker {
    /// `name` tells this worker's files from the others' (unique per
    /// worker: letters, digits, `-`, `_`). With `manifest` (an update of a
    /// sharded database), the key is checked against it.
    #[new]
    #[pyo3(signature = (key_dir, shards, spool, name, manifest=None))]
    fn new(
        py: Python<'_>,
        key_dir: PathBuf,
        shards: u32,
        spool: PathBuf,
        name: &str,
        manifest: Option<&str>,
    ) -> PyResult<Self> {
        let manifest = manifest.map(Manifest::from_json).transpose().py_err()?;
        let (oprf, spool) = py
            .detach(|| -> Result<_, Error> {
                let oprf = match &manifest {
                    Some(m) if m.shards() != shards => {
                        return Err(Error::Config(format!(
                            "the database has {} shards, not {shards}",
                            m.shards()
                        )))
                    }
                    Some(m) => ShardOprf::for_manifest(&key_dir, m)?,
                    None => ShardOprf::open(&key_dir, shards)?,
                };
                Ok((oprf, Spool::new(&spool, name, shards)?))
            })
            .py_err()?;
        Ok(Self {
            oprf,
            spool: Mutex::new(spool),
        })
    }

    /// Evaluates the rows of `source` (keys and labels, as a build reads
    /// them) into the spool; returns the rows and the longest label's
    /// length, which the plan is made from.
    fn evaluate(&self, py: Python<'_>, source: &Source) -> PyResult<(usize, usize)> {
        py.detach(|| -> Result<(usize, usize), Error> {
            let items = source.labeled_items()?;
            let rows: Vec<(&[u8], &[u8])> =
                items.iter().map(|i| (&i.key[..], &i.label[..])).collect();
            let batches = self.oprf.evaluate(&rows, &NoProgress)?;
            let longest = batches.iter().map(|b| b.longest_label()).max().unwrap_or(0);
            self.spool()?.push(batches)?;
            Ok((rows.len(), longest))
        })
        .py_err()
    }

    /// Writes what is still buffered: call once the worker's rows are done.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.spool()?.flush()).py_err()
    }
}

impl OprfWorker {
    fn spool(&self) -> Result<std::sync::MutexGuard<'_, Spool>, Error> {
        self.spool
            .lock()
            .map_err(|_| Error::Internal("an OPRF worker's spool failed before"))
    }
}

/// HE stage 3: the plan (JSON) of a database of `rows` rows in `shards`
/// shards under the key in `router_dir`, whose longest label has `longest`
/// bytes, with parameters from `params` (APSI JSON file) or chosen for the
/// workload.
#[pyfunction]
#[pyo3(signature = (router_dir, shards, rows, longest, labeled, key_format, max_label_bytes=None,
    params=None, client_items=1024, goal="time", fpp_bits=40, label_columns=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub fn he_shard_plan(
    py: Python<'_>,
    router_dir: PathBuf,
    shards: u32,
    rows: usize,
    longest: usize,
    labeled: bool,
    key_format: String,
    max_label_bytes: Option<usize>,
    params: Option<PathBuf>,
    client_items: u64,
    goal: &str,
    fpp_bits: u32,
    label_columns: Vec<String>,
) -> PyResult<String> {
    let workload = crate::he::workload(client_items, goal, fpp_bits)?;
    // The names the one-machine build records for these `--label` columns.
    let label_names = psikit_protocols::io::KeySpec {
        label_columns: (label_columns.iter())
            .map(|c| psikit_protocols::io::Column::parse(c))
            .collect::<Result<_, _>>()
            .map_err(Error::from)
            .py_err()?,
        ..psikit_protocols::io::KeySpec::new(Vec::new())
    }
    .label_names();
    py.detach(|| -> Result<String, Error> {
        let options = BuildOptions {
            params: params.as_deref().map(facade::load_params).transpose()?,
            max_label_bytes,
            capacity: None,
            workload,
            force: false,
        };
        let room = sharded::planned_label_room(longest, labeled, &options)?;
        let (plan, _) = sharded::plan_database(
            &router_dir,
            shards,
            rows,
            room,
            (key_format, label_names),
            &options,
            &NoProgress,
        )?;
        Ok(plan.to_json())
    })
    .py_err()
}

/// HE stage 4: shard `index` built from its batches in `spool` (from every
/// OPRF worker) into `dir`; returns its counts (JSON) for
/// [`he_shard_finish`].
#[pyfunction]
pub fn he_build_shard(
    py: Python<'_>,
    plan: &str,
    index: u32,
    spool: PathBuf,
    dir: PathBuf,
) -> PyResult<String> {
    let plan = Manifest::from_json(plan).py_err()?;
    py.detach(|| -> Result<String, Error> {
        let batches = Spool::read_shard(&spool, index, plan.max_label_bytes)?;
        Ok(sharded::build_shard(&plan, index, &batches, &dir)?.to_json())
    })
    .py_err()
}

/// HE stage 5: writes the manifest with every shard's counts (in shard
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

/// An update's stage per shard: shard `index` of the database `manifest`
/// (JSON) describes, in `dir`, loses the rows spooled under `removals` and
/// gains those under `additions` (either may be absent), saved at the next epoch; returns its
/// counts (JSON) for [`he_shard_finish_update`].
#[pyfunction]
pub fn he_update_shard(
    py: Python<'_>,
    manifest: &str,
    index: u32,
    removals: Option<PathBuf>,
    additions: Option<PathBuf>,
    dir: PathBuf,
) -> PyResult<String> {
    let manifest = Manifest::from_json(manifest).py_err()?;
    py.detach(|| -> Result<String, Error> {
        let read = |spool: &Option<PathBuf>, room| match spool {
            Some(spool) => Spool::read_shard(spool, index, room),
            None => Ok(Vec::new()),
        };
        let gone = read(&removals, 0)?;
        let new = read(&additions, manifest.max_label_bytes)?;
        let (gone, new): (Vec<_>, Vec<_>) = (gone.iter().collect(), new.iter().collect());
        Ok(sharded::update_shard(&manifest, index, &gone, &new, &dir)?.to_json())
    })
    .py_err()
}

/// An update's last stage: the manifest at the next epoch with every
/// shard's counts (in shard order), written to `router_dir` (routers
/// switch to it); returns it (JSON).
#[pyfunction]
pub fn he_shard_finish_update(
    py: Python<'_>,
    router_dir: PathBuf,
    manifest: &str,
    built: Vec<String>,
) -> PyResult<String> {
    let manifest = Manifest::from_json(manifest).py_err()?;
    py.detach(|| -> Result<String, Error> {
        let built = (built.iter())
            .map(|b| BuiltShard::from_json(b))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sharded::finish_update(&router_dir, manifest, &built)?.to_json())
    })
    .py_err()
}

/// A state directory's lock (`common::state_dir::lock`), held by a staged
/// build or update's driver until [`StateLock::release`]: a second writer
/// is refused, and the lock goes with the process if it dies.
#[pyclass(module = "psikit._native")]
pub struct StateLock {
    lock: Option<state_dir::StateLock>,
}

#[pymethods]
impl StateLock {
    #[new]
    fn new(py: Python<'_>, dir: PathBuf) -> PyResult<Self> {
        let lock = py.detach(|| state_dir::lock(&dir)).py_err()?;
        Ok(Self { lock: Some(lock) })
    }

    fn release(&mut self) {
        self.lock = None;
    }
}

/// The filter's last stage: the state of the rows spooled under `spool`
/// (one shard) under the key in `key_file`, saved in `state` (see
/// `psikit.scale.filter_setup`).
#[pyfunction]
#[pyo3(signature = (spool, key_file, rows, key_format, state, fpr_bits=30, bucket_size=4,
    load=0.90, force=false))]
#[allow(clippy::too_many_arguments)]
pub fn filter_setup_from_spool<'py>(
    py: Python<'py>,
    spool: PathBuf,
    key_file: PathBuf,
    rows: u64,
    key_format: String,
    state: PathBuf,
    fpr_bits: u32,
    bucket_size: u32,
    load: f64,
    force: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let config = crate::filter::config(fpr_bits, bucket_size, load);
    let done = py
        .detach(|| {
            filter_psi::setup_from_spool(
                &spool,
                &key_file,
                rows,
                key_format,
                config,
                &state,
                force,
                &NoProgress,
            )
        })
        .py_err()?;
    crate::filter::setup_dict(py, &done)
}
