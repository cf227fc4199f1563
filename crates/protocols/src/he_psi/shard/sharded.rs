//! Building and updating a sharded database (`manifest.rs`), as stages
//! a single process runs in turn ([`build_sharded`], [`update_sharded`])
//! or a distributed engine runs on many machines (psikit's Ray pipeline):
//!
//! 1. [`oprf_stage::create_key`]: a fresh OPRF key in the router's
//!    directory ([`router_key`]);
//! 2. [`ShardOprf::evaluate`]: the key on a batch of rows, which come out
//!    as one [`OutputBatch`] per shard (OPRF outputs and labels: nothing
//!    secret, so they may cross machines; an engine spools them to files
//!    with [`oprf_stage::Spool`]);
//! 3. [`plan`]: parameters for the whole database (chosen from the rows
//!    and the longest label the OPRF stage counted, so the input is read
//!    once) and the manifest to be filled;
//! 4. [`build_shard`]: one shard's database from its batches, saved in its
//!    own directory without the key;
//! 5. [`finish`]: the manifest with every shard's bundle counts, written
//!    last, since routers watch it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use psikit_io::{KeySpec, ReadStats};
use psikit_primitives::oprf::{Output, ServerKey};
use serde::{Deserialize, Serialize};

use crate::common::oprf_stage::{self, OutputBatch};
use crate::common::{advance, check_cancelled, same_key_format, state_dir, Progress};
use crate::error::Error;
use crate::he_psi::common::hex::hex;
use crate::he_psi::facade::setup::{
    check_changes, check_label_flags, choose_params, label_room, read_additions, read_labeled,
    read_removals, BuildOptions,
};
use crate::he_psi::params::PsiParams;
use crate::he_psi::select::{Selection, SelectionInput};
use crate::he_psi::server::sender_db::UpdateStats;
use crate::he_psi::server::shard_info::{check_shard_count, ShardInfo};
use crate::he_psi::server::state::{database_id, HeState, KEY_FILE};
use crate::he_psi::shard::manifest::{shard_of, Manifest};

/// The router's directory inside a sharded database's directory.
pub const ROUTER_DIR: &str = "router";

/// Shard `index`'s directory inside a sharded database's directory.
pub fn shard_dir(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("shard-{index}"))
}

/// The OPRF key's file in a router's directory (stage 1 makes it with
/// [`oprf_stage::create_key`]).
pub fn router_key(router_dir: &Path) -> PathBuf {
    router_dir.join(KEY_FILE)
}

/// Whether `dir` holds a database built by [`build_sharded`] (then
/// [`update_sharded`] updates it, not `facade::update`).
pub fn is_sharded(dir: &Path) -> bool {
    Manifest::path(&dir.join(ROUTER_DIR)).exists()
}

/// Stage 2: the router's key, loaded once, evaluating batches of rows.
pub struct ShardOprf {
    key: ServerKey,
    shards: u32,
}

impl ShardOprf {
    /// The key in `router_dir`, sorting rows into `shards` shards.
    pub fn open(router_dir: &Path, shards: u32) -> Result<Self, Error> {
        check_shard_count(shards)?;
        let key = oprf_stage::load_key(&router_key(router_dir))?;
        Ok(Self { key, shards })
    }

    /// The key in `router_dir`, checked against the database `manifest`
    /// describes (for an update).
    pub fn for_manifest(router_dir: &Path, manifest: &Manifest) -> Result<Self, Error> {
        let oprf = Self::open(router_dir, manifest.shards())?;
        let params = PsiParams::from_apsi_json(&manifest.params)?;
        if hex(&database_id(&oprf.key, &params, manifest.max_label_bytes)) != manifest.db_id {
            return Err(Error::StateFile(format!(
                "{}: this key is not the one the shards were built with",
                router_dir.display()
            )));
        }
        Ok(oprf)
    }

    /// The OPRF outputs of `rows` (key, label) sorted into one batch per
    /// shard; `progress` hears the rows done.
    pub fn evaluate(
        &self,
        rows: &[(&[u8], &[u8])],
        progress: &dyn Progress,
    ) -> Result<Vec<OutputBatch>, Error> {
        let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| *k).collect();
        let outputs =
            oprf_stage::evaluate(&self.key, &keys, &mut |done| advance(progress, done as u64))?;
        let mut batches: Vec<OutputBatch> =
            (0..self.shards).map(|_| OutputBatch::default()).collect();
        for (output, (_, label)) in outputs.iter().zip(rows) {
            batches[shard_of(output, self.shards) as usize].push(*output, label);
        }
        Ok(batches)
    }
}

