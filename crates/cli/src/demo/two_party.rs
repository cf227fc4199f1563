//! The balanced two-party demos' shared run: two generated files, the
//! sender listening on a free loopback port and the receiver connecting,
//! the receiver's result checked and revealed to the sender.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use psikit_protocols::balanced::{self, Role, Settings};
use psikit_protocols::common::connect::{runtime, Peer, ServerAddr};
use psikit_protocols::io::{read_rows, write_overlapping_pair, Table};
use psikit_protocols::jobs::{self, JobInput, JobOptions, JobProtocol};
use psikit_protocols::NoProgress;

use super::args::DemoArgs;
use super::common::{check, email_spec, loopback_listener, matched_ids};
use crate::psi_cmd::phase_lines;
use crate::report;

/// Two generated files of the client's size and their expected overlap.
pub(super) struct Pair {
    sender_csv: PathBuf,
    receiver_csv: PathBuf,
    sender_keys: Vec<Vec<u8>>,
    receiver_table: Table,
    receiver_keys: Vec<Vec<u8>>,
    receiver_rows: Vec<Vec<usize>>,
    expected: BTreeSet<u64>,
}

impl Pair {
    pub(super) fn generate(a: &DemoArgs, dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let (sender_csv, receiver_csv) = (dir.join("sender.csv"), dir.join("receiver.csv"));
        let n = a.client_items.max(1);
        let overlap = a.overlap.min(n);
        let plan = write_overlapping_pair(&sender_csv, &receiver_csv, n, n, overlap, a.seed)?;
        println!("generated two files of {n} rows with {overlap} in common");
        let spec = email_spec();
        let (sender_keys, _) = read_rows(&sender_csv, &spec)?.unique_keys();
        let receiver_table = read_rows(&receiver_csv, &spec)?;
        let (receiver_keys, receiver_rows) = receiver_table.unique_keys();
        Ok(Self {
            sender_csv,
            receiver_csv,
            sender_keys,
            receiver_table,
            receiver_keys,
            receiver_rows,
            expected: plan.common_ids.iter().copied().collect(),
        })
    }

    /// Runs under `settings` (which must reveal the result to the sender)
    /// and checks both parties' outputs.
    pub(super) fn run(&self, name: &str, settings: &Settings) -> Result<()> {
        let t = Instant::now();
        let (sender_out, receiver_out) = runtime()?.block_on(async {
            // The sender listens on a free port and tells the receiver
            // where, as two parties on two machines would.
            let (port_tx, port_rx) = tokio::sync::oneshot::channel::<String>();
            let listen = loopback_listener();
            let (keys, settings2) = (self.sender_keys.clone(), settings.clone());
            let sender = tokio::spawn(async move {
                let listening = |addr: &str| {
                    let _ = port_tx.send(addr.to_string());
                };
                balanced::run(
                    &listen,
                    Role::Sender,
                    &keys,
                    &settings2,
                    listening,
                    &NoProgress,
                )
                .await
            });
            let addr = port_rx.await.context("the sender did not listen")?;
            let connect = Peer::Connect(ServerAddr::plain(addr));
            let receiver = balanced::run(
                &connect,
                Role::Receiver,
                &self.receiver_keys,
                settings,
                |_| {},
                &NoProgress,
            )
            .await?;
            anyhow::Ok((sender.await??, receiver))
        })?;
        println!("{name}: done in {}", report::secs(t.elapsed()));
        for line in phase_lines(&receiver_out) {
            println!("  receiver: {line}");
        }
        let matches = receiver_out.matches.as_deref().unwrap_or_default();
        check(
            &format!("{name} receiver"),
            &matched_ids(&self.receiver_table, &self.receiver_rows, matches)?,
            &self.expected,
        )?;
        let revealed = (sender_out.matches.iter().flatten())
            .filter(|m| **m)
            .count();
        ensure!(
            revealed == self.expected.len(),
            "the {name} sender was told {revealed} matches"
        );
        Ok(())
    }

    /// The same files as a bucketed job (what `psikit psi` runs by
    /// default) in `buckets` buckets or more, job directories under `dir`;
    /// checks the receiver's output file.
    pub(super) fn run_job(&self, dir: &Path, settings: &Settings, buckets: u64) -> Result<()> {
        let t = Instant::now();
        let bucket_items = (self.receiver_keys.len() as u64).div_ceil(buckets).max(1);
        let options = |role: &str| JobOptions {
            max_bucket_items: Some(bucket_items),
            output: (role == "receiver").then(|| dir.join("job-matches.csv")),
            ..JobOptions::new(
                JobProtocol::Balanced(settings.clone()),
                dir.join(format!("{role}-job")),
            )
        };
        let input = |path: &PathBuf| JobInput {
            path: path.clone(),
            spec: email_spec(),
        };
        let (port_tx, port_rx) = std::sync::mpsc::channel::<String>();
        let (s_in, s_opts) = (input(&self.sender_csv), options("sender"));
        let sender = std::thread::spawn(move || {
            let listen = loopback_listener();
            let listening = |addr: &str| {
                let _ = port_tx.send(addr.to_string());
            };
            jobs::run_blocking(
                &listen,
                Role::Sender,
                &s_in,
                &s_opts,
                listening,
                &NoProgress,
            )
        });
        let addr = port_rx.recv().context("the job's sender did not listen")?;
        let connect = Peer::Connect(ServerAddr::plain(addr));
        let r_opts = options("receiver");
        let r_in = input(&self.receiver_csv);
        let out = jobs::run_blocking(
            &connect,
            Role::Receiver,
            &r_in,
            &r_opts,
            |_| {},
            &NoProgress,
        )?;
        sender
            .join()
            .map_err(|_| anyhow::anyhow!("the job's sender panicked"))??;
        println!(
            "job: {} buckets of {} items, done in {}",
            out.shape.buckets,
            out.shape.receiver_capacity,
            report::secs(t.elapsed())
        );
        let written = r_opts.output.context("the receiver's output")?;
        let rows = read_rows(&written, &email_spec())?;
        let ids = (rows.rows.iter())
            .map(|r| Ok(std::str::from_utf8(r.record.get(0).context("row without id")?)?.parse()?))
            .collect::<Result<BTreeSet<u64>>>()?;
        check("job receiver", &ids, &self.expected)
    }
}
