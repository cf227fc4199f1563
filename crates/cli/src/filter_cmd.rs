//! `psikit filter ...`: set-up, updates, sync and queries of the filter
//! protocol.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::filter_psi::{
    self, FilterClient, FilterConfig, QueryOutcome, ServerState, SyncKind, SyncOutcome,
};
use psikit_protocols::io::read_rows;
use psikit_protocols::NoProgress;

use crate::args::{ClientTlsArgs, CsvArgs, JsonArgs, NetArgs};
use crate::matches::{print_read, write_matches};
use crate::progress::Bar;
use crate::report::{self, Say};

#[derive(Subcommand)]
pub enum FilterCommand {
    /// Server: build the filter state from a CSV file.
    Setup(SetupArgs),
    /// Server: add and/or remove items, producing a new epoch.
    Update(UpdateArgs),
    /// Server: print what a state directory holds.
    Info(InfoArgs),
    /// Client: download the filter, or only what changed since the cache.
    Sync(SyncArgs),
    /// Client: find which rows of a CSV file are in the server's set.
    Query(QueryArgs),
}

#[derive(Args)]
pub struct SetupArgs {
    /// Server's input: a CSV or Parquet file.
    #[arg(long, short)]
    pub input: PathBuf,
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Directory for the server state (key and filter).
    #[arg(long)]
    pub state: PathBuf,
    /// False-positive probability per client item: 2^-BITS.
    #[arg(long, default_value_t = 30)]
    pub fpr_bits: u32,
    /// Fingerprints per bucket.
    #[arg(long, default_value_t = 4)]
    pub bucket_size: u32,
    /// Load factor to build at (room left for insertions before a rebuild).
    #[arg(long, default_value_t = 0.90)]
    pub load: f64,
    /// Replace an existing state in the directory (new key; all clients
    /// must download the new filter).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct UpdateArgs {
    #[arg(long)]
    pub state: PathBuf,
    /// CSV of items to add.
    #[arg(long)]
    pub add: Option<PathBuf>,
    /// CSV of items to remove.
    #[arg(long)]
    pub remove: Option<PathBuf>,
    #[command(flatten)]
    pub csv: CsvArgs,
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
pub struct ClientArgs {
    /// Server address, host:port.
    #[arg(long, short)]
    pub server: String,
    /// File caching the server's filter between runs.
    #[arg(long, default_value = "psikit-filter.cache")]
    pub cache: PathBuf,
    /// Refuse filters larger than this many MiB.
    #[arg(long, default_value_t = 4096)]
    pub max_filter_mib: u64,
    #[command(flatten)]
    pub tls: ClientTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub json: JsonArgs,
}

#[derive(Args)]
pub struct SyncArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Client's input: a CSV or Parquet file.
    #[arg(long, short)]
    pub input: PathBuf,
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Where to write the matched rows (the client's own rows).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Keep this query's items' tags in this owner-only file, so the
    /// next query asks the server only for new items. The file holds a
    /// hash of each item: keep it like the input.
    #[arg(long)]
    pub tag_cache: Option<PathBuf>,
}

pub fn run(cmd: FilterCommand) -> Result<()> {
    match cmd {
        FilterCommand::Setup(a) => setup(&a),
        FilterCommand::Update(a) => update(&a),
        FilterCommand::Info(a) => info(&a),
        FilterCommand::Sync(a) => sync(&a),
        FilterCommand::Query(a) => query(&a),
    }
}

fn setup(a: &SetupArgs) -> Result<()> {
    let config = FilterConfig {
        fpr_log2: a.fpr_bits,
        bucket_size: a.bucket_size,
        build_load: a.load,
        rebuild_load: FilterConfig::default().rebuild_load.max(a.load),
        ..FilterConfig::default()
    };
    let done = {
        let bar = Bar::new();
        filter_psi::setup(&a.input, &a.csv.spec()?, config, &a.state, a.force, &bar)?
    };
    let say = a.json.say();
    print_read(say, &a.input, &done.read);
    say.line(format!("removed {} duplicate items", done.duplicates));
    say.line(format!(
        "OPRF: {} items in {} ({:.0} items/s)",
        done.read.items(),
        report::secs(done.oprf_time),
        done.read.items() as f64 / done.oprf_time.as_secs_f64()
    ));
    say.line(format!("filter built in {}", report::secs(done.build_time)));
    print_state(say, &done.state);
    say.line(format!("state saved to {}", a.state.display()));
    say.result(&serde_json::json!({
        "command": "filter setup",
        "rows_read": done.read.rows_read,
        "rows_skipped": done.read.rows_skipped,
        "duplicates": done.duplicates,
        "oprf_s": done.oprf_time.as_secs_f64(),
        "build_s": done.build_time.as_secs_f64(),
        "state": state_json(&done.state),
    }))
}

/// What a state holds, for people.
fn print_state(say: Say, state: &ServerState) {
    let f = state.filter();
    let p = f.params();
    let v = state.version();
    say.line(format!(
        "filter: {} items, {} buckets x {} slots, {}-bit fingerprints, load {:.3}",
        state.len(),
        p.num_buckets,
        p.bucket_size,
        p.fingerprint_bits,
        f.load_factor()
    ));
    say.line(format!(
        "filter size: {} ({:.2} bits per item)",
        report::bytes(f.size_bytes()),
        f.bits_per_item()
    ));
    let fpr = f.estimated_fpr();
    say.line(format!(
        "false-positive rate per client item: {} (at most {}); expected false positives in a 1024-item query: {:.2e}",
        report::prob(fpr),
        report::prob(p.fpr_upper_bound()),
        fpr * 1024.0
    ));
    say.line(format!("epoch {}", v.epoch));
}

/// What a state holds, for `--json`.
fn state_json(state: &ServerState) -> serde_json::Value {
    let f = state.filter();
    let p = f.params();
    serde_json::json!({
        "items": state.len(),
        "epoch": state.version().epoch,
        "buckets": p.num_buckets,
        "bucket_size": p.bucket_size,
        "fingerprint_bits": p.fingerprint_bits,
        "load": f.load_factor(),
        "filter_bytes": f.size_bytes(),
        "false_positive_rate": f.estimated_fpr(),
        "false_positive_bound": p.fpr_upper_bound(),
    })
}

fn update(a: &UpdateArgs) -> Result<()> {
    let (state, report) = filter_psi::update(
        &a.state,
        &a.csv.spec()?,
        a.add.as_deref(),
        a.remove.as_deref(),
        &NoProgress,
    )?;
    let say = a.json.say();
    say.line(format!(
        "epoch {}: added {} ({} already present), removed {} ({} not found)",
        report.epoch, report.added, report.already_present, report.removed, report.not_found
    ));
    if report.rebuilt {
        say.line("the filter was rebuilt larger; clients will download it in full");
    } else {
        say.line(format!("{} filter slots changed", report.changed_slots));
    }
    print_state(say, &state);
    say.result(&serde_json::json!({
        "command": "filter update",
        "epoch": report.epoch,
        "added": report.added,
        "already_present": report.already_present,
        "removed": report.removed,
        "not_found": report.not_found,
        "rebuilt": report.rebuilt,
        "changed_slots": report.changed_slots,
        "state": state_json(&state),
    }))
}

fn info(a: &InfoArgs) -> Result<()> {
    let state = ServerState::load(&a.state)?;
    let say = a.json.say();
    print_state(say, &state);
    say.result(&serde_json::json!({"command": "filter info", "state": state_json(&state)}))
}

impl ClientArgs {
    fn server(&self) -> Result<ServerAddr> {
        Ok(ServerAddr {
            addr: self.server.clone(),
            tls: self.tls.files(),
            limits: self.net.limits()?,
        })
    }

