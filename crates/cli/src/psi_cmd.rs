//! `psikit psi send|receive`: balanced two-party PSI over TCP (optionally
//! TLS), one party listening and the other connecting. VOLE-PSI
//! (Raghuraman-Rindal) by default, RR16 with `--protocol rr16`; `psikit
//! rr16` is the same run with RR16's own flags.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use psikit_protocols::balanced::{self, Outcome, Phases, Protocol, Role, Settings};
use psikit_protocols::common::connect::{Peer, ServerAddr};
use psikit_protocols::io::read_rows;
use psikit_protocols::jobs::{self, JobInput, JobOptions, JobOutcome, JobProtocol};
use psikit_protocols::NoProgress;

use crate::args::{ClientTlsArgs, CsvArgs, JsonArgs, NetArgs, ServerTlsArgs};
use crate::matches::write_matches;
use crate::progress::Bar;
use crate::report::{self, Say};

#[derive(Subcommand)]
pub enum PsiCommand {
    /// The sender: contributes its set; learns nothing unless --reveal.
    Send(PsiArgs),
    /// The receiver: learns which of its rows are in the sender's set.
    Receive(PsiArgs),
}

#[derive(Args)]
pub struct PsiArgs {
    #[command(flatten)]
    pub party: PartyArgs,
    /// The protocol; both parties must choose the same.
    #[arg(long, default_value = "vole", value_parser = protocol_parser())]
    pub protocol: Protocol,
    /// Malicious security (both parties must agree). Default: semi-honest,
    /// secure if both parties follow the protocol.
    #[arg(long)]
    pub malicious: bool,
    /// VOLE-PSI's low-communication mode (semi-honest; both parties must
    /// agree): the receiver's largest message takes σ + log2(sender's
    /// items) bits an entry instead of 128, about 150 bits per item in all
    /// instead of 245 at 2^20 items, at about the same speed.
    #[arg(long, conflicts_with = "malicious")]
    pub low_comm: bool,
}

/// What every balanced PSI party needs: its data, where its peer is, the
/// output.
#[derive(Args)]
pub struct PartyArgs {
    /// This party's input: a CSV file, or a Parquet file (told by its
    /// first bytes; flat columns, snappy, zstd or LZ4).
    #[arg(long, short)]
    pub input: PathBuf,
    #[command(flatten)]
    pub csv: CsvArgs,
    /// Where to write matched rows (the receiver always; the sender only
    /// with --reveal).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The receiver sends the intersection to the sender (the sender must
    /// then trust the receiver to report it truthfully).
    #[arg(long)]
    pub reveal: bool,
    /// Largest peer set accepted by a one-shot run (--one-shot).
    #[arg(long, default_value_t = 1 << 24)]
    pub max_peer_items: u64,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub json: JsonArgs,
    #[command(flatten)]
    pub job: JobArgs,
}

/// How a party runs: by default a bucketed, resumable job
/// (`psikit_protocols::jobs`), or with `--one-shot` one run in memory.
#[derive(Args)]
pub struct JobArgs {
    /// Keep the job's state (journal, spool) in this directory, and keep
    /// it after the job. By default it lives in a hidden directory beside
    /// --output (or in the current directory), removed when the job ends.
    #[arg(long, conflicts_with = "one_shot")]
    pub job_dir: Option<PathBuf>,
    /// Continue the job from the buckets both sides committed (rerun the
    /// same command with --resume after a crash or a dropped link).
    #[arg(long, conflicts_with = "one_shot")]
    pub resume: bool,
    /// This party's memory budget for a job (e.g. 4G, 512M); it sizes the
    /// buckets.
    #[arg(long, default_value = "4G", value_parser = parse_bytes)]
    pub memory: u64,
    /// The most items per bucket, instead of what --memory allows.
    #[arg(long, conflicts_with = "one_shot")]
    pub bucket_items: Option<u64>,
    /// Buckets run at once, each over a connection of its own, sharing
    /// --memory (default: one per 8 cores, at most 4; the peer's count caps
    /// it).
    #[arg(long, conflicts_with = "one_shot", value_parser = clap::value_parser!(u8).range(1..=i64::from(jobs::MAX_LANES)))]
    pub lanes: Option<u8>,
    /// Largest peer input accepted by a job, in rows.
    #[arg(long, default_value_t = 1 << 40)]
    pub max_peer_rows: u64,
    /// Seconds to keep reconnecting after the link drops.
    #[arg(long, default_value_t = 600)]
    pub retry_secs: u64,
    /// Seconds a job waits for the peer's next message (counted from the
    /// last one; a job has no other receive timeout).
    #[arg(long, default_value_t = 600)]
    pub idle_secs: u64,
    /// Run the protocol once over the whole input held in memory, with no
    /// job directory: for a peer that runs one-shot (Python's psikit.psi
    /// and psikit.cpsi without job_dir, the library's run functions). The
    /// peer must run one-shot too.
    #[arg(long)]
    pub one_shot: bool,
}

