//! `psikit cpsi <app> receive|send`: circuit PSI and what it computes on
//! the intersection, over TCP (optionally TLS), one party listening and the
//! other connecting. `--reveal-to` says who learns the result: by default
//! the `receive` party (for the union, the intersection's complement in
//! the other party's set); the other contributes its set (and values) and
//! learns nothing. The result is printed, or written as JSON with
//! `--json`; per-bin shares and the union's keys go to `--output`. Every
//! application runs as a bucketed, resumable job (unless `--one-shot`):
//! the cardinality, sums and threshold opened once over all buckets, the
//! shares and the union written bucket by bucket.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use psikit_protocols::cpsi::facade::{self, Role};
use psikit_protocols::cpsi::{
    App, AppKind, Choices, CpsiConfig, Epc, Input, OtKind, Outcome, Output, ParseError, Reveal,
    Shares, Side, Spelling,
};
use psikit_protocols::io::{read_rows, Column, Table};
use psikit_protocols::jobs::{JobInput, JobProtocol};
use psikit_protocols::NoProgress;

use crate::args::CsvArgs;
use crate::psi_cmd::{announce, run_job, JobArgs, PeerArgs};

#[derive(Subcommand)]
pub enum CpsiCommand {
    /// The size of the intersection.
    Cardinality(RoleCommand),
    /// The intersection's size and the sums of each party's
    /// --value-columns over it (mod 2^64).
    Sum(RoleCommand),
    /// Whether the intersection has at least --threshold items (one bit).
    Threshold(RoleCommand),
    /// The other party's keys outside the intersection, hence the union.
    Union(RoleCommand),
    /// XOR shares of membership per bin, for computing further elsewhere.
    Shares(RoleCommand),
}

#[derive(Args)]
pub struct RoleCommand {
    #[command(subcommand)]
    role: RoleArgs,
}

#[derive(Subcommand)]
enum RoleArgs {
    /// Holds the cuckoo table (best the smaller set); learns the result
    /// unless --reveal-to says otherwise.
    Receive(CpsiArgs),
    /// Holds the simple table; learns nothing unless --reveal-to says so.
    Send(CpsiArgs),
}

#[derive(Args)]
pub struct CpsiArgs {
    /// This party's input: a CSV file, or a Parquet file (told by its
    /// first bytes; flat columns, snappy, zstd or LZ4).
    #[arg(long, short)]
    input: PathBuf,
    #[command(flatten)]
    csv: CsvArgs,
    /// Columns of unsigned integer values to sum (comma-separated, at most
    /// 16): rows with the same key add up.
    #[arg(long, alias = "value-column", value_delimiter = ',')]
    value_columns: Vec<String>,
    /// The threshold (threshold; both parties give the same).
    #[arg(long)]
    threshold: Option<u64>,
    /// Where to write the union's keys or this party's shares.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// OT extension (both parties must agree).
    #[arg(long, default_value = "silent",
          value_parser = words(&OtKind::ALL, OtKind::word, Some(OtKind::about)))]
    ot: OtKind,
    /// Equality-preserving compression of the tags before the equality
    /// test: "auto" (the smallest output the parameters allow), "off", or
    /// an output length in bits (16 to 31). Both parties must agree.
    #[arg(long, default_value = "auto")]
    epc: Epc,
    /// Who learns the result: the receive party, the send party, or both
    /// (both parties must agree). The union is learned by one party.
    #[arg(long, default_value = "receiver", value_parser = words(&Reveal::ALL, Reveal::word, None))]
    reveal_to: Reveal,
    /// Sums only: reveal them only if the intersection has at least this
    /// many items (both parties learn whether it has; both must agree).
    #[arg(long, default_value_t = 0)]
    min_intersection: u64,
    /// Sums only: also the inner product over the intersection, Σ x·y of
    /// the sender's first value column x and the receiver's first y (both
    /// must agree; costs --product-bits OTs and ~6.5 bytes per bit per
    /// bin, +60-70% time at 32 bits).
    #[arg(long)]
    inner_product: bool,
    /// Bits of the receiver's values in the inner product (1 to 64).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u8).range(1..=64))]
    product_bits: u8,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// Largest peer set accepted.
    #[arg(long, default_value_t = 1 << 24)]
    max_peer_items: u64,
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    job: JobArgs,
}

/// A flag taking one of a choice's words: clap lists them (with `about`
/// as each one's help, if given) and the vocabulary parses them.
pub(crate) fn words<T>(
    all: &[T],
    word: fn(T) -> &'static str,
    about: Option<fn(T) -> &'static str>,
) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = ParseError> + Copy + Send + Sync + 'static,
{
    let values = all.iter().map(|&v| match about {
        Some(about) => PossibleValue::new(word(v)).help(about(v)),
        None => PossibleValue::new(word(v)),
    });
    PossibleValuesParser::new(values).try_map(|s| s.parse::<T>())
}

