//! `psikit he ...`: unbalanced labeled PSI from homomorphic encryption (the
//! APSI design): choosing parameters, building and updating the server's
//! database, and client queries that return labels.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::he_psi::facade::{self, BuildOptions, Session};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::select::{self, Goal, Selection, SelectionInput};
use psikit_protocols::he_psi::server::db_path;
use psikit_protocols::he_psi::sharded;
use psikit_protocols::he_psi::HeState;
use psikit_protocols::io::{read_rows, Column, KeySpec};
use psikit_protocols::{NoProgress, Progress};

use crate::args::{ClientTlsArgs, CsvArgs, JsonArgs, NetArgs};
use crate::matches::{print_read, write_matches_with};
use crate::progress::Bar;
use crate::report::{self, Say};

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
            shards: 1,
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
    /// Shards the database will be split into (`psikit he db build
    /// --shards`), for the selection: every shard adds its own bin bundles
    /// to each query.
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
    /// Encrypted self-test runs when reporting on a file (0: skip).
    #[arg(long, default_value_t = 1)]
    pub self_test_runs: usize,
    /// Write the chosen parameters to this file (APSI JSON), for
    /// `psikit he db build --params`.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct BuildArgs {
    /// Server's input: a CSV or Parquet file.
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
    /// Split the database into this many shards (a power of two), each
    /// served by its own `psikit serve --he-state DIR/shard-I` and all
    /// reached through `psikit serve --he-router DIR/router --he-shard
    /// ...`: every query goes to every shard, so no shard choice leaks.
    #[arg(long)]
    pub shards: Option<u32>,
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct UpdateArgs {
    /// The state directory; for a database built with --shards, the
    /// directory holding `router` and the shards (every shard is updated,
    /// then the manifest, which routers switch on).
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
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long)]
    pub state: PathBuf,
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct QueryArgs {
    /// Server address, host:port.
    #[arg(long, short)]
    pub server: String,
    /// Client's input: a CSV or Parquet file.
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
    /// Header names of the label columns (default: the names the server
    /// publishes, else `label`, or `label_1`, `label_2`, ... for several).
    #[arg(long, value_delimiter = ',')]
    pub label_names: Vec<String>,
    #[command(flatten)]
    pub json: JsonArgs,
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

fn params(a: &ParamsArgs) -> Result<()> {
    let say = a.json.say();
    let (chosen, text) = match &a.params {
        Some(path) => describe_file(a, path)?,
        None => choose(a)?,
    };
    say.line(&text);
    if let Some(out) = &a.out {
        std::fs::write(out, chosen.to_apsi_json())
            .with_context(|| format!("cannot write {}", out.display()))?;
        say.line(format!("parameters written to {}", out.display()));
    }
    say.result(&serde_json::json!({
        "command": "he params",
        "params": params_json(&chosen)?,
        "report": text.lines().collect::<Vec<_>>(),
        "written_to": a.out,
    }))
}

/// Parameters in APSI's JSON format, as a JSON value.
fn params_json(p: &PsiParams) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&p.to_apsi_json())?)
}

/// What a database holds, for `--json` (sizes and parameters: nothing
/// about the items).
fn state_json(state: &HeState) -> Result<serde_json::Value> {
    let mem = state.memory();
    let counts = state.bundle_counts();
    let most = counts.iter().copied().max().unwrap_or(0) as u64;
    Ok(serde_json::json!({
        "items": state.items(),
        "max_label_bytes": state.max_label_bytes(),
        "label_columns": state.label_columns(),
        "bundles": mem.bundles,
        "bundle_counts": counts,
        "data_bytes": mem.data_bytes,
        "cache_bytes": mem.cache_bytes,
        "false_positive_log2_per_item": state.params().log2_fpp_query(1, most),
        "db_id": facade::hex(&state.db_id()),
        "params": params_json(state.params())?,
    }))
}

/// The parameters of a file and what they would cost for the workload.
fn describe_file(a: &ParamsArgs, path: &Path) -> Result<(PsiParams, String)> {
    let params = facade::load_params(path)?;
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
    let input = SelectionInput {
        shards: a.shards,
        ..a.workload.selection(server_items, a.label_bytes)
    };
    let selection = with_spinner("choosing parameters", || select::select(&input))?;
    Ok((selection.params.clone(), selection.to_string()))
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

/// Runs `work` behind a spinner that says what is happening.
fn with_spinner<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let bar = Bar::new();
    bar.stage(what, None);
    work()
}

