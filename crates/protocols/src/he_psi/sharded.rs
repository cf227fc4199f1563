//! Building and updating a sharded database ([`super::shard`]), as stages
//! a single process runs in turn ([`build_sharded`], [`update_sharded`])
//! or a distributed engine runs on many machines (psikit's Ray pipeline):
//!
//! 1. [`plan`]: parameters for the whole database, a fresh OPRF key in the
//!    router's directory, and the manifest to be filled;
//! 2. [`ShardOprf::evaluate`]: the router's key on a batch of rows, which
//!    come out as one [`ShardBatch`] per shard (OPRF outputs and labels:
//!    nothing secret, so they may cross machines);
//! 3. [`build_shard`]: one shard's database from its batches, saved in its
//!    own directory without the key;
//! 4. [`finish`]: the manifest with every shard's bundle counts, written
//!    last, since routers watch it.

use std::path::Path;
use std::time::{Duration, Instant};

use psikit_io::{KeySpec, ReadStats};
use psikit_primitives::oprf::{Output, OUTPUT_LEN};
use psikit_transport::{Reader, Writer};
use serde::{Deserialize, Serialize};

use super::facade::{
    check_changes, check_label_flags, choose_params, label_room, read_additions, read_labeled,
    read_removals, BuildOptions,
};
use super::params::PsiParams;
use super::select::{Selection, SelectionInput};
use super::sender_db::UpdateStats;
use super::shard::{check_shard_count, shard_of, Manifest, ShardInfo};
use super::state::HeState;
use crate::common::{advance, check_cancelled, same_key_format, state_dir};
use crate::{Error, Progress};

/// The router's directory inside a sharded database's directory.
pub const ROUTER_DIR: &str = "router";

/// Shard `index`'s directory inside a sharded database's directory.
pub fn shard_dir(dir: &Path, index: u32) -> std::path::PathBuf {
    dir.join(format!("shard-{index}"))
}

/// Whether `dir` holds a database built by [`build_sharded`] (then
/// [`update_sharded`] updates it, not `facade::update`).
pub fn is_sharded(dir: &Path) -> bool {
    Manifest::path(&dir.join(ROUTER_DIR)).exists()
}

/// Stage 1: makes the router's OPRF key in `router_dir` (which must hold
/// none) and returns the manifest of a database of `shards` shards with
/// these parameters, its bundle counts still empty.
pub fn plan(
    router_dir: &Path,
    shards: u32,
    params: PsiParams,
    max_label_bytes: usize,
    key_format: String,
) -> Result<Manifest, Error> {
    check_shard_count(shards)?;
    let router = HeState::create(params.clone(), max_label_bytes, false)?;
    router.save_key(router_dir)?;
    let mut manifest = Manifest::new(router.db_id(), &params, max_label_bytes, key_format);
    manifest.bundle_counts = vec![Vec::new(); shards as usize];
    manifest.items = vec![0; shards as usize];
    Ok(manifest)
}

/// Stage 1 for a database of `rows` rows with labels of up to
/// `max_label_bytes`: [`plan`] with the parameters `options` give or
/// choose (the selection is returned to report it).
pub fn plan_database(
    router_dir: &Path,
    shards: u32,
    rows: usize,
    max_label_bytes: usize,
    key_format: String,
    options: &BuildOptions,
    progress: &dyn Progress,
) -> Result<(Manifest, Option<(SelectionInput, Selection)>), Error> {
    let (params, selection) = choose_params(options, rows, max_label_bytes, shards, progress)?;
    let manifest = plan(router_dir, shards, params, max_label_bytes, key_format)?;
    Ok((manifest, selection))
}

/// Stage 2: the router's key, loaded once, evaluating batches of rows.
pub struct ShardOprf {
    router: HeState,
    shards: u32,
    max_label_bytes: usize,
}

