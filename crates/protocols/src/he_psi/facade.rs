//! The HE protocol's facade: building and updating a server database from
//! CSV files, and client queries, with the policy every front end (CLI,
//! Python, benchmarks) shares:
//!
//! * a database is built under a fresh OPRF key in a directory that holds
//!   nothing else (or is replaced whole when forced), with automatic
//!   parameters when none are given, and label room fixed at build;
//! * labels longer than the room are refused with the file and row;
//! * a client may pad its query with random dummies so the server learns
//!   only the padded size; dummies never appear in the results;
//! * labels come back as the server's label columns (or one `hex:` column
//!   for labels that are not UTF-8 CSV records).

use std::path::Path;
use std::time::{Duration, Instant};

use psikit_io::{decode_label, KeyReader, KeySpec, LabeledItem, ReadStats};
use psikit_transport::Stepper;
use rand::RngCore;

use super::client::{HeClient, QueryOutcome};
use super::params::PsiParams;
use super::select::{self, Selection, SelectionInput};
use super::sender_db::UpdateStats;
use super::state::{HeState, Row};
use crate::common::connect::{block_on, BusyRetry, Channel, Limits, ServerAddr};
use crate::common::{advance, check_cancelled, same_key_format, state_dir};
use crate::{Error, Match, NoProgress, Progress};