    /// The client with its cache; a damaged cache is reported in one line
    /// and replaced by the next sync.
    fn client(&self) -> Result<FilterClient> {
        let client = FilterClient::with_cache_file(&self.cache, self.max_filter_mib << 20)?;
        if let Some(why) = client.discarded_cache() {
            eprintln!(
                "psikit: ignoring the damaged filter cache ({why}); downloading the full filter"
            );
        }
        Ok(client)
    }
}

fn print_sync(say: Say, o: &SyncOutcome) {
    say.line(match o.kind {
        SyncKind::UpToDate => format!("filter up to date (epoch {})", o.epoch),
        SyncKind::Full => format!(
            "downloaded the full filter: {} (epoch {})",
            report::bytes(o.body_bytes),
            o.epoch
        ),
        SyncKind::Delta => format!(
            "applied a delta of {} (now epoch {})",
            report::bytes(o.body_bytes),
            o.epoch
        ),
    });
}

fn sync_json(o: &SyncOutcome) -> serde_json::Value {
    let kind = match o.kind {
        SyncKind::UpToDate => "up_to_date",
        SyncKind::Full => "full",
        SyncKind::Delta => "delta",
    };
    serde_json::json!({"kind": kind, "epoch": o.epoch, "body_bytes": o.body_bytes})
}

fn sync(a: &SyncArgs) -> Result<()> {
    let outcome = a.client.client()?.sync_blocking(&a.client.server()?)?;
    let say = a.client.json.say();
    print_sync(say, &outcome);
    say.result(&serde_json::json!({"command": "filter sync", "sync": sync_json(&outcome)}))
}

pub fn print_query(say: Say, o: &QueryOutcome) {
    let cached = match o.cached {
        0 => String::new(),
        n => format!(" ({n} from the tag cache)"),
    };
    say.line(format!(
        "query: {} items{cached}; blind {}, round trip {}, finalize {}; sent {}, received {}",
        o.matches.len(),
        report::secs(o.blind_time),
        report::secs(o.round_trip_time),
        report::secs(o.finalize_time),
        report::bytes(o.bytes_sent),
        report::bytes(o.bytes_received)
    ));
}

fn query(a: &QueryArgs) -> Result<()> {
    let spec = a.csv.spec()?;
    let table = read_rows(&a.input, &spec)?;
    let (keys, rows_of_key) = table.unique_keys();
    let mut client = a.client.client()?.with_key_format(spec.key_format());
    if let Some(path) = &a.tag_cache {
        client = client.with_tag_cache(path)?;
        if let Some(why) = client.discarded_tag_cache() {
            eprintln!("psikit: ignoring the damaged tag cache ({why}); asking for every item");
        }
    }
    let done = client.query_blocking(&a.client.server()?, &keys, &NoProgress)?;
    let say = a.client.json.say();
    done.syncs.iter().for_each(|o| print_sync(say, o));
    let result = done.outcome;
    print_query(say, &result);
    let n = write_matches(&a.output, &table, &rows_of_key, &result.matches)?;
    let found = result.matches.iter().filter(|m| **m).count();
    say.line(format!(
        "{found} of {} distinct items matched; {n} rows written to {}",
        keys.len(),
        a.output.display()
    ));
    say.result(&serde_json::json!({
        "command": "filter query",
        "syncs": done.syncs.iter().map(sync_json).collect::<Vec<_>>(),
        "items": keys.len(),
        "cached_items": result.cached,
        "matched_items": found,
        "rows_written": n,
        "output": a.output,
        "blind_s": result.blind_time.as_secs_f64(),
        "round_trip_s": result.round_trip_time.as_secs_f64(),
        "finalize_s": result.finalize_time.as_secs_f64(),
        "bytes_sent": result.bytes_sent,
        "bytes_received": result.bytes_received,
    }))
}