impl ShardOprf {
    /// The key in `router_dir`, for the database `plan` describes.
    pub fn open(router_dir: &Path, plan: &Manifest) -> Result<Self, Error> {
        let params = PsiParams::from_apsi_json(&plan.params)?;
        let router = HeState::load_router(router_dir, params, plan.max_label_bytes)?;
        if super::facade::hex(&router.db_id()) != plan.db_id {
            return Err(Error::StateFile(format!(
                "{}: this key is not the one the plan was made with",
                router_dir.display()
            )));
        }
        Ok(Self {
            router,
            shards: plan.shards(),
            max_label_bytes: plan.max_label_bytes,
        })
    }

    /// The OPRF outputs of `rows` (key, label) sorted into one batch per
    /// shard; `progress` hears the rows done.
    pub fn evaluate(
        &self,
        rows: &[(&[u8], &[u8])],
        progress: &dyn Progress,
    ) -> Result<Vec<ShardBatch>, Error> {
        if let Some((_, label)) = rows.iter().find(|(_, l)| l.len() > self.max_label_bytes) {
            return Err(Error::Config(format!(
                "a label has {} bytes, but the database allows at most {}",
                label.len(),
                self.max_label_bytes
            )));
        }
        let keys = rows.iter().map(|(k, _)| *k);
        let outputs = self
            .router
            .evaluate(keys, &mut |done| advance(progress, done as u64))?;
        let mut batches: Vec<ShardBatch> =
            (0..self.shards).map(|_| ShardBatch::default()).collect();
        for (output, (_, label)) in outputs.iter().zip(rows) {
            let batch = &mut batches[shard_of(output, self.shards) as usize];
            batch.outputs.push(*output);
            batch.labels.push(label.to_vec());
        }
        Ok(batches)
    }
}

/// Rows bound for one shard: OPRF outputs and their labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardBatch {
    pub outputs: Vec<Output>,
    pub labels: Vec<Vec<u8>>,
}

const BATCH_MAGIC: &[u8; 8] = b"PSIKSHB1";

impl ShardBatch {
    /// `PSIKSHB1`, the row count (u32), then per row the output and the
    /// label (u32 length and bytes).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(12 + self.outputs.len() * (OUTPUT_LEN + 8));
        w.bytes(BATCH_MAGIC).count(self.outputs.len());
        for (output, label) in self.outputs.iter().zip(&self.labels) {
            w.bytes(output).var_bytes(label);
        }
        w.into_bytes()
    }

    /// Reads [`ShardBatch::to_bytes`]'s format, refusing labels longer than
    /// `max_label_bytes` and anything malformed.
    pub fn from_bytes(bytes: &[u8], max_label_bytes: usize) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        if &r.array::<8>("batch magic")? != BATCH_MAGIC {
            return Err(Error::StateFile("not a shard batch (bad magic)".into()));
        }
        let rows = r.count(u64::from(u32::MAX), OUTPUT_LEN + 4, "batch rows")?;
        let mut batch = Self {
            outputs: Vec::with_capacity(rows),
            labels: Vec::with_capacity(rows),
        };
        for _ in 0..rows {
            batch.outputs.push(r.array("OPRF output")?);
            batch
                .labels
                .push(r.var_bytes(max_label_bytes as u64, "label")?.to_vec());
        }
        r.finish()?;
        Ok(batch)
    }
}

/// What [`build_shard`] made: the manifest's entries for the shard.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BuiltShard {
    pub bundle_counts: Vec<u32>,
    pub items: u64,
    pub stats: UpdateStats,
}

