//! `psikit he ...`: unbalanced labeled PSI from homomorphic encryption (the
//! APSI design): choosing parameters, building and updating the server's
//! database, and client queries that return labels.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use psikit_io::{decode_label, read_rows, Column, KeyReader, KeySpec, LabeledItem, ReadStats};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::select::{self, Goal, SelectionInput};
use psikit_protocols::he_psi::{HeClient, HeState, Match, QueryOutcome, Row};
use psikit_transport::net::connect;
use rand::RngCore;

use crate::args::{runtime, ClientTlsArgs, CsvArgs, NetArgs};
use crate::matches::{unique_keys, write_matches_with, Extras};
use crate::{report, state_dir};

/// Database file inside a state directory (see `HeState`).
const DB_FILE: &str = "he.db";
/// Client size the false-positive estimates of `db build|info` assume.
const TYPICAL_QUERY: u64 = 1024;
/// Server size `he params --params FILE` reports for when none is given.
const DESCRIBE_SERVER_ITEMS: u64 = 1 << 20;

#[derive(Subcommand)]
pub enum HeCommand {
    /// Choose parameters for a workload, or report on a parameter file.
    Params(ParamsArgs),
    /// Server: build, update or inspect the database.
    #[command(subcommand)]
    Db(DbCommand),
    /// Client: find which rows of a CSV file the server holds, with labels.
    Query(QueryArgs),
}

#[derive(Subcommand)]
pub enum DbCommand {
    /// Build a new database (and OPRF key) from a CSV file.
    Build(BuildArgs),
    /// Add, relabel and/or remove items; running servers reload it.
    Update(UpdateArgs),
    /// Print what a state directory holds.
    Info(InfoArgs),
}

/// The server's CSV columns: key columns as for every protocol, plus the
/// label columns returned to clients whose item matches.
#[derive(Args, Clone, Debug)]
pub struct ServerCsvArgs {
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Label column(s): a header name or #N, comma-separated. A client whose
    /// item matches receives them (as one CSV record of at most
    /// --max-label-bytes bytes); they are not normalised.
    #[arg(long, value_delimiter = ',')]
    pub label: Vec<String>,
}