/// The label room of a database whose longest label has `longest` bytes
/// (counted by the OPRF stage): as `options` ask, else the longest.
pub fn planned_label_room(
    longest: usize,
    labeled: bool,
    options: &BuildOptions,
) -> Result<usize, Error> {
    match options.max_label_bytes {
        Some(_) if !labeled => Err(Error::Config(
            "a label room (max_label_bytes) needs label columns".into(),
        )),
        Some(max) if longest > max => Err(Error::Config(format!(
            "a label has {longest} bytes, but the database is to allow at most {max}"
        ))),
        Some(max) => Ok(max),
        None if labeled && longest == 0 => Err(Error::Config(
            "no labels to size the label room from; give max_label_bytes".into(),
        )),
        None => Ok(longest),
    }
}

/// How a database's keys are encoded and its label columns' names
/// (`psikit_io::KeySpec::key_format` and `label_names`).
pub type Schema = (String, Vec<String>);

/// Stage 3: the manifest of a database of `shards` shards with these
/// parameters under the key in `router_dir`, its bundle counts still
/// empty.
pub fn plan(
    router_dir: &Path,
    shards: u32,
    params: PsiParams,
    max_label_bytes: usize,
    schema: Schema,
) -> Result<Manifest, Error> {
    check_shard_count(shards)?;
    let key = oprf_stage::load_key(&router_key(router_dir))?;
    let db_id = database_id(&key, &params, max_label_bytes);
    let mut manifest = Manifest::new(db_id, &params, max_label_bytes, schema);
    manifest.bundle_counts = vec![Vec::new(); shards as usize];
    manifest.items = vec![0; shards as usize];
    Ok(manifest)
}

/// Stage 3 for a database of `rows` rows with labels of up to
/// `max_label_bytes`: [`plan`] with the parameters `options` give or
/// choose (the selection is returned to report it).
pub fn plan_database(
    router_dir: &Path,
    shards: u32,
    rows: usize,
    max_label_bytes: usize,
    schema: Schema,
    options: &BuildOptions,
    progress: &dyn Progress,
) -> Result<(Manifest, Option<(SelectionInput, Selection)>), Error> {
    let (params, selection) = choose_params(options, rows, max_label_bytes, shards, progress)?;
    let manifest = plan(router_dir, shards, params, max_label_bytes, schema)?;
    Ok((manifest, selection))
}

/// What [`build_shard`] made: the manifest's entries for the shard.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BuiltShard {
    pub bundle_counts: Vec<u32>,
    pub items: u64,
    pub stats: UpdateStats,
}

impl BuiltShard {
    fn of(shard: &HeState, stats: UpdateStats) -> Self {
        let counts = shard.db().bundle_counts();
        Self {
            bundle_counts: counts.iter().map(|&c| c as u32).collect(),
            items: shard.db().len() as u64,
            stats,
        }
    }

    /// The counts as JSON, as a shard's task hands them to [`finish`].
    pub fn to_json(&self) -> String {
        // Serializing plain numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Self, Error> {
        serde_json::from_str(text)
            .map_err(|e| Error::Config(format!("a built shard's counts: {e}")))
    }
}

/// Stage 3: shard `index`'s database from its batches (from every OPRF
/// worker), saved in `dir` (created; without the key).
pub fn build_shard(
    plan: &Manifest,
    index: u32,
    batches: &[OutputBatch],
    dir: &Path,
) -> Result<BuiltShard, Error> {
    let params = PsiParams::from_apsi_json(&plan.params)?;
    let info = ShardInfo::new(plan.db_id()?, index, plan.shards(), plan.epoch);
    let mut shard = HeState::create_shard(params, plan.max_label_bytes, info)?;
    shard.set_schema(plan.key_format.clone(), plan.label_columns.clone())?;
    // One insertion of every batch: each insertion rebuilds the
    // polynomials of the bins it touches, so batch by batch would rebuild
    // every bin once per batch.
    let outputs: Vec<Output> = batches
        .iter()
        .flat_map(|b| b.outputs.iter().copied())
        .collect();
    let labels: Vec<&[u8]> = batches
        .iter()
        .flat_map(|b| b.labels.iter().map(Vec::as_slice))
        .collect();
    let stats = shard.insert_evaluated(&outputs, &labels)?;
    shard.save(dir)?;
    Ok(BuiltShard::of(&shard, stats))
}