/// `4G`, `512M`, `64K` or a plain byte count.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 10),
        Some((i, 'M' | 'm')) => (&s[..i], 20),
        Some((i, 'G' | 'g')) => (&s[..i], 30),
        Some((i, 'T' | 't')) => (&s[..i], 40),
        _ => (s, 0),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as 4G, 512M or 1048576"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s} is too large"))
}

/// Where a two-party run's peer is: one side listens, the other connects.
#[derive(Args)]
pub struct PeerArgs {
    /// Wait for the peer on this address.
    #[arg(long, conflicts_with = "connect")]
    pub listen: Option<String>,
    /// Connect to the peer at this address.
    #[arg(long)]
    pub connect: Option<String>,
    /// With --listen: give up if the peer has not connected after this many
    /// seconds (default: wait as long as it takes).
    #[arg(long, requires = "listen")]
    pub accept_timeout_secs: Option<u64>,
    #[command(flatten)]
    pub server_tls: ServerTlsArgs,
    #[command(flatten)]
    pub client_tls: ClientTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

impl PeerArgs {
    pub fn peer(&self) -> Result<Peer> {
        let limits = self.net.limits()?;
        Ok(match (&self.listen, &self.connect) {
            (Some(addr), None) => Peer::Listen {
                addr: addr.clone(),
                tls: self.server_tls.files(),
                limits,
                accept_timeout: self.accept_timeout_secs.map(Duration::from_secs),
            },
            (None, Some(addr)) => Peer::Connect(ServerAddr {
                addr: addr.clone(),
                tls: self.client_tls.files(),
                limits,
            }),
            _ => bail!("give exactly one of --listen ADDR or --connect ADDR"),
        })
    }
}

/// `--protocol`: the words the protocols crate accepts, each with its help.
pub fn protocol_parser() -> impl TypedValueParser<Value = Protocol> {
    PossibleValuesParser::new(Protocol::ALL.map(|p| PossibleValue::new(p.word()).help(p.about())))
        .try_map(|word| word.parse::<Protocol>())
}

pub fn run(cmd: PsiCommand) -> Result<()> {
    // One run per process, freeing big vectors phase after phase.
    psikit_protocols::memory::reuse_freed_memory();
    let (a, sending) = match cmd {
        PsiCommand::Send(a) => (a, true),
        PsiCommand::Receive(a) => (a, false),
    };
    let mode = Mode {
        malicious: a.malicious,
        low_comm: a.low_comm,
    };
    party(&a.party, a.protocol, mode, sending)
}

/// The security mode a party asked for.
#[derive(Clone, Copy)]
pub struct Mode {
    pub malicious: bool,
    /// VOLE-PSI's low-communication mode.
    pub low_comm: bool,
}

pub fn announce(addr: &str) {
    eprintln!("psikit: waiting for the peer on {addr}");
}

/// One party's run of `protocol` on the CSV rows, with the output the CLI
/// gives (`psikit psi` and `psikit rr16` alike).
pub fn party(a: &PartyArgs, protocol: Protocol, mode: Mode, sending: bool) -> Result<()> {
    if sending && a.reveal && a.output.is_none() {
        bail!("--reveal needs --output FILE for the revealed rows");
    }
    let output = match sending {
        true => a.output.as_ref(),
        false => Some(
            a.output
                .as_ref()
                .context("the receiver needs --output FILE")?,
        ),
    };
    let settings = Settings {
        malicious: mode.malicious,
        low_comm: mode.low_comm,
        reveal: a.reveal,
        max_peer_items: a.max_peer_items,
        key_format: a.csv.spec()?.key_format(),
        ..Settings::new(protocol)
    };
    let role = match sending {
        true => Role::Sender,
        false => Role::Receiver,
    };
    if !a.job.one_shot {
        return job(a, role, settings, output);
    }
    let table = read_rows(&a.input, &a.csv.spec()?)?;
    let (keys, rows_of_key) = table.unique_keys();
    let peer = a.peer.peer()?;
    let out = balanced::run_blocking(&peer, role, &keys, &settings, announce, &NoProgress)?;
    let say = a.json.say();
    for line in phase_lines(&out) {
        say.line(format!("{}: {line}", role_name(role)));
    }
    let mut result = serde_json::json!({
        "command": format!("{protocol} {}", role_word(role)),
        "job": null,
        "items": keys.len(),
        "bytes_sent": out.bytes_sent,
        "bytes_received": out.bytes_received,
    });
    if let (Some(matches), Some(path)) = (&out.matches, output) {
        let n = write_matches(path, &table, &rows_of_key, matches)?;
        let found = matches.iter().filter(|m| **m).count();
        say.line(match role {
            Role::Sender => format!(
                "the receiver reported {found} matches; {n} rows written to {}",
                path.display()
            ),
            Role::Receiver => format!(
                "{found} of {} distinct items matched; {n} rows written to {}",
                keys.len(),
                path.display()
            ),
        });
        result["matched_items"] = found.into();
        result["rows_written"] = n.into();
        result["output"] = serde_json::json!(path);
    }
    say.result(&result)
}

/// The subcommand of a role: `send` or `receive`.
fn role_word(role: Role) -> &'static str {
    match role {
        Role::Sender => "send",
        Role::Receiver => "receive",
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    }
}