impl BuiltShard {
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
    batches: &[ShardBatch],
    dir: &Path,
) -> Result<BuiltShard, Error> {
    let params = PsiParams::from_apsi_json(&plan.params)?;
    let info = ShardInfo::new(plan.db_id()?, index, plan.shards(), plan.epoch);
    let mut shard = HeState::create_shard(params, plan.max_label_bytes, info)?;
    shard.set_key_format(plan.key_format.clone())?;
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
    Ok(BuiltShard {
        bundle_counts: shard
            .db()
            .bundle_counts()
            .iter()
            .map(|&c| c as u32)
            .collect(),
        items: shard.db().len() as u64,
        stats,
    })
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
/// `dir/shard-i`. The four stages run in this process, one shard at a
/// time.
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
    let plan = plan(&router_dir, shards, params, max_label, spec.key_format())?;
    progress.stage("OPRF", Some(items.len() as u64));
    let rows: Vec<(&[u8], &[u8])> = items.iter().map(|i| (&i.key[..], &i.label[..])).collect();
    let batches = ShardOprf::open(&router_dir, &plan)?.evaluate(&rows, progress)?;
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
    let mut manifest = Manifest::load(&router_dir)?;
    same_key_format(&manifest.key_format, &spec.key_format(), "this update")?;
    check_label_flags(
        manifest.max_label_bytes,
        !spec.label_columns.is_empty(),
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
    let oprf = ShardOprf::open(&router_dir, &manifest)?;
    progress.stage("OPRF", Some((removed.len() + added.len()) as u64));
    let gone: Vec<(&[u8], &[u8])> = removed.iter().map(|i| (&i.key[..], &[][..])).collect();
    let gone = oprf.evaluate(&gone, progress)?;
    let new: Vec<(&[u8], &[u8])> = added.iter().map(|i| (&i.key[..], &i.label[..])).collect();
    let new = oprf.evaluate(&new, progress)?;
    let shards = manifest.shards();
    let epoch = manifest.epoch + 1;
    let mut stats = UpdateStats::default();
    // The last point to stop at: a stop between shards would leave them at
    // two epochs on disk.
    check_cancelled(progress)?;
    for index in 0..shards {
        progress.stage(&format!("shard {index} of {shards}"), None);
        let dir = shard_dir(dir, index);
        let mut shard = HeState::load(&dir, false)?;
        let (gone, new) = (&gone[index as usize], &new[index as usize]);
        stats += shard.remove_evaluated(&gone.outputs)?;
        let labels: Vec<&[u8]> = new.labels.iter().map(Vec::as_slice).collect();
        stats += shard.insert_evaluated(&new.outputs, &labels)?;
        shard.set_shard_epoch(epoch)?;
        shard.save(&dir)?;
        let counts = shard
            .db()
            .bundle_counts()
            .iter()
            .map(|&c| c as u32)
            .collect();
        manifest.bundle_counts[index as usize] = counts;
        manifest.items[index as usize] = shard.db().len() as u64;
    }
    manifest.epoch = epoch;
    manifest.save(&router_dir)?;
    Ok(ShardedUpdateReport {
        manifest,
        stats,
        time: t.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_batches_round_trip_and_damaged_ones_are_refused() {
        let batch = ShardBatch {
            outputs: vec![[1; 64], [2; 64]],
            labels: vec![b"gold".to_vec(), Vec::new()],
        };
        let bytes = batch.to_bytes();
        assert_eq!(ShardBatch::from_bytes(&bytes, 4).unwrap(), batch);
        assert!(
            ShardBatch::from_bytes(&bytes, 3).is_err(),
            "a label over the room"
        );
        assert!(
            ShardBatch::from_bytes(&bytes[..bytes.len() - 1], 4).is_err(),
            "cut short"
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            ShardBatch::from_bytes(&longer, 4).is_err(),
            "trailing bytes"
        );
        let mut bad = bytes;
        bad[0] ^= 1;
        assert!(ShardBatch::from_bytes(&bad, 4).is_err(), "bad magic");
        // A count far beyond the bytes present allocates nothing.
        let mut huge = BATCH_MAGIC.to_vec();
        huge.extend(u32::MAX.to_be_bytes());
        assert!(ShardBatch::from_bytes(&huge, 4).is_err());
    }
}