/// Stage 4: records every shard's counts (in shard order) in the manifest
/// and writes it to `router_dir`.
pub fn finish(
    router_dir: &Path,
    mut plan: Manifest,
    built: &[BuiltShard],
) -> Result<Manifest, Error> {
    if built.len() != plan.shards() as usize {
        return Err(Error::Config(format!(
            "{} shards built for a plan of {}",
            built.len(),
            plan.shards()
        )));
    }
    plan.bundle_counts = built.iter().map(|b| b.bundle_counts.clone()).collect();
    plan.items = built.iter().map(|b| b.items).collect();
    plan.save(router_dir)?;
    Ok(plan)
}

/// What [`build_sharded`] made.
pub struct ShardedBuildReport {
    pub manifest: Manifest,
    pub read: ReadStats,
    /// Rows whose key came again (the last one's label kept).
    pub duplicates: usize,
    pub selection: Option<(SelectionInput, Selection)>,
    /// Time to evaluate the OPRF and fill every shard's bin bundles.
    pub build_time: Duration,
}

/// Builds a database split into `shards` shards (a power of two) from the
/// CSV file `csv`, as `facade::build` would build it whole (the same
/// parameters: chosen for every row, since a query goes to every shard),
/// into `dir`: the router's key and manifest in `dir/router`, shard `i` in
/// `dir/shard-i`. The stages run in this process, one shard at a time.
pub fn build_sharded(
    csv: &Path,
    spec: &KeySpec,
    dir: &Path,
    shards: u32,
    options: BuildOptions,
    progress: &dyn Progress,
) -> Result<ShardedBuildReport, Error> {
    check_shard_count(shards)?;
    let _lock = state_dir::lock(dir)?;
    let fresh = state_dir::is_empty(dir)?;
    if !fresh && !options.force {
        return Err(Error::Config(format!(
            "{} is not empty: give a new directory for the shards (or --force to replace it)",
            dir.display()
        )));
    }
    let (items, read) = read_labeled(csv, spec, progress)?;
    let max_label = label_room(csv, spec, &options, &items)?;
    let (params, selection) = choose_params(&options, items.len(), max_label, shards, progress)?;
    // The last point to stop at: from here the directory is rewritten.
    check_cancelled(progress)?;
    if !fresh {
        state_dir::clear(dir)?;
    }
    let t = Instant::now();
    let router_dir = dir.join(ROUTER_DIR);
    oprf_stage::create_key(&router_key(&router_dir))?;
    progress.stage("OPRF", Some(items.len() as u64));
    let rows: Vec<(&[u8], &[u8])> = items.iter().map(|i| (&i.key[..], &i.label[..])).collect();
    let batches = ShardOprf::open(&router_dir, shards)?.evaluate(&rows, progress)?;
    let schema = (spec.key_format(), spec.label_names());
    let plan = plan(&router_dir, shards, params, max_label, schema)?;
    let mut built = Vec::with_capacity(batches.len());
    for (index, batch) in (0..shards).zip(&batches) {
        progress.stage(&format!("shard {index} of {shards}"), None);
        let shard = build_shard(
            &plan,
            index,
            std::slice::from_ref(batch),
            &shard_dir(dir, index),
        )?;
        built.push(shard);
    }
    let duplicates = built.iter().map(|b| b.stats.duplicates).sum();
    Ok(ShardedBuildReport {
        manifest: finish(&router_dir, plan, &built)?,
        read,
        duplicates,
        selection,
        build_time: t.elapsed(),
    })
}