/// One party's run as a bucketed job, with a progress bar and a summary.
fn job(a: &PartyArgs, role: Role, settings: Settings, output: Option<&PathBuf>) -> Result<()> {
    let input = JobInput {
        path: a.input.clone(),
        spec: a.csv.spec()?,
    };
    let command = format!("{} {}", settings.protocol, role_word(role));
    let protocol = JobProtocol::Balanced(settings);
    let say = a.json.say();
    let out = run_job(&a.peer, &a.job, role, input, protocol, output, a.json.json)?;
    if let (Some(n), Some(path)) = (out.matched_rows, output) {
        say.line(format!(
            "{n} of {} rows matched; written to {}",
            out.input.rows,
            path.display()
        ));
    }
    say.result(&serde_json::json!({
        "command": command,
        "job": job_json(&out),
        "rows": out.input.rows,
        "matched_rows": out.matched_rows,
        "output": output,
        "bytes_sent": out.bytes_sent,
        "bytes_received": out.bytes_received,
    }))
}

/// A job's outcome for `--json`: its id, buckets, times and traffic.
pub(crate) fn job_json(out: &JobOutcome) -> serde_json::Value {
    let t = &out.times;
    serde_json::json!({
        "id": out.id(),
        "buckets": out.shape.buckets,
        "buckets_run": out.buckets_run,
        "statistical_bits": out.shape.statistical_bits(),
        "reconnects": out.reconnects,
        "end_confirmed": out.end_confirmed,
        "read_s": t.read.as_secs_f64(),
        "split_s": t.split.as_secs_f64(),
        "buckets_s": t.buckets.as_secs_f64(),
        "output_s": t.output.as_secs_f64(),
        "peak_memory_bytes": report::peak_memory(),
    })
}

/// Runs a job (any family's) with a progress bar, then prints its
/// summary: the buckets, where the time went, the traffic, peak memory.
pub(crate) fn run_job(
    peer: &PeerArgs,
    j: &JobArgs,
    role: Role,
    input: JobInput,
    protocol: JobProtocol,
    output: Option<&PathBuf>,
    json: bool,
) -> Result<JobOutcome> {
    let (dir, implicit) = match &j.job_dir {
        Some(dir) => (dir.clone(), false),
        None => (
            jobs::default_dir(role, &input.path, output.map(|p| p.as_path()))?,
            true,
        ),
    };
    let out = run_job_in(peer, j, role, input, protocol, &dir, output, json);
    match (&out, implicit) {
        (Ok(out), true) if out.end_confirmed => remove_job_dir(&dir),
        (Err(_), true) if dir.exists() => eprintln!(
            "psikit: the job's state is kept in {}: rerun the same command with --resume to \
             continue it",
            dir.display()
        ),
        _ => {}
    }
    out
}