pub fn run(cmd: CpsiCommand) -> Result<()> {
    // One run per process, freeing big vectors phase after phase.
    psikit_protocols::memory::reuse_freed_memory();
    let (app, roles) = match cmd {
        CpsiCommand::Cardinality(r) => (AppKind::Cardinality, r),
        CpsiCommand::Sum(r) => (AppKind::Sum, r),
        CpsiCommand::Threshold(r) => (AppKind::Threshold, r),
        CpsiCommand::Union(r) => (AppKind::Union, r),
        CpsiCommand::Shares(r) => (AppKind::Shares, r),
    };
    let (a, side) = match roles.role {
        RoleArgs::Receive(a) => (a, Side::Receive),
        RoleArgs::Send(a) => (a, Side::Send),
    };
    let spec = a.csv.spec()?;
    let choices = Choices {
        side,
        app,
        threshold: a.threshold,
        reveal_to: a.reveal_to,
        ot: a.ot,
        epc: a.epc,
        value_columns: a.value_columns.len(),
        min_intersection: a.min_intersection,
        inner_product: a.inner_product,
        product_bits: u32::from(a.product_bits),
        max_peer_items: a.max_peer_items,
        key_format: spec.key_format(),
    };
    let (role, cfg) = choices.resolve(Spelling::Flags)?;
    if !a.job.one_shot {
        return job(&a, role, cfg);
    }
    let table = read_rows(&a.input, &spec)?;
    let (keys, rows_of_key) = table.unique_keys();
    let values = a
        .value_columns
        .iter()
        .map(|col| key_values(&table, &rows_of_key, col, &a.input))
        .collect::<Result<Vec<_>>>()?;
    let input = Input {
        keys: &keys,
        values: &values,
    };
    let out = facade::run_blocking(&a.peer.peer()?, role, input, &cfg, announce, &NoProgress)?;
    match a.json {
        true => println!(
            "{}",
            json(&out.output, cfg.app, out.bytes_sent, out.bytes_received)
        ),
        false => {
            report(&out, role);
            print_result(&out.output);
        }
    }
    write_output(&out.output, &a, &keys)
}

/// An application as a bucketed job: each row's value columns go with its
/// key into the buckets; the cardinality, sums or threshold are opened
/// once over the whole job, the shares and the union written to
/// `--output` bucket by bucket.
fn job(a: &CpsiArgs, role: Role, config: CpsiConfig) -> Result<()> {
    let mut spec = a.csv.spec()?;
    spec.value_columns = a
        .value_columns
        .iter()
        .map(|c| Column::parse(c))
        .collect::<Result<_, _>>()?;
    let input = JobInput {
        path: a.input.clone(),
        spec,
    };
    let app = config.app;
    let protocol = JobProtocol::Circuit {
        config,
        value_columns: u8::try_from(a.value_columns.len()).context("value columns")?,
    };
    // The shares (both sides) and the union (its learner, the sender)
    // are files.
    let file = match (app, role) {
        (App::Shares, _) | (App::Union, Role::Sender) => Some(
            a.output
                .as_ref()
                .context("the result is a file: give --output FILE")?,
        ),
        _ => None,
    };
    let out = run_job(&a.peer, &a.job, role.into(), input, protocol, file, a.json)?;
    let traffic = (out.bytes_sent, out.bytes_received);
    let output = match (out.written, file, out.circuit) {
        (Some(n), Some(path), _) => {
            let (what, words) = match app {
                App::Union => ("union_keys", "keys of the union"),
                _ => ("membership_shares", "membership shares"),
            };
            match a.json {
                true => println!(
                    r#"{{"application":"{}","{what}":{n},"bytes_sent":{},"bytes_received":{}}}"#,
                    app.name(),
                    traffic.0,
                    traffic.1
                ),
                false => println!("{n} {words} written to {}", path.display()),
            }
            return Ok(());
        }
        (_, _, Some(output)) => output,
        // The union's provider: the peer learned it.
        (_, _, None) => Output::Union(None),
    };
    match a.json {
        true => println!("{}", json(&output, app, traffic.0, traffic.1)),
        false => print_result(&output),
    }
    Ok(())
}

/// One value per distinct key: the sum (mod 2^64) of its rows' values.
pub(crate) fn key_values(
    table: &Table,
    rows_of_key: &[Vec<usize>],
    col: &str,
    input: &Path,
) -> Result<Vec<u64>> {
    let name = input.display().to_string();
    let at = table.column_position(&Column::parse(col)?, "value", &name)?;
    rows_of_key
        .iter()
        .map(|rows| {
            rows.iter().try_fold(0u64, |sum, &r| {
                let row = &table.rows[r];
                let field = row.record.get(at).with_context(|| {
                    format!("{name}: row {} has no value column {col}", row.row)
                })?;
                let text = std::str::from_utf8(field).unwrap_or("").trim();
                let v: u64 = text.parse().with_context(|| {
                    format!(
                        "{name}: row {}: value {:?} in column {col} is not an unsigned integer",
                        row.row,
                        String::from_utf8_lossy(field)
                    )
                })?;
                Ok(sum.wrapping_add(v))
            })
        })
        .collect()
}