/// An update's stage per shard: shard `index` of the database `manifest`
/// describes (in `dir`) loses the rows of `gone` and gains (or relabels)
/// those of `new` (its batches from every OPRF worker), and is saved at
/// the manifest's next epoch. Its server keeps answering the old epoch
/// from memory until the router asks for the new one.
pub fn update_shard(
    manifest: &Manifest,
    index: u32,
    gone: &[&OutputBatch],
    new: &[&OutputBatch],
    dir: &Path,
) -> Result<BuiltShard, Error> {
    let mut shard = HeState::load(dir, false)?;
    match shard.shard() {
        Some(info) if info.index == index && info.db_id == manifest.db_id => {}
        _ => {
            return Err(Error::StateFile(format!(
                "{}: not shard {index} of the database the manifest describes",
                dir.display()
            )))
        }
    }
    let gone: Vec<Output> = gone
        .iter()
        .flat_map(|b| b.outputs.iter().copied())
        .collect();
    let mut stats = shard.remove_evaluated(&gone)?;
    let outputs: Vec<Output> = new.iter().flat_map(|b| b.outputs.iter().copied()).collect();
    let labels: Vec<&[u8]> = (new.iter())
        .flat_map(|b| b.labels.iter().map(Vec::as_slice))
        .collect();
    stats += shard.insert_evaluated(&outputs, &labels)?;
    shard.set_shard_epoch(manifest.epoch + 1)?;
    shard.save(dir)?;
    Ok(BuiltShard::of(&shard, stats))
}

/// An update's last stage: the manifest at the next epoch with every
/// shard's new counts (in shard order), written to `router_dir`, which
/// makes routers switch to it.
pub fn finish_update(
    router_dir: &Path,
    mut manifest: Manifest,
    built: &[BuiltShard],
) -> Result<Manifest, Error> {
    manifest.epoch += 1;
    finish(router_dir, manifest, built)
}

/// What [`update_sharded`] did.
pub struct ShardedUpdateReport {
    /// The new manifest (its epoch is one more than before).
    pub manifest: Manifest,
    /// Summed over the shards.
    pub stats: UpdateStats,
    pub time: Duration,
}

/// Updates a sharded database built by [`build_sharded`] in `dir`: the
/// rows of `remove` and `add` go through the router's OPRF, each to the
/// shard it belongs to. Every shard is saved at the next epoch (its server
/// keeps answering the old epoch from memory), and only then the manifest,
/// which makes routers switch: no query ever mixes shards of two epochs.
/// Rerun it if it stopped part-way.
pub fn update_sharded(
    dir: &Path,
    spec: &KeySpec,
    add: Option<&Path>,
    remove: Option<&Path>,
    progress: &dyn Progress,
) -> Result<ShardedUpdateReport, Error> {
    check_changes(add, remove)?;
    let _lock = state_dir::lock(dir)?;
    let t = Instant::now();
    let router_dir = dir.join(ROUTER_DIR);
    let manifest = Manifest::load(&router_dir)?;
    same_key_format(&manifest.key_format, &spec.key_format(), "this update")?;
    check_label_flags(
        manifest.max_label_bytes,
        &manifest.label_columns,
        spec,
        add.is_some(),
    )?;
    let removed = match remove {
        Some(path) => read_removals(path, spec, progress)?,
        None => Vec::new(),
    };
    let added = match add {
        Some(path) => read_additions(path, spec, manifest.max_label_bytes, progress)?.0,
        None => Vec::new(),
    };
    let oprf = ShardOprf::for_manifest(&router_dir, &manifest)?;
    progress.stage("OPRF", Some((removed.len() + added.len()) as u64));
    let gone: Vec<(&[u8], &[u8])> = removed.iter().map(|i| (&i.key[..], &[][..])).collect();
    let gone = oprf.evaluate(&gone, progress)?;
    let new: Vec<(&[u8], &[u8])> = added.iter().map(|i| (&i.key[..], &i.label[..])).collect();
    let new = oprf.evaluate(&new, progress)?;
    let shards = manifest.shards();
    // The last point to stop at: a stop between shards would leave them at
    // two epochs on disk.
    check_cancelled(progress)?;
    let mut built = Vec::with_capacity(shards as usize);
    for index in 0..shards {
        progress.stage(&format!("shard {index} of {shards}"), None);
        let (gone, new) = (&gone[index as usize], &new[index as usize]);
        let shard = update_shard(&manifest, index, &[gone], &[new], &shard_dir(dir, index))?;
        built.push(shard);
    }
    let stats = built.iter().fold(UpdateStats::default(), |mut sum, b| {
        sum += b.stats;
        sum
    });
    let manifest = finish_update(&router_dir, manifest, &built)?;
    Ok(ShardedUpdateReport {
        manifest,
        stats,
        time: t.elapsed(),
    })
}