/// Removes a default job directory after its job ended well (a failure
/// to do so is reported, not fatal: the result is already written).
fn remove_job_dir(dir: &Path) {
    if let Err(e) = jobs::remove_scratch(dir) {
        eprintln!("psikit: could not remove the job directory: {e}");
    }
}

/// [`run_job`] in `dir`; the summary goes to stderr when stdout carries
/// `--json`.
#[allow(clippy::too_many_arguments)]
fn run_job_in(
    peer: &PeerArgs,
    j: &JobArgs,
    role: Role,
    input: JobInput,
    protocol: JobProtocol,
    dir: &Path,
    output: Option<&PathBuf>,
    json: bool,
) -> Result<JobOutcome> {
    let described = protocol.describe();
    let opts = JobOptions {
        resume: j.resume,
        memory: j.memory,
        max_bucket_items: j.bucket_items,
        lanes: j.lanes.unwrap_or_else(jobs::default_lanes),
        max_peer_rows: j.max_peer_rows,
        retry_for: Duration::from_secs(j.retry_secs),
        idle_timeout: Duration::from_secs(j.idle_secs),
        output: output.cloned(),
        ..JobOptions::new(protocol, dir.to_owned())
    };
    let bar = Bar::new();
    let out = jobs::run_blocking(&peer.peer()?, role, &input, &opts, announce, &bar)?;
    drop(bar);
    let name = role_name(role);
    let t = &out.times;
    let say = Say::new(json);
    say.line(format!(
        "{name}: job {}: {}; {} bucket(s) of {} (sender) / {} (receiver) items, each at σ = \
         {}; {} run now{}",
        out.id(),
        described,
        out.shape.buckets,
        out.shape.sender_capacity,
        out.shape.receiver_capacity,
        out.shape.statistical_bits(),
        out.buckets_run,
        match out.reconnects {
            0 => String::new(),
            n => format!(", after {n} reconnection(s)"),
        }
    ));
    if !out.end_confirmed {
        eprintln!(
            "psikit: the link dropped as the job ended and the peer did not come back: this \
             side's output is whole; if the peer's run failed, rerun both sides with --resume"
        );
    }
    say.line(format!(
        "{name}: read {}, split {}, buckets {}, output {}; sent {}, received {}; peak memory {}",
        report::secs(t.read),
        report::secs(t.split),
        report::secs(t.buckets),
        report::secs(t.output),
        report::bytes(out.bytes_sent),
        report::bytes(out.bytes_received),
        report::peak_memory().map_or("unknown".into(), report::bytes)
    ));
    Ok(out)
}

/// Lines describing a party's run (parameters, times, traffic), in its
/// family's terms.
pub fn phase_lines(out: &Outcome) -> Vec<String> {
    let (sent, received) = (out.bytes_sent, out.bytes_received);
    match &out.phases {
        #[cfg(feature = "vole")]
        Phases::Vole(p) => vec![format!(
            "VOLE-PSI ({}): VOLE {}, online {}; sent {}, received {}",
            match (p.malicious, p.low_comm) {
                (true, _) => "malicious",
                (false, true) => "semi-honest, low communication",
                (false, false) => "semi-honest",
            },
            report::secs(p.vole),
            report::secs(p.online),
            report::bytes(sent),
            report::bytes(received)
        )],
        #[cfg(feature = "rr16")]
        Phases::Rr16 { params: p, phases } => vec![
            format!(
                "{} OTs in {} chunk(s), Bloom filter {} bits, k = {}, p_chk = {}",
                p.n_ot, p.chunks, p.n_bf, p.k, p.p_chk
            ),
            format!(
                "offline {}, online {}; sent {}, received {}",
                report::secs(phases.offline),
                report::secs(phases.online),
                report::bytes(sent),
                report::bytes(received)
            ),
        ],
    }
}