fn report(out: &Outcome, role: Role) {
    let p = &out.phases;
    let step = |s: psikit_protocols::cpsi::Step| crate::report::secs(s.time);
    println!(
        "{}: circuit PSI over {} bins, {}-bit tags compared on {} bits: hashing {}, OPPRF {}, EPC {}, triples {}, equality {}, application {}; sent {}, received {}",
        match role {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
        },
        p.bins,
        p.tag_bits,
        p.compared_bits,
        step(p.hashing),
        step(p.opprf),
        step(p.epc),
        step(p.triples),
        step(p.equality),
        step(p.application),
        crate::report::bytes(out.bytes_sent),
        crate::report::bytes(out.bytes_received)
    );
}

/// What the party learned, in words.
fn print_result(output: &Output) {
    match output {
        Output::Cardinality(Some(c)) => println!("intersection size: {c}"),
        Output::Sum(Some(s)) => {
            println!("intersection size: {}", s.cardinality);
            for (who, sums) in [
                ("sender", &s.sender_values),
                ("receiver", &s.receiver_values),
            ] {
                for (j, v) in sums.iter().enumerate() {
                    println!(
                        "sum of the {who}'s value column {} over the intersection: {v}",
                        j + 1
                    );
                }
            }
            if let Some(v) = s.inner_product {
                println!("inner product over the intersection: {v}");
            }
        }
        Output::SumWithheld(min) => {
            println!("the intersection has fewer than {min} items: no sum revealed")
        }
        Output::Threshold(Some(b)) => println!(
            "the intersection reaches the threshold: {}",
            if *b { "yes" } else { "no" }
        ),
        Output::Union(Some(items)) => {
            println!(
                "the peer holds {} keys outside the intersection",
                items.len()
            )
        }
        Output::Shares(s) => println!("{} membership shares", s.membership.len()),
        _ => println!("the peer learned the result"),
    }
}

/// The result as one JSON object. `"learned": false` at a party the
/// result was not revealed to.
fn json(output: &Output, app: App, sent: u64, received: u64) -> String {
    use serde_json::json;
    let mut result = match output {
        Output::Cardinality(Some(c)) => json!({"intersection_size": c}),
        Output::Sum(Some(s)) => {
            let mut sum = json!({
                "intersection_size": s.cardinality,
                "sender_sums": s.sender_values,
                "receiver_sums": s.receiver_values,
            });
            if let Some(v) = s.inner_product {
                sum["inner_product"] = v.into();
            }
            sum
        }
        Output::SumWithheld(min) => json!({"withheld": true, "min_intersection": min}),
        Output::Threshold(Some(b)) => json!({"threshold_reached": b}),
        Output::Union(Some(items)) => json!({"peer_keys_outside_intersection": items.len()}),
        Output::Shares(s) => json!({"membership_shares": s.membership.len()}),
        _ => json!({"learned": false}),
    };
    result["application"] = app.name().into();
    result["bytes_sent"] = sent.into();
    result["bytes_received"] = received.into();
    result.to_string()
}

fn write_output(out: &Output, a: &CpsiArgs, keys: &[Vec<u8>]) -> Result<()> {
    let path = match (out, &a.output) {
        (Output::Union(Some(_)) | Output::Shares(_), None) => {
            bail!("the result is a file: give --output FILE")
        }
        (Output::Union(Some(_)) | Output::Shares(_), Some(p)) => p,
        _ => return Ok(()),
    };
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    match out {
        Output::Union(Some(extra)) => {
            writeln!(w, "key")?;
            for k in keys.iter().chain(extra) {
                write_field(&mut w, k)?;
                writeln!(w)?;
            }
            println!(
                "{} keys of the union written to {}",
                keys.len() + extra.len(),
                path.display()
            );
        }
        Output::Shares(s) => write_shares(&mut w, s, keys)?,
        _ => {}
    }
    w.flush()?;
    Ok(())
}

/// One row per bin: `bin,share[,value_share_j...][,key]` (shares of the
/// sender's value columns; the key at the receiver, which knows its item
/// in each bin).
fn write_shares(w: &mut impl Write, s: &Shares, keys: &[Vec<u8>]) -> Result<()> {
    write!(w, "bin,share")?;
    for j in 1..=s.sender_values.len() {
        write!(w, ",value_share_{j}")?;
    }
    if s.item_of_bin.is_some() {
        write!(w, ",key")?;
    }
    writeln!(w)?;
    for bin in 0..s.membership.len() {
        write!(w, "{bin},{}", u8::from(s.membership.get(bin)))?;
        for column in &s.sender_values {
            write!(w, ",{}", column[bin])?;
        }
        if let Some(items) = &s.item_of_bin {
            write!(w, ",")?;
            if let Some(i) = items[bin] {
                write_field(w, &keys[i as usize])?;
            }
        }
        writeln!(w)?;
    }
    Ok(())
}

/// A key as one CSV field (quoted when needed; composite keys keep their
/// binary encoding, so write single-column keys for readable output).
fn write_field(w: &mut impl Write, key: &[u8]) -> Result<()> {
    let mut field = Vec::new();
    psikit_protocols::io::encode_label(&[key], &mut field);
    w.write_all(&field)?;
    Ok(())
}
