//! `psikit`: the command-line front end. It only calls the library crates'
//! public APIs; every protocol step lives in `psikit-protocols`.

// Helpers shared by several families go unused when a build leaves some
// out; the default build (every family) still checks for dead code.
#![cfg_attr(
    not(all(
        feature = "filter",
        feature = "he",
        feature = "rr16",
        feature = "vole",
        feature = "cpsi"
    )),
    allow(dead_code)
)]

mod args;
mod bench;
mod config;
#[cfg(feature = "cpsi")]
mod cpsi_cmd;
mod demo;
#[cfg(feature = "filter")]
mod filter_cmd;
#[cfg(feature = "he")]
mod he_cmd;
mod matches;
mod progress;
#[cfg(feature = "two-party")]
mod psi_cmd;
mod report;
#[cfg(feature = "rr16")]
mod rr16_cmd;
#[cfg(feature = "unbalanced")]
mod serve;

use clap::{CommandFactory, Parser, Subcommand};

/// Big blocks on transparent huge pages (see `memory::HugePages`).
#[global_allocator]
static ALLOCATOR: psikit_protocols::memory::HugePages = psikit_protocols::memory::HugePages;

/// psikit: private set intersection you can deploy.
#[derive(Parser)]
#[command(name = "psikit", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the protocols end to end on generated data and check the results.
    Demo(demo::DemoArgs),
    /// Unbalanced PSI with a DH OPRF and an updatable cuckoo filter.
    #[cfg(feature = "filter")]
    #[command(subcommand)]
    Filter(filter_cmd::FilterCommand),
    /// Balanced two-party PSI: VOLE-PSI (default) or RR16.
    #[cfg(feature = "two-party")]
    #[command(subcommand)]
    Psi(psi_cmd::PsiCommand),
    /// Two-party malicious-secure PSI from OT extension and garbled Bloom
    /// filters (Rindal-Rosulek).
    #[cfg(feature = "rr16")]
    #[command(subcommand)]
    Rr16(rr16_cmd::Rr16Command),
    /// Circuit PSI: compute on the intersection without revealing it
    /// (cardinality, sum, threshold, union, shares).
    #[cfg(feature = "cpsi")]
    #[command(subcommand)]
    Cpsi(cpsi_cmd::CpsiCommand),
    /// Unbalanced labeled PSI from homomorphic encryption (APSI design).
    #[cfg(feature = "he")]
    #[command(subcommand)]
    He(he_cmd::HeCommand),
    /// Run the long-running PSI server.
    #[cfg(feature = "unbalanced")]
    Serve(serve::ServeArgs),
    /// Measure performance and print the figures.
    Bench(bench::BenchArgs),
}

fn main() {
    let args = config::expand(&Cli::command(), std::env::args_os().collect());
    let cli = match args {
        Ok(args) => Cli::parse_from(args),
        Err(e) => {
            eprintln!("psikit: error: {}", one_line(&e));
            std::process::exit(2);
        }
    };
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        #[cfg(feature = "filter")]
        Command::Filter(c) => filter_cmd::run(c),
        #[cfg(feature = "two-party")]
        Command::Psi(c) => psi_cmd::run(c),
        #[cfg(feature = "rr16")]
        Command::Rr16(c) => rr16_cmd::run(c),
        #[cfg(feature = "cpsi")]
        Command::Cpsi(c) => cpsi_cmd::run(c),
        #[cfg(feature = "he")]
        Command::He(c) => he_cmd::run(c),
        #[cfg(feature = "unbalanced")]
        Command::Serve(a) => serve::run(a),
        Command::Bench(a) => bench::run(a),
    };
    if let Err(e) = result {
        eprintln!("psikit: error: {}", one_line(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line, each said once (the protocols
/// crate's `one_line`, over anyhow's chain).
fn one_line(e: &anyhow::Error) -> String {
    let e: &(dyn std::error::Error + 'static) = e.as_ref();
    psikit_protocols::one_line(e)
}

#[cfg(test)]
mod tests {
    use super::one_line;

    /// The annotated example in the docs names only real flags, and all
    /// of them.
    #[cfg(feature = "unbalanced")]
    #[test]
    fn the_example_config_file_is_whole_and_valid() {
        use clap::CommandFactory;
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/serve.example.toml");
        let args = ["psikit", "serve", "--config", example].map(std::ffi::OsString::from);
        let expanded = super::config::expand(&super::Cli::command(), args.to_vec());
        let expanded = expanded.expect("the example is valid");
        assert!(expanded.len() > 20, "{expanded:?}");
        let text = std::fs::read_to_string(example).expect("read the example");
        let command = super::Cli::command();
        let serve = command.find_subcommand("serve").expect("serve");
        for arg in serve.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "config" | "check" | "help") {
                continue;
            }
            assert!(
                text.contains(&format!("{long} = ")),
                "the example lacks `{long}`"
            );
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner detail")]
    struct Inner;

    #[test]
    fn causes_are_said_once() {
        let e = anyhow::Error::new(Outer(Inner));
        assert_eq!(one_line(&e), "outer: inner detail");
        let e = anyhow::Error::new(Inner).context("reading x.csv");
        assert_eq!(one_line(&e), "reading x.csv: inner detail");
    }
}