impl ServerCsvArgs {
    pub fn spec(&self) -> Result<KeySpec> {
        let mut spec = self.csv.spec()?;
        spec.label_columns = self
            .label
            .iter()
            .map(|c| Column::parse(c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(spec)
    }
}

/// What automatic parameters are chosen for.
#[derive(Args, Clone, Debug)]
pub struct WorkloadArgs {
    /// Items a client typically queries at once.
    #[arg(long, default_value_t = TYPICAL_QUERY)]
    pub client_items: u64,
    /// What to optimise: the query's latency with bytes priced at a fast
    /// (100 Mbit/s) or a slow (10 Mbit/s) link.
    #[arg(long, value_enum, default_value_t = GoalArg::Time)]
    pub goal: GoalArg,
    /// Price bytes at this link speed in Mbit/s instead (overrides --goal).
    #[arg(long, value_name = "MBIT_S")]
    pub link_mbps: Option<f64>,
    /// Largest false-positive probability of a whole query: 2^-BITS.
    #[arg(long, default_value_t = 40)]
    pub fpp_bits: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GoalArg {
    /// Least latency on a 100 Mbit/s link (favours server time).
    Time,
    /// Least latency on a 10 Mbit/s link (favours fewer bytes).
    Comm,
}

impl WorkloadArgs {
    fn selection(&self, server_items: u64, label_bytes: usize) -> SelectionInput {
        SelectionInput {
            server_items,
            client_items: self.client_items,
            label_bytes,
            goal: match (self.link_mbps, self.goal) {
                (Some(mbps), _) => Goal::Link(mbps),
                (None, GoalArg::Time) => Goal::Time,
                (None, GoalArg::Comm) => Goal::Comm,
            },
            max_fpp_log2: -f64::from(self.fpp_bits),
        }
    }
}

#[derive(Args)]
pub struct ParamsArgs {
    /// Report on this APSI-format parameter file instead of choosing.
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Items the server will hold, growth included (with --params: default
    /// 2^20).
    #[arg(long, required_unless_present = "params")]
    pub server_items: Option<u64>,
    /// Longest label in bytes (0: unlabeled).
    #[arg(long, default_value_t = 0)]
    pub label_bytes: usize,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Encrypted self-test runs when reporting on a file (0: skip).
    #[arg(long, default_value_t = 1)]
    pub self_test_runs: usize,
    /// Write the chosen parameters to this file (APSI JSON), for
    /// `psikit he db build --params`.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

#[derive(Args)]
pub struct BuildArgs {
    /// Server's CSV file.
    #[arg(long, visible_alias = "input")]
    pub csv: PathBuf,
    #[command(flatten)]
    pub columns: ServerCsvArgs,
    /// Directory for the state (oprf.key and he.db).
    #[arg(long)]
    pub state: PathBuf,
    /// Parameters in APSI's JSON format (default: chosen automatically for
    /// --capacity, --client-items and the labels).
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Longest label the database will accept, now and in later updates
    /// (default: the longest label in the file). Every label costs this
    /// much, whatever its own length.
    #[arg(long)]
    pub max_label_bytes: Option<usize>,
    /// Items the database should hold after growth, for automatic
    /// parameters (default: the rows read).
    #[arg(long)]
    pub capacity: Option<u64>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Replace whatever the directory holds (new key: clients fetch the new
    /// parameters on their next query).
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct UpdateArgs {
    #[arg(long)]
    pub state: PathBuf,
    /// CSV of items to add, or to give a new label if present.
    #[arg(long)]
    pub add: Option<PathBuf>,
    /// CSV of items to remove (applied before --add).
    #[arg(long)]
    pub remove: Option<PathBuf>,
    #[command(flatten)]
    pub columns: ServerCsvArgs,
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long)]
    pub state: PathBuf,
}

#[derive(Args)]
pub struct QueryArgs {
    /// Server address, host:port.
    #[arg(long, short)]
    pub server: String,
    /// Client's CSV file.
    #[arg(long, visible_alias = "input")]
    pub csv: PathBuf,
    #[command(flatten)]
    pub columns: CsvArgs,
    /// Where to write the matched rows, each followed by its label column(s).
    #[arg(long, short, visible_alias = "output")]
    pub out: PathBuf,
    /// Add random dummy items up to this many, so that the server learns N
    /// instead of how many distinct items the file has.
    #[arg(long)]
    pub pad_to: Option<usize>,
    /// Header names of the label columns (default: `label`, or `label_1`,
    /// `label_2`, ... for several).
    #[arg(long, value_delimiter = ',')]
    pub label_names: Vec<String>,
    #[command(flatten)]
    pub tls: ClientTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

pub fn run(cmd: HeCommand) -> Result<()> {
    match cmd {
        HeCommand::Params(a) => params(&a),
        HeCommand::Db(DbCommand::Build(a)) => build(&a),
        HeCommand::Db(DbCommand::Update(a)) => update(&a),
        HeCommand::Db(DbCommand::Info(a)) => info(&a),
        HeCommand::Query(a) => query(&a),
    }
}

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

/// Reads an APSI-format parameter file; the error names the file.
pub fn load_params(path: &Path) -> Result<PsiParams> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    PsiParams::from_apsi_json(&text).with_context(|| path.display().to_string())
}

fn params(a: &ParamsArgs) -> Result<()> {
    let (chosen, text) = match &a.params {
        Some(path) => describe_file(a, path)?,
        None => choose(a)?,
    };
    println!("{text}");
    if let Some(out) = &a.out {
        std::fs::write(out, chosen.to_apsi_json())
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!("parameters written to {}", out.display());
    }
    Ok(())
}

/// The parameters of a file and what they would cost for the workload.
fn describe_file(a: &ParamsArgs, path: &Path) -> Result<(PsiParams, String)> {
    let params = load_params(path)?;
    let report = select::describe(
        &params,
        a.server_items.unwrap_or(DESCRIBE_SERVER_ITEMS),
        a.workload.client_items,
        a.label_bytes,
        a.self_test_runs,
    )?;
    Ok((params, report.to_string()))
}

/// Parameters selected for the workload, with the reasons.
fn choose(a: &ParamsArgs) -> Result<(PsiParams, String)> {
    let server_items = a
        .server_items
        .context("give --server-items N or --params FILE")?;
    let input = a.workload.selection(server_items, a.label_bytes);
    let selection = with_spinner("choosing parameters", || select::select(&input))?;
    Ok((selection.params.clone(), selection.to_string()))
}

/// Parameters chosen for a new database's workload, with the reasons.
fn select_params(a: &BuildArgs, rows: usize, max_label: usize) -> Result<PsiParams> {
    let capacity = a.capacity.unwrap_or(rows as u64).max(1);
    let input = a.workload.selection(capacity, max_label);
    let selection = with_spinner("choosing parameters", || select::select(&input))?;
    println!(
        "automatic parameters for {capacity} items, {} client items, labels up to {max_label} bytes:",
        input.client_items
    );
    for line in &selection.explanation {
        println!("  - {line}");
    }
    Ok(selection.params)
}

/// One line naming every parameter.
pub fn params_line(p: &PsiParams) -> String {
    format!(
        "n {}, t {}, moduli {:?} bits; table {} bins ({} bundle indices), B {}, h {}, f {}; \
         source powers {:?}, PS low degree {}",
        p.seal.poly_modulus_degree,
        p.seal.plain_modulus,
        p.seal.coeff_modulus_bits,
        p.table.table_size,
        p.bundle_idx_count(),
        p.table.max_items_per_bin,
        p.table.hash_func_count,
        p.item.felts_per_item,
        p.query.query_powers,
        p.query.ps_low_degree
    )
}

// ---------------------------------------------------------------------------
// Server database
// ---------------------------------------------------------------------------

fn spinner(what: &str, template: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Runs `work` behind a spinner that says what is happening.
fn with_spinner<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let bar = spinner(what, "{spinner} {msg} ({elapsed})");
    let out = work();
    bar.finish_and_clear();
    out
}

/// Every labeled item of a CSV file, with the reader's counters.
pub fn read_labeled(path: &Path, spec: &KeySpec) -> Result<(Vec<LabeledItem>, ReadStats)> {
    let bar = spinner("reading", "{spinner} {msg}: {human_pos} rows");
    let mut reader = KeyReader::open(path, spec)?;
    let (mut all, mut batch) = (Vec::new(), Vec::new());
    while reader.next_labeled_batch(1 << 16, &mut batch)? > 0 {
        all.append(&mut batch);
        bar.set_position(all.len() as u64);
    }
    bar.finish_and_clear();
    Ok((all, reader.stats()))
}

/// Refuses a label longer than the database allows, naming the row.
fn check_labels(items: &[LabeledItem], path: &Path, max: usize) -> Result<()> {
    match items.iter().find(|i| i.label.len() > max) {
        Some(item) => bail!(
            "{} row {}: the label has {} bytes, but the database allows at most {max} \
             (fixed when it was built; see --max-label-bytes)",
            path.display(),
            item.row,
            item.label.len()
        ),
        None => Ok(()),
    }
}

/// The label room of a new database: as asked, else the longest label.
fn label_room(a: &BuildArgs, items: &[LabeledItem]) -> Result<usize> {
    let longest = items.iter().map(|i| i.label.len()).max().unwrap_or(0);
    match a.max_label_bytes {
        Some(_) if a.columns.label.is_empty() => {
            bail!("--max-label-bytes needs label columns (--label COLS)")
        }
        Some(max) => {
            check_labels(items, &a.csv, max)?;
            Ok(max)
        }
        None if !a.columns.label.is_empty() && longest == 0 => {
            bail!(
                "{}: no rows to size the labels from; give --max-label-bytes N",
                a.csv.display()
            )
        }
        None => Ok(longest),
    }
}

/// Inserts rows behind a progress bar (the OPRF is the long part).
pub fn insert_rows(
    state: &mut HeState,
    items: Vec<LabeledItem>,
) -> Result<psikit_protocols::he_psi::sender_db::UpdateStats> {
    let rows: Vec<Row> = items
        .into_iter()
        .map(|i| Row {
            key: i.key,
            label: i.label,
        })
        .collect();
    let bar = ProgressBar::new(rows.len() as u64);
    let style = ProgressStyle::with_template("{spinner} {msg}: {human_pos}/{human_len} rows")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message("OPRF");
    bar.enable_steady_tick(Duration::from_millis(120));
    let total = rows.len();
    let stats = state.insert(&rows, &mut |done| {
        bar.set_position(done as u64);
        if done == total {
            bar.set_message("filling bin bundles");
        }
    });
    bar.finish_and_clear();
    Ok(stats?)
}

fn build(a: &BuildArgs) -> Result<()> {
    let clear = state_dir::check_fresh(&a.state, a.force, "psikit he db update")?;
    let given = a.params.as_deref().map(load_params).transpose()?;
    let (items, read) = read_labeled(&a.csv, &a.columns.spec()?)?;
    state_dir::print_read(&a.csv, &read);
    let max_label = label_room(a, &items)?;
    let params = match given {
        Some(params) => params,
        None => select_params(a, items.len(), max_label)?,
    };
    let t = Instant::now();
    let mut state = HeState::create(params, max_label, false)?;
    let stats = insert_rows(&mut state, items)?;
    println!(
        "built in {}: {} items, {} duplicate rows (the last one's label kept)",
        report::secs(t.elapsed()),
        stats.inserted,
        stats.duplicates
    );
    // Cleared only now, so that a failed build leaves the old state alone;
    // the old key must go, since saving keeps a key already there.
    if clear {
        state_dir::clear(&a.state)?;
    }
    state.save(&a.state)?;
    print_state(&state, &a.state)?;
    println!("state saved to {} (oprf.key, {DB_FILE})", a.state.display());
    Ok(())
}

/// Everything a state directory's owner wants to know, and nothing about
/// the items themselves.
pub fn print_state(state: &HeState, dir: &Path) -> Result<()> {
    let db = state.db();
    let p = db.params();
    let counts = db.bundle_counts();
    let most = counts.iter().copied().max().unwrap_or(0) as u64;
    let mem = db.memory();
    match db.shape().max_label_bytes {
        0 => println!("database: {} items, unlabeled", db.len()),
        max => println!("database: {} items, labels up to {max} bytes", db.len()),
    }
    println!("parameters: {}", params_line(p));
    println!(
        "bin bundles: {} in all, {} per bundle index at most ({:?})",
        mem.bundles, most, counts
    );
    if mem.cache_bytes > 0 {
        println!(
            "memory: {} of polynomials and {} of cached plaintexts",
            report::bytes(mem.data_bytes as u64),
            report::bytes(mem.cache_bytes as u64)
        );
    } else {
        println!(
            "memory: {} of polynomials; serving with the plaintext cache adds up to {}",
            report::bytes(mem.data_bytes as u64),
            report::bytes(cache_bound(state) as u64)
        );
    }
    let path = dir.join(DB_FILE);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    println!("{}: {}", path.display(), report::bytes(size));
    println!(
        "false-positive probability: {} per client item, {} for a {TYPICAL_QUERY}-item query",
        report::log2_prob(p.log2_fpp_query(1, most)),
        report::log2_prob(p.log2_fpp_query(TYPICAL_QUERY, most))
    );
    Ok(())
}

/// Most bytes the query-ready plaintexts can take: one NTT-form plaintext
/// (`k` query-level moduli of `n` 64-bit words) per coefficient of every
/// polynomial of full degree `B`.
fn cache_bound(state: &HeState) -> usize {
    let db = state.db();
    let p = db.params();
    let shape = db.shape();
    let moduli = p.seal.coeff_modulus_bits.len().saturating_sub(1).max(1);
    let per_bundle = shape.polys() * (shape.max_items_per_bin + 1);
    db.memory().bundles * per_bundle * moduli * shape.slots * 8
}

fn update(a: &UpdateArgs) -> Result<()> {
    if a.add.is_none() && a.remove.is_none() {
        bail!("nothing to do: give --add FILE and/or --remove FILE");
    }
    let mut state = HeState::load(&a.state, false)?;
    let max_label = state.db().shape().max_label_bytes;
    check_label_flags(max_label, !a.columns.label.is_empty(), a.add.is_some())?;
    let spec = a.columns.spec()?;
    let t = Instant::now();
    if let Some(path) = &a.remove {
        let mut key_spec = spec.clone();
        key_spec.label_columns.clear();
        let (items, _) = read_labeled(path, &key_spec)?;
        let keys: Vec<Vec<u8>> = items.into_iter().map(|i| i.key).collect();
        let s = state.remove(&keys)?;
        println!("removed {} items ({} not found)", s.removed, s.missing);
    }
    if let Some(path) = &a.add {
        let (items, read) = read_labeled(path, &spec)?;
        check_labels(&items, path, max_label)?;
        state_dir::print_read(path, &read);
        let s = insert_rows(&mut state, items)?;
        println!(
            "added {} items, gave {} present items a new label ({} duplicate rows)",
            s.inserted, s.relabelled, s.duplicates
        );
    }
    state.save(&a.state)?;
    println!("updated in {}", report::secs(t.elapsed()));
    print_state(&state, &a.state)
}

/// A labeled database takes labels with every addition; an unlabeled one
/// takes none.
fn check_label_flags(max_label: usize, labels_given: bool, adding: bool) -> Result<()> {
    match (max_label, labels_given) {
        (0, true) => bail!("the database is unlabeled: drop --label"),
        (_, false) if max_label > 0 && adding => bail!(
            "the database is labeled: give --label COLS (the columns used at build) so added \
             items get their labels"
        ),
        _ => Ok(()),
    }
}

fn info(a: &InfoArgs) -> Result<()> {
    let state = HeState::load(&a.state, false)?;
    print_state(&state, &a.state)?;
    println!("database id: {}", hex(&state.db_id()));
    Ok(())
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// Traffic and timings of one client session.
pub struct Session {
    pub outcome: QueryOutcome,
    /// Parameters fetched and keys generated.
    pub setup: Duration,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub fpp_log2: f64,
    pub max_label_bytes: usize,
}

/// Connects, fetches the parameters and queries `keys`.
pub async fn run_session(ch: &mut psikit_transport::Channel, keys: &[Vec<u8>]) -> Result<Session> {
    let t = Instant::now();
    let client = HeClient::connect(ch).await?;
    let setup = t.elapsed();
    let outcome = client.query(ch, keys).await?;
    Ok(Session {
        outcome,
        setup,
        bytes_sent: ch.bytes_sent(),
        bytes_received: ch.bytes_received(),
        fpp_log2: client.fpp_log2(keys.len() as u64),
        max_label_bytes: client.max_label_bytes(),
    })
}

pub fn print_session(s: &Session, items: usize) {
    let t = &s.outcome.times;
    println!(
        "query: {items} items in {} round(s); parameters and keys {}, OPRF {}, encrypt {}, \
         server {}, decrypt {}",
        s.outcome.rounds,
        report::secs(s.setup),
        report::secs(t.oprf),
        report::secs(t.encrypt),
        report::secs(t.server),
        report::secs(t.decrypt)
    );
    println!(
        "traffic: sent {}, received {}; false-positive probability of this query {}",
        report::bytes(s.bytes_sent),
        report::bytes(s.bytes_received),
        report::log2_prob(s.fpp_log2)
    );
}

fn query(a: &QueryArgs) -> Result<()> {
    let table = read_rows(&a.csv, &a.columns.spec()?)?;
    let (keys, rows_of_key) = unique_keys(&table);
    let queried = padded(&keys, a.pad_to)?;
    let mut session = runtime()?.block_on(async {
        let mut ch = connect(&a.server, a.tls.files().as_ref(), a.net.limits()?).await?;
        run_session(&mut ch, &queried).await
    })?;
    print_session(&session, queried.len());
    // A dummy can only match by a false positive; it is no row of ours.
    session.outcome.matches.retain(|m| m.index < keys.len());
    let labeled = session.max_label_bytes > 0;
    if !labeled && !a.label_names.is_empty() {
        bail!("the server's database is unlabeled: drop --label-names");
    }
    let (width, mut cells) = label_cells(&session.outcome.matches, keys.len(), labeled)?;
    let names = header_names(width, &a.label_names)?;
    for fields in cells.iter_mut().flatten() {
        fields.resize(names.len(), Vec::new());
    }
    let n = write_matches_with(&a.out, &table, &rows_of_key, &cells, &names)?;
    println!(
        "{} of {} distinct items matched; {n} rows written to {}{}",
        session.outcome.matches.len(),
        keys.len(),
        a.out.display(),
        if labeled {
            format!(" with {} label column(s)", names.len())
        } else {
            String::new()
        }
    );
    Ok(())
}

/// The keys followed by random dummies up to `pad_to` items, so that the
/// server learns the padded size rather than ours. A dummy is 32 random
/// bytes: no CSV key of ours or the server's equals one except with
/// negligible probability.
fn padded(keys: &[Vec<u8>], pad_to: Option<usize>) -> Result<Vec<Vec<u8>>> {
    let Some(target) = pad_to else {
        return Ok(keys.to_vec());
    };
    if keys.len() > target {
        bail!(
            "the input has {} distinct items, more than --pad-to {target}",
            keys.len()
        );
    }
    let mut out = keys.to_vec();
    out.resize_with(target, || {
        let mut dummy = vec![0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut dummy);
        dummy
    });
    Ok(out)
}

/// Per client key, `None` if it did not match, else its label fields
/// (padded to the widest); and that width (0 for an unlabeled database).
pub fn label_cells(matches: &[Match], keys: usize, labeled: bool) -> Result<(usize, Vec<Extras>)> {
    let mut cells = vec![None; keys];
    for m in matches {
        let slot = cells
            .get_mut(m.index)
            .context("the client returned a bad index")?;
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

/// The label columns' header: as given, else `label` or `label_1..`.
fn header_names(width: usize, given: &[String]) -> Result<Vec<String>> {
    if !given.is_empty() {
        if given.len() < width {
            bail!(
                "the labels have {width} columns but --label-names names {}",
                given.len()
            );
        }
        return Ok(given.to_vec());
    }
    Ok(match width {
        0 => Vec::new(),
        1 => vec!["label".into()],
        _ => (1..=width).map(|i| format!("label_{i}")).collect(),
    })
}

fn hex(bytes: &[u8]) -> String {
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
    fn header_names_default_and_given() {
        assert_eq!(header_names(1, &[]).expect("names"), ["label"]);
        assert_eq!(header_names(2, &[]).expect("names"), ["label_1", "label_2"]);
        let given = vec!["name".to_string(), "tier".to_string()];
        assert_eq!(header_names(1, &given).expect("names"), given);
        assert!(header_names(3, &given).is_err());
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