/// Rows per batch while reading a CSV file.
const READ_BATCH: usize = 1 << 16;
/// Bytes of a padding dummy: no real key equals one except with negligible
/// probability.
const DUMMY_BYTES: usize = 32;

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
    let clear = state_dir::check_fresh(
        dir,
        options.force,
        "psikit he db update",
        &super::state::LAYOUT,
    )?;
    let (items, read) = read_labeled(csv, spec, progress)?;
    let max_label = label_room(csv, spec, &options, &items)?;
    let (params, selection) = choose_params(&options, items.len(), max_label, 1, progress)?;
    let t = Instant::now();
    let mut state = HeState::create(params, max_label, false)?;
    state.set_key_format(spec.key_format())?;
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
pub(super) fn choose_params(
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
pub(super) fn label_room(
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
    check_label_flags(max_label, !spec.label_columns.is_empty(), add.is_some())?;
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
pub(super) fn check_changes(add: Option<&Path>, remove: Option<&Path>) -> Result<(), Error> {
    match add.is_none() && remove.is_none() {
        true => Err(Error::Config(
            "nothing to do: give --add FILE and/or --remove FILE".into(),
        )),
        false => Ok(()),
    }
}

/// The keys of an update's removal file (its label columns ignored).
pub(super) fn read_removals(
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
pub(super) fn read_additions(
    path: &Path,
    spec: &KeySpec,
    max_label: usize,
    progress: &dyn Progress,
) -> Result<(Vec<LabeledItem>, ReadStats), Error> {
    let (items, read) = read_labeled(path, spec, progress)?;
    check_labels(&items, path, max_label)?;
    Ok((items, read))
}

/// A labeled database takes labels with every addition; an unlabeled one
/// takes none.
pub(super) fn check_label_flags(
    max_label: usize,
    labels_given: bool,
    adding: bool,
) -> Result<(), Error> {
    match (max_label, labels_given) {
        (0, true) => Err(Error::Config(
            "the database is unlabeled: drop --label".into(),
        )),
        (_, false) if max_label > 0 && adding => Err(Error::Config(
            "the database is labeled: give --label COLS (the columns used at build) so added \
             items get their labels"
                .into(),
        )),
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

/// One client session: parameters, keys, and a query, with its traffic.
pub struct Session {
    /// Matches by index into the caller's items (never a padding dummy).
    pub matches: Vec<Match>,
    pub outcome: QueryOutcome,
    /// Items sent, padding included.
    pub queried: usize,
    /// Time to fetch the parameters and make keys.
    pub setup: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// log2 of the probability that the query reported any false match.
    pub fpp_log2: f64,
    /// Longest label the database holds (0: unlabeled).
    pub max_label_bytes: usize,
}

/// How a client queries.
#[derive(Clone, Debug, Default)]
pub struct QueryOptions {
    /// Pad the query with random dummies to this many items, so the server
    /// learns the padded size instead of ours.
    pub pad_to: Option<usize>,
    /// How our keys are encoded (`psikit_io::KeySpec::key_format`): a
    /// database whose keys are encoded otherwise is refused before the
    /// query, since no key could match. Empty: no check.
    pub key_format: String,
}

/// Fetches the parameters, makes fresh keys and queries `keys` (see
/// [`QueryOptions`]); `progress` is told both as stages.
pub async fn query(
    ch: &mut Channel,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    let t = Instant::now();
    progress.stage("parameters and keys", None);
    let client = HeClient::connect(ch).await?;
    query_with(ch, &client, keys, options, t.elapsed(), progress).await
}

/// Queries `keys` with `client`'s parameters and keys (refusing a database
/// whose keys are encoded otherwise than ours); `setup` is the time it
/// took to make them.
async fn query_with(
    ch: &mut Channel,
    client: &HeClient,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    setup: Duration,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    same_key_format(client.key_format(), &options.key_format, "this client")?;
    let queried = padded(keys, options.pad_to)?;
    progress.stage("query", None);
    let mut outcome = client.query(ch, &queried).await?;
    // A dummy can only match by a false positive; it is no item of ours.
    outcome.matches.retain(|m| m.index < keys.len());
    Ok(Session {
        matches: std::mem::take(&mut outcome.matches),
        outcome,
        queried: queried.len(),
        setup,
        bytes_sent: ch.bytes_sent(),
        bytes_received: ch.bytes_received(),
        fpp_log2: client.fpp_log2(queried.len() as u64),
        max_label_bytes: client.max_label_bytes(),
    })
}

/// A client of one HE server that keeps the database's parameters and its
/// own keys across queries, so that each query after the first skips the
/// parameter round trip and key generation (and re-sends only its
/// queries). When the server's database changes parameters or key, the
/// server refuses the query as stale: the client fetches them again and
/// retries once. A busy server is retried with backoff ([`BusyRetry`]).
pub struct Client {
    server: ServerAddr,
    keys: Option<HeClient>,
}

impl Client {
    /// A client of `server`; nothing is fetched before the first query.
    pub fn new(server: ServerAddr) -> Self {
        Self { server, keys: None }
    }

    /// The server's address.
    pub fn server(&self) -> &ServerAddr {
        &self.server
    }

    /// Queries `keys` over a new connection (see [`query`]); `setup` in the
    /// session is zero when the kept parameters and keys were used.
    pub async fn query(
        &mut self,
        keys: &[Vec<u8>],
        options: &QueryOptions,
        progress: &dyn Progress,
    ) -> Result<Session, Error> {
        let mut retry = BusyRetry::default();
        let mut refreshed = false;
        loop {
            let result = self.query_once(keys, options, progress).await;
            if result.as_ref().is_err_and(Error::is_stale) && !refreshed {
                self.keys = None;
                refreshed = true;
                continue;
            }
            if !retry.again(&result).await {
                return result;
            }
        }
    }

    async fn query_once(
        &mut self,
        keys: &[Vec<u8>],
        options: &QueryOptions,
        progress: &dyn Progress,
    ) -> Result<Session, Error> {
        let mut ch = self.server.connect().await?;
        let (client, setup) = match self.keys.take() {
            Some(client) => (client, Duration::ZERO),
            None => {
                progress.stage("parameters and keys", None);
                let t = Instant::now();
                (HeClient::connect(&mut ch).await?, t.elapsed())
            }
        };
        let result = query_with(&mut ch, &client, keys, options, setup, progress).await;
        self.keys = Some(client);
        result
    }
}

/// [`query`] over a new connection, blocking; a busy server is retried
/// with backoff ([`BusyRetry`]).
pub fn query_blocking(
    server: &ServerAddr,
    keys: &[Vec<u8>],
    options: &QueryOptions,
    progress: &dyn Progress,
) -> Result<Session, Error> {
    block_on(async {
        let mut retry = BusyRetry::default();
        loop {
            let result = match server.connect().await {
                Ok(mut ch) => query(&mut ch, keys, options, progress).await,
                Err(e) => Err(e),
            };
            if !retry.again(&result).await {
                return result;
            }
        }
    })?
}

/// [`query`] as a sans-IO party: the caller carries its bytes to the
/// server (for instance to `Router::respond` on the other side of a
/// transport of its own) and pushes the answers back. Each request it
/// writes is whole before it waits, so every answer can come from a fresh
/// connection.
pub fn query_stepper(
    keys: Vec<Vec<u8>>,
    options: QueryOptions,
    limits: Limits,
) -> Stepper<Result<Session, Error>> {
    Stepper::new(limits, move |mut ch| async move {
        query(&mut ch, &keys, &options, &NoProgress).await
    })
}

/// The keys followed by random dummies up to `pad_to` items.
fn padded(keys: &[Vec<u8>], pad_to: Option<usize>) -> Result<Vec<Vec<u8>>, Error> {
    let Some(target) = pad_to else {
        return Ok(keys.to_vec());
    };
    if keys.len() > target {
        return Err(Error::Config(format!(
            "the input has {} distinct items, more than --pad-to {target}",
            keys.len()
        )));
    }
    let mut out = keys.to_vec();
    out.resize_with(target, || {
        let mut dummy = vec![0u8; DUMMY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut dummy);
        dummy
    });
    Ok(out)
}

/// One client key's label columns: `None` if it did not match.
pub type LabelCells = Option<Vec<Vec<u8>>>;

/// Per client key (of `keys`), `None` if it did not match, else its label
/// columns padded to the widest label; and that width (0 for an
/// unlabeled database, at least 1 for a labeled one).
pub fn label_cells(
    matches: &[Match],
    keys: usize,
    labeled: bool,
) -> Result<(usize, Vec<LabelCells>), Error> {
    let mut cells = vec![None; keys];
    for m in matches {
        let slot = cells
            .get_mut(m.index)
            .ok_or(Error::Internal("a match out of range"))?;
        *slot = Some(m.label.as_deref().map(label_fields).unwrap_or_default());
    }
    let width = cells.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let width = if labeled { width.max(1) } else { 0 };
    for fields in cells.iter_mut().flatten() {
        fields.resize(width, Vec::new());
    }
    Ok((width, cells))
}

/// A label's columns: the fields of its CSV record when it is one (and
/// UTF-8, to stay readable), else one column `hex:...`.
pub fn label_fields(label: &[u8]) -> Vec<Vec<u8>> {
    match decode_label(label) {
        Some(fields) if fields.iter().all(|f| std::str::from_utf8(f).is_ok()) => fields,
        _ => vec![format!("hex:{}", hex(label)).into_bytes()],
    }
}

/// The label columns' names: as given, else `label` or `label_1..`.
pub fn label_names(width: usize, given: &[String]) -> Result<Vec<String>, Error> {
    if !given.is_empty() {
        if given.len() < width {
            return Err(Error::Config(format!(
                "the labels have {width} columns but --label-names names {}",
                given.len()
            )));
        }
        return Ok(given.to_vec());
    }
    Ok(match width {
        0 => Vec::new(),
        1 => vec!["label".into()],
        _ => (1..=width).map(|i| format!("label_{i}")).collect(),
    })
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(index: usize, label: Option<&[u8]>) -> Match {
        Match {
            index,
            label: label.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn labels_become_columns_or_hex() {
        assert_eq!(
            label_fields(b"a,\"b,c\""),
            vec![b"a".to_vec(), b"b,c".to_vec()]
        );
        assert_eq!(label_fields(b"a\nb"), vec![b"hex:610a62".to_vec()]);
        assert_eq!(label_fields(b"\xff"), vec![b"hex:ff".to_vec()]);
    }

    #[test]
    fn cells_are_padded_to_the_widest_label() {
        let matches = [m(0, Some(b"x,y")), m(2, Some(b"z"))];
        let (width, cells) = label_cells(&matches, 3, true).expect("cells");
        assert_eq!(width, 2);
        assert_eq!(cells[1], None);
        assert_eq!(cells[2], Some(vec![b"z".to_vec(), Vec::new()]));
        let (width, cells) = label_cells(&[m(1, None)], 2, false).expect("cells");
        assert_eq!((width, cells), (0, vec![None, Some(Vec::new())]));
        assert!(label_cells(&[m(5, None)], 2, false).is_err());
    }

    #[test]
    fn label_names_default_and_given() {
        assert_eq!(label_names(1, &[]).expect("names"), ["label"]);
        assert_eq!(label_names(2, &[]).expect("names"), ["label_1", "label_2"]);
        let given = vec!["name".to_string(), "tier".to_string()];
        assert_eq!(label_names(1, &given).expect("names"), given);
        assert!(label_names(3, &given).is_err());
    }

    #[test]
    fn padding_adds_distinct_dummies() {
        let keys = vec![b"a".to_vec(), b"b".to_vec()];
        assert_eq!(padded(&keys, None).expect("same"), keys);
        let out = padded(&keys, Some(5)).expect("padded");
        assert_eq!((out.len(), &out[..2]), (5, &keys[..]));
        assert!(out[2..].iter().all(|d| d.len() == 32 && !keys.contains(d)));
        assert_ne!(out[2], out[3]);
        assert!(padded(&keys, Some(1)).is_err());
    }

    #[test]
    fn label_flags_must_fit_the_database() {
        assert!(check_label_flags(0, true, true).is_err());
        assert!(check_label_flags(16, false, true).is_err());
        assert!(
            check_label_flags(16, false, false).is_ok(),
            "removing needs no labels"
        );
        assert!(check_label_flags(0, false, true).is_ok());
    }
}