fn build(a: &BuildArgs) -> Result<()> {
    let say = a.json.say();
    let options = BuildOptions {
        params: a.params.as_deref().map(facade::load_params).transpose()?,
        max_label_bytes: a.max_label_bytes,
        capacity: a.capacity,
        workload: a.workload.selection(0, 0),
        force: a.force,
    };
    if let Some(shards) = a.shards {
        return build_sharded(a, shards, options);
    }
    let done = {
        let bar = Bar::new();
        facade::build(&a.csv, &a.columns.spec()?, &a.state, options, &bar)?
    };
    print_read(say, &a.csv, &done.read);
    print_selection(say, &done.selection);
    say.line(format!(
        "built in {}: {} items, {} duplicate rows (the last one's label kept)",
        report::secs(done.build_time),
        done.stats.inserted,
        done.stats.duplicates
    ));
    print_state(say, &done.state, &a.state)?;
    say.line(format!(
        "state saved to {} (oprf.key, {})",
        a.state.display(),
        file_name(&db_path(&a.state))
    ));
    say.result(&serde_json::json!({
        "command": "he db build",
        "rows_read": done.read.rows_read,
        "rows_skipped": done.read.rows_skipped,
        "inserted": done.stats.inserted,
        "duplicates": done.stats.duplicates,
        "build_s": done.build_time.as_secs_f64(),
        "state": state_json(&done.state)?,
    }))
}

/// How automatic parameters were chosen, when they were.
fn print_selection(say: Say, selection: &Option<(SelectionInput, Selection)>) {
    if let Some((input, selection)) = selection {
        say.line(format!(
            "automatic parameters for {} items, {} client items, labels up to {} bytes:",
            input.server_items, input.client_items, input.label_bytes
        ));
        for line in &selection.explanation {
            say.line(format!("  - {line}"));
        }
    }
}

