//! Set-up and updates of an HE server's database from CSV files, with the
//! policy every front end shares: a database is built under a fresh OPRF
//! key in a directory that holds nothing else (or is replaced whole when
//! forced), with automatic parameters when none are given, and label room
//! fixed at build; labels longer than the room are refused with the file
//! and row. The sharded build and update (`shard::sharded`) reuse the
//! reading and checking steps here, so both refuse the same inputs.

use std::path::Path;
use std::time::{Duration, Instant};

use psikit_io::{KeyReader, KeySpec, LabeledItem, ReadStats};

use crate::common::{advance, check_cancelled, same_key_format, state_dir, Progress};
use crate::error::Error;
use crate::he_psi::params::PsiParams;
use crate::he_psi::select::{self, Selection, SelectionInput};
use crate::he_psi::server::sender_db::UpdateStats;
use crate::he_psi::server::state::{HeState, Row, LAYOUT};

/// Rows per batch while reading a CSV file.
const READ_BATCH: usize = 1 << 16;

/// Reads an APSI-format parameter file; the error names the file.
pub fn load_params(path: &Path) -> Result<PsiParams, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    PsiParams::from_apsi_json(&text).map_err(|e| match e {
        Error::Params(why) => Error::Params(format!("{}: {why}", path.display())),
        other => other,
    })
}

/// Every labeled item of a CSV file, with the reader's counters; stops
/// when `progress` asks it to (see [`build`]).
pub fn read_labeled(
    path: &Path,
    spec: &KeySpec,
    progress: &dyn Progress,
) -> Result<(Vec<LabeledItem>, ReadStats), Error> {
    progress.stage("reading", None);
    check_cancelled(progress)?;
    collect_labeled(KeyReader::open(path, spec)?, progress)
}

/// Every labeled item `reader` gives (see [`read_labeled`]).
pub fn collect_labeled<R: std::io::Read>(
    mut reader: KeyReader<R>,
    progress: &dyn Progress,
) -> Result<(Vec<LabeledItem>, ReadStats), Error> {
    let (mut all, mut batch) = (Vec::new(), Vec::new());
    while reader.next_labeled_batch(READ_BATCH, &mut batch)? > 0 {
        all.append(&mut batch);
        advance(progress, all.len() as u64)?;
    }
    Ok((all, reader.stats()))
}

/// Refuses a label longer than the database allows, naming the row.
fn check_labels(items: &[LabeledItem], path: &Path, max: usize) -> Result<(), Error> {
    match items.iter().find(|i| i.label.len() > max) {
        Some(item) => Err(Error::Config(format!(
            "{} row {}: the label has {} bytes, but the database allows at most {max} \
             (fixed when it was built; see --max-label-bytes)",
            path.display(),
            item.row,
            item.label.len()
        ))),
        None => Ok(()),
    }
}

/// Inserts rows (the OPRF is the long part), reporting progress; stops
/// after any OPRF batch when `progress` asks it to, leaving `state` as it
/// was (the rows go in only once every output is computed).
pub fn insert_rows(
    state: &mut HeState,
    items: Vec<LabeledItem>,
    progress: &dyn Progress,
) -> Result<UpdateStats, Error> {
    let rows: Vec<Row> = items
        .into_iter()
        .map(|i| Row {
            key: i.key,
            label: i.label,
        })
        .collect();
    let total = rows.len();
    progress.stage("OPRF", Some(total as u64));
    check_cancelled(progress)?;
    state.insert(&rows, &mut |done| {
        advance(progress, done as u64)?;
        if done == total {
            progress.stage("filling bin bundles", None);
        }
        Ok(())
    })
}

/// How to build a database.
pub struct BuildOptions {
    /// Parameters; `None` selects them for the workload.
    pub params: Option<PsiParams>,
    /// Longest label the database accepts, now and in later updates
    /// (`None`: the longest label read).
    pub max_label_bytes: Option<usize>,
    /// Items the database should hold after growth, for automatic
    /// parameters (`None`: the rows read).
    pub capacity: Option<u64>,
    /// The workload automatic parameters are chosen for; its
    /// `server_items` and `label_bytes` are filled in from the data.
    pub workload: SelectionInput,
    /// Replace whatever the directory holds.
    pub force: bool,
}

/// What [`build`] made.
pub struct BuildReport {
    pub state: HeState,
    pub read: ReadStats,
    pub stats: UpdateStats,
    /// The automatic selection and what it was made for, when parameters
    /// were not given.
    pub selection: Option<(SelectionInput, Selection)>,
    /// Time to insert the rows (OPRF and bin bundles).
    pub build_time: Duration,
}

