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

use crate::args::{ClientTlsArgs, CsvArgs, NetArgs};
use crate::matches::{print_read, write_matches};
use crate::progress::Bar;
use crate::report;

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
}

#[derive(Args)]
pub struct InfoArgs {
    #[arg(long)]
    pub state: PathBuf,
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
    print_read(&a.input, &done.read);
    println!("removed {} duplicate items", done.duplicates);
    println!(
        "OPRF: {} items in {} ({:.0} items/s)",
        done.read.items(),
        report::secs(done.oprf_time),
        done.read.items() as f64 / done.oprf_time.as_secs_f64()
    );
    println!("filter built in {}", report::secs(done.build_time));
    print_state(&done.state);
    println!("state saved to {}", a.state.display());
    Ok(())
}

fn print_state(state: &ServerState) {
    let f = state.filter();
    let p = f.params();
    let v = state.version();
    println!(
        "filter: {} items, {} buckets x {} slots, {}-bit fingerprints, load {:.3}",
        state.len(),
        p.num_buckets,
        p.bucket_size,
        p.fingerprint_bits,
        f.load_factor()
    );
    println!(
        "filter size: {} ({:.2} bits per item)",
        report::bytes(f.size_bytes()),
        f.bits_per_item()
    );
    let fpr = f.estimated_fpr();
    println!(
        "false-positive rate per client item: {} (at most {}); expected false positives in a 1024-item query: {:.2e}",
        report::prob(fpr),
        report::prob(p.fpr_upper_bound()),
        fpr * 1024.0
    );
    println!("epoch {}", v.epoch);
}

fn update(a: &UpdateArgs) -> Result<()> {
    let (state, report) = filter_psi::update(
        &a.state,
        &a.csv.spec()?,
        a.add.as_deref(),
        a.remove.as_deref(),
        &NoProgress,
    )?;
    println!(
        "epoch {}: added {} ({} already present), removed {} ({} not found)",
        report.epoch, report.added, report.already_present, report.removed, report.not_found
    );
    if report.rebuilt {
        println!("the filter was rebuilt larger; clients will download it in full");
    } else {
        println!("{} filter slots changed", report.changed_slots);
    }
    print_state(&state);
    Ok(())
}

fn info(a: &InfoArgs) -> Result<()> {
    print_state(&ServerState::load(&a.state)?);
    Ok(())
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

fn print_sync(o: &SyncOutcome) {
    match o.kind {
        SyncKind::UpToDate => println!("filter up to date (epoch {})", o.epoch),
        SyncKind::Full => println!(
            "downloaded the full filter: {} (epoch {})",
            report::bytes(o.body_bytes),
            o.epoch
        ),
        SyncKind::Delta => println!(
            "applied a delta of {} (now epoch {})",
            report::bytes(o.body_bytes),
            o.epoch
        ),
    }
}

fn sync(a: &SyncArgs) -> Result<()> {
    let outcome = a.client.client()?.sync_blocking(&a.client.server()?)?;
    print_sync(&outcome);
    Ok(())
}

pub fn print_query(o: &QueryOutcome) {
    println!(
        "query: {} items; blind {}, round trip {}, finalize {}; sent {}, received {}",
        o.matches.len(),
        report::secs(o.blind_time),
        report::secs(o.round_trip_time),
        report::secs(o.finalize_time),
        report::bytes(o.bytes_sent),
        report::bytes(o.bytes_received)
    );
}

fn query(a: &QueryArgs) -> Result<()> {
    let spec = a.csv.spec()?;
    let table = read_rows(&a.input, &spec)?;
    let (keys, rows_of_key) = table.unique_keys();
    let done = a
        .client
        .client()?
        .with_key_format(spec.key_format())
        .query_blocking(&a.client.server()?, &keys, &NoProgress)?;
    done.syncs.iter().for_each(print_sync);
    let result = done.outcome;
    print_query(&result);
    let n = write_matches(&a.output, &table, &rows_of_key, &result.matches)?;
    let found = result.matches.iter().filter(|m| **m).count();
    println!(
        "{found} of {} distinct items matched; {n} rows written to {}",
        keys.len(),
        a.output.display()
    );
    Ok(())
}