/// `psikit he db build --shards N`: the shards and their router.
fn build_sharded(a: &BuildArgs, shards: u32, options: BuildOptions) -> Result<()> {
    let say = a.json.say();
    let done = {
        let bar = Bar::new();
        sharded::build_sharded(&a.csv, &a.columns.spec()?, &a.state, shards, options, &bar)?
    };
    print_read(say, &a.csv, &done.read);
    print_selection(say, &done.selection);
    let m = &done.manifest;
    say.line(format!(
        "built in {}: {} items in {shards} shards ({:?} each), {} duplicate rows (the last one's label kept)",
        report::secs(done.build_time),
        m.items.iter().sum::<u64>(),
        m.items,
        done.duplicates
    ));
    say.line(format!(
        "router (OPRF key, manifest) in {}; shards in {}/shard-0 .. shard-{}",
        a.state.join("router").display(),
        a.state.display(),
        shards - 1
    ));
    say.line(format!(
        "serve each shard with `psikit serve --he-state {}/shard-I --listen ...`, then the router \
         with `psikit serve --he-router {} --he-shard ADDR0 --he-shard ADDR1 ...`",
        a.state.display(),
        a.state.join("router").display()
    ));
    say.result(&serde_json::json!({
        "command": "he db build",
        "rows_read": done.read.rows_read,
        "rows_skipped": done.read.rows_skipped,
        "duplicates": done.duplicates,
        "build_s": done.build_time.as_secs_f64(),
        "shards": shards,
        "shard_items": m.items,
        "epoch": m.epoch,
        "params": serde_json::from_str::<serde_json::Value>(&m.params)?,
    }))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Everything a state directory's owner wants to know, and nothing about
/// the items themselves.
pub fn print_state(say: Say, state: &HeState, dir: &Path) -> Result<()> {
    let p = state.params();
    let counts = state.bundle_counts();
    let most = counts.iter().copied().max().unwrap_or(0) as u64;
    let mem = state.memory();
    match state.max_label_bytes() {
        0 => say.line(format!("database: {} items, unlabeled", state.items())),
        max => say.line(format!(
            "database: {} items, labels up to {max} bytes{}",
            state.items(),
            match state.label_columns() {
                [] => String::new(),
                names => format!(" in columns {}", names.join(", ")),
            }
        )),
    }
    say.line(format!("parameters: {}", params_line(p)));
    say.line(format!(
        "bin bundles: {} in all, {} per bundle index at most ({:?})",
        mem.bundles, most, counts
    ));
    if mem.cache_bytes > 0 {
        say.line(format!(
            "memory: {} of polynomials and {} of cached plaintexts",
            report::bytes(mem.data_bytes as u64),
            report::bytes(mem.cache_bytes as u64)
        ));
    } else {
        say.line(format!(
            "memory: {} of polynomials; serving with the plaintext cache adds up to {}",
            report::bytes(mem.data_bytes as u64),
            report::bytes(facade::cache_bound(state) as u64)
        ));
    }
    let path = db_path(dir);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    say.line(format!("{}: {}", path.display(), report::bytes(size)));
    say.line(format!(
        "false-positive probability: {} per client item, {} for a {TYPICAL_QUERY}-item query",
        report::log2_prob(p.log2_fpp_query(1, most)),
        report::log2_prob(p.log2_fpp_query(TYPICAL_QUERY, most))
    ));
    Ok(())
}

fn update(a: &UpdateArgs) -> Result<()> {
    let say = a.json.say();
    if sharded::is_sharded(&a.state) {
        return update_sharded(a);
    }
    let done = {
        let bar = Bar::new();
        facade::update(
            &a.state,
            &a.columns.spec()?,
            a.add.as_deref(),
            a.remove.as_deref(),
            &bar,
        )?
    };
    if let Some(s) = &done.removed {
        say.line(format!(
            "removed {} items ({} not found)",
            s.removed, s.missing
        ));
    }
    if let (Some((s, read)), Some(path)) = (&done.added, &a.add) {
        print_read(say, path, read);
        say.line(format!(
            "added {} items, gave {} present items a new label ({} duplicate rows)",
            s.inserted, s.relabelled, s.duplicates
        ));
    }
    say.line(format!("updated in {}", report::secs(done.time)));
    print_state(say, &done.state, &a.state)?;
    let removed = done.removed.as_ref();
    let added = done.added.as_ref().map(|(s, _)| s);
    say.result(&serde_json::json!({
        "command": "he db update",
        "removed": removed.map(|s| s.removed),
        "not_found": removed.map(|s| s.missing),
        "inserted": added.map(|s| s.inserted),
        "relabelled": added.map(|s| s.relabelled),
        "duplicates": added.map(|s| s.duplicates),
        "update_s": done.time.as_secs_f64(),
        "state": state_json(&done.state)?,
    }))
}

/// `psikit he db update` of a database built with `--shards`.
fn update_sharded(a: &UpdateArgs) -> Result<()> {
    let say = a.json.say();
    let done = {
        let bar = Bar::new();
        sharded::update_sharded(
            &a.state,
            &a.columns.spec()?,
            a.add.as_deref(),
            a.remove.as_deref(),
            &bar,
        )?
    };
    let (s, m) = (&done.stats, &done.manifest);
    say.line(format!(
        "removed {} items ({} not found); added {} items, gave {} present items a new label \
         ({} duplicate rows)",
        s.removed, s.missing, s.inserted, s.relabelled, s.duplicates
    ));
    say.line(format!(
        "updated in {}: {} items in {} shards ({:?} each), epoch {}; routers switch to it on \
         their next reload",
        report::secs(done.time),
        m.items.iter().sum::<u64>(),
        m.shards(),
        m.items,
        m.epoch
    ));
    say.result(&serde_json::json!({
        "command": "he db update",
        "removed": s.removed,
        "not_found": s.missing,
        "inserted": s.inserted,
        "relabelled": s.relabelled,
        "duplicates": s.duplicates,
        "update_s": done.time.as_secs_f64(),
        "shard_items": m.items,
        "epoch": m.epoch,
    }))
}

fn info(a: &InfoArgs) -> Result<()> {
    let say = a.json.say();
    let state = HeState::load(&a.state, false)?;
    print_state(say, &state, &a.state)?;
    say.line(format!("database id: {}", facade::hex(&state.db_id())));
    say.result(&serde_json::json!({"command": "he db info", "state": state_json(&state)?}))
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

pub fn print_session(say: Say, s: &Session) {
    let t = &s.outcome.times;
    say.line(format!(
        "query: {} items in {} round(s); parameters and keys {}, OPRF {}, encrypt {}, \
         decrypt {}, waiting {} (server evaluation {})",
        s.queried,
        s.outcome.rounds,
        report::secs(s.setup),
        report::secs(t.oprf),
        report::secs(t.encrypt),
        report::secs(t.decrypt),
        report::secs(t.waiting),
        report::secs(t.server)
    ));
    say.line(format!(
        "traffic: sent {}, received {}; false-positive probability of this query {}",
        report::bytes(s.bytes_sent),
        report::bytes(s.bytes_received),
        report::log2_prob(s.fpp_log2)
    ));
}

fn query(a: &QueryArgs) -> Result<()> {
    let spec = a.columns.spec()?;
    let table = read_rows(&a.csv, &spec)?;
    let (keys, rows_of_key) = table.unique_keys();
    let server = ServerAddr {
        addr: a.server.clone(),
        tls: a.tls.files(),
        limits: a.net.limits()?,
    };
    let options = facade::QueryOptions {
        pad_to: a.pad_to,
        key_format: spec.key_format(),
    };
    let session = facade::query_blocking(&server, &keys, &options, &NoProgress)?;
    let say = a.json.say();
    print_session(say, &session);
    let (names, cells) =
        facade::label_columns(&session, keys.len(), &a.label_names, "--label-names")?;
    let n = write_matches_with(&a.out, &table, &rows_of_key, &cells, &names)?;
    say.line(format!(
        "{} of {} distinct items matched; {n} rows written to {}{}",
        session.matches.len(),
        keys.len(),
        a.out.display(),
        if session.max_label_bytes > 0 {
            format!(" with {} label column(s)", names.len())
        } else {
            String::new()
        }
    ));
    let t = &session.outcome.times;
    say.result(&serde_json::json!({
        "command": "he query",
        "items": keys.len(),
        "queried": session.queried,
        "matched_items": session.matches.len(),
        "rows_written": n,
        "output": a.out,
        "label_columns": names,
        "rounds": session.outcome.rounds,
        "setup_s": session.setup.as_secs_f64(),
        "oprf_s": t.oprf.as_secs_f64(),
        "encrypt_s": t.encrypt.as_secs_f64(),
        "server_eval_s": t.server.as_secs_f64(),
        "decrypt_s": t.decrypt.as_secs_f64(),
        "waiting_s": t.waiting.as_secs_f64(),
        "bytes_sent": session.bytes_sent,
        "bytes_received": session.bytes_received,
        "false_positive_log2": session.fpp_log2,
    }))
}