/// Builds a database (and its OPRF key) from the CSV file `csv` read with
/// `spec` (whose label columns give the labels) and saves it in `dir`. The
/// directory is cleared only once the new database is built, so a failed
/// or cancelled build leaves the old state alone: `progress` is asked
/// whether to stop at every report of the reading and the OPRF, and once
/// more before the directory is touched.
pub fn build(
    csv: &Path,
    spec: &KeySpec,
    dir: &Path,
    options: BuildOptions,
    progress: &dyn Progress,
) -> Result<BuildReport, Error> {
    let _lock = state_dir::lock(dir)?;
    let clear = state_dir::check_fresh(dir, options.force, "psikit he db update", &LAYOUT)?;
    let (items, read) = read_labeled(csv, spec, progress)?;
    let max_label = label_room(csv, spec, &options, &items)?;
    let (params, selection) = choose_params(&options, items.len(), max_label, 1, progress)?;
    let t = Instant::now();
    let mut state = HeState::create(params, max_label, false)?;
    state.set_schema(spec.key_format(), spec.label_names())?;
    let stats = insert_rows(&mut state, items, progress)?;
    let build_time = t.elapsed();
    check_cancelled(progress)?;
    // The old key must go too, since saving keeps a key already there.
    if clear {
        state_dir::clear(dir)?;
    }
    state.save(dir)?;
    Ok(BuildReport {
        state,
        read,
        stats,
        selection,
        build_time,
    })
}

/// The parameters of a new database of `items` rows (or
/// `options.capacity`) in all, split into `shards` shards (1: unsharded),
/// with labels of up to `max_label` bytes: as given, or chosen for the
/// workload (with the selection, to report it). The shard count matters:
/// each shard fills its own bin bundles, so a query meets at least one
/// bundle per shard and bundle index.
pub(crate) fn choose_params(
    options: &BuildOptions,
    items: usize,
    max_label: usize,
    shards: u32,
    progress: &dyn Progress,
) -> Result<(PsiParams, Option<(SelectionInput, Selection)>), Error> {
    if let Some(params) = &options.params {
        return Ok((params.clone(), None));
    }
    progress.stage("choosing parameters", None);
    let mut input = options.workload.clone();
    input.server_items = options.capacity.unwrap_or(items as u64).max(1);
    input.label_bytes = max_label;
    input.shards = shards;
    let selection = select::select(&input)?;
    Ok((selection.params.clone(), Some((input, selection))))
}

/// The label room of a new database: as asked, else the longest label.
pub(crate) fn label_room(
    csv: &Path,
    spec: &KeySpec,
    options: &BuildOptions,
    items: &[LabeledItem],
) -> Result<usize, Error> {
    let labeled = !spec.label_columns.is_empty();
    let longest = items.iter().map(|i| i.label.len()).max().unwrap_or(0);
    match options.max_label_bytes {
        Some(_) if !labeled => Err(Error::Config(
            "--max-label-bytes needs label columns (--label COLS)".into(),
        )),
        Some(max) => {
            check_labels(items, csv, max)?;
            Ok(max)
        }
        None if labeled && longest == 0 => Err(Error::Config(format!(
            "{}: no rows to size the labels from; give --max-label-bytes N",
            csv.display()
        ))),
        None => Ok(longest),
    }
}

/// What [`update`] did.
pub struct UpdateReport {
    pub state: HeState,
    /// Removal counts, when a removal file was given.
    pub removed: Option<UpdateStats>,
    /// Additions and new labels, when an addition file was given.
    pub added: Option<(UpdateStats, ReadStats)>,
    pub time: Duration,
}

/// Removes the keys of `remove`, then adds (or relabels) the rows of
/// `add`, and saves the database in `dir`; running servers reload it.
/// `spec`'s label columns must be given exactly when the database is
/// labeled and rows are added. Updates of one directory never interleave:
/// a second one is refused while the first runs. A cancelled update (see
/// [`build`]) leaves the saved database as it was.
pub fn update(
    dir: &Path,
    spec: &KeySpec,
    add: Option<&Path>,
    remove: Option<&Path>,
    progress: &dyn Progress,
) -> Result<UpdateReport, Error> {
    check_changes(add, remove)?;
    let _lock = state_dir::lock(dir)?;
    let mut state = HeState::load(dir, false)?;
    same_key_format(state.db().key_format(), &spec.key_format(), "this update")?;
    let max_label = state.db().shape().max_label_bytes;
    let names = state.db().label_columns().to_vec();
    check_label_flags(max_label, &names, spec, add.is_some())?;
    let t = Instant::now();
    let mut removed = None;
    if let Some(path) = remove {
        let keys: Vec<Vec<u8>> = (read_removals(path, spec, progress)?.into_iter())
            .map(|i| i.key)
            .collect();
        progress.stage("removing", None);
        removed = Some(state.remove(&keys)?);
    }
    let mut added = None;
    if let Some(path) = add {
        let (items, read) = read_additions(path, spec, max_label, progress)?;
        added = Some((insert_rows(&mut state, items, progress)?, read));
    }
    check_cancelled(progress)?;
    state.save(dir)?;
    Ok(UpdateReport {
        state,
        removed,
        added,
        time: t.elapsed(),
    })
}

/// Refuses an update with nothing to do.
pub(crate) fn check_changes(add: Option<&Path>, remove: Option<&Path>) -> Result<(), Error> {
    match add.is_none() && remove.is_none() {
        true => Err(Error::Config(
            "nothing to do: give --add FILE and/or --remove FILE".into(),
        )),
        false => Ok(()),
    }
}

/// The keys of an update's removal file (its label columns ignored).
pub(crate) fn read_removals(
    path: &Path,
    spec: &KeySpec,
    progress: &dyn Progress,
) -> Result<Vec<LabeledItem>, Error> {
    let mut key_spec = spec.clone();
    key_spec.label_columns.clear();
    Ok(read_labeled(path, &key_spec, progress)?.0)
}

/// The rows of an update's addition file, their labels checked against
/// the database's room.
pub(crate) fn read_additions(
    path: &Path,
    spec: &KeySpec,
    max_label: usize,
    progress: &dyn Progress,
) -> Result<(Vec<LabeledItem>, ReadStats), Error> {
    let (items, read) = read_labeled(path, spec, progress)?;
    check_labels(&items, path, max_label)?;
    Ok((items, read))
}

/// A labeled database takes labels with every addition, in the columns it
/// was built with (`names`, where recorded, compared when the update names
/// its columns rather than giving them by position); an unlabeled one
/// takes none.
pub(crate) fn check_label_flags(
    max_label: usize,
    names: &[String],
    spec: &KeySpec,
    adding: bool,
) -> Result<(), Error> {
    let labels_given = !spec.label_columns.is_empty();
    let named = (spec.label_columns.iter()).all(|c| matches!(c, psikit_io::Column::Name(_)));
    let other = named && !names.is_empty() && spec.label_names() != names;
    match (max_label, labels_given) {
        (0, true) => Err(Error::Config(
            "the database is unlabeled: drop --label".into(),
        )),
        (_, false) if max_label > 0 && adding => Err(Error::Config(
            "the database is labeled: give --label COLS (the columns used at build) so added \
             items get their labels"
                .into(),
        )),
        (_, true) if adding && other => Err(Error::Config(format!(
            "the database's label columns are {} but this update's are {}: give --label \
                 with the build's columns, in its order",
            names.join(","),
            spec.label_names().join(",")
        ))),
        _ => Ok(()),
    }
}

/// Most bytes the query-ready plaintexts of `state` can take when served
/// with the cache: one NTT-form plaintext (`k` query-level moduli of `n`
/// 64-bit words) per coefficient of every polynomial of full degree `B`.
pub fn cache_bound(state: &HeState) -> usize {
    let db = state.db();
    let p = db.params();
    let shape = db.shape();
    let moduli = p.seal.coeff_modulus_bits.len().saturating_sub(1).max(1);
    let per_bundle = shape.polys() * (shape.max_items_per_bin + 1);
    db.memory().bundles * per_bundle * moduli * shape.slots * 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use psikit_io::Column;

    #[test]
    fn label_flags_must_fit_the_database() {
        let labels = |cols: &[&str]| KeySpec {
            label_columns: cols.iter().map(|c| Column::Name(c.to_string())).collect(),
            ..KeySpec::new(vec![Column::Name("email".into())])
        };
        let none: &[String] = &[];
        assert!(check_label_flags(0, none, &labels(&["tier"]), true).is_err());
        assert!(check_label_flags(16, none, &labels(&[]), true).is_err());
        assert!(
            check_label_flags(16, none, &labels(&[]), false).is_ok(),
            "removing needs no labels"
        );
        assert!(check_label_flags(0, none, &labels(&[]), true).is_ok());
        let built = ["name".to_string(), "tier".to_string()];
        assert!(check_label_flags(16, &built, &labels(&["name", "tier"]), true).is_ok());
        let swapped = check_label_flags(16, &built, &labels(&["tier", "name"]), true);
        assert!(swapped.is_err(), "the build's columns, in its order");
        assert!(check_label_flags(16, none, &labels(&["tier", "name"]), true).is_ok());
        let by_position = KeySpec {
            label_columns: vec![Column::Index(1), Column::Index(2)],
            ..labels(&[])
        };
        assert!(check_label_flags(16, &built, &by_position, true).is_ok());
    }
}
