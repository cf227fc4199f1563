//! RR16's demo: both modes between two listening/connecting parties.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use psikit_protocols::common::connect::{runtime, Limits, Peer, ServerAddr};
use psikit_protocols::io::{read_rows, write_overlapping_pair};
use psikit_protocols::rr16::{self, Rr16Config};

use super::{check, email_spec, matched_ids, DemoArgs};
use crate::matches::unique_keys;
use crate::report;
use crate::rr16_cmd::print_run;

/// Both RR16 modes over loopback TCP on two generated files of the
/// client's size, the receiver's result checked and revealed to the sender.
pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== rr16: malicious-secure PSI, OT extension + garbled Bloom filter ==");
    std::fs::create_dir_all(dir)?;
    let (sender_csv, receiver_csv) = (dir.join("sender.csv"), dir.join("receiver.csv"));
    let n = a.client_items.max(1);
    let overlap = a.overlap.min(n);
    let plan = write_overlapping_pair(&sender_csv, &receiver_csv, n, n, overlap, a.seed)?;
    println!("generated two files of {n} rows with {overlap} in common");
    let spec = email_spec();
    let sender_table = read_rows(&sender_csv, &spec)?;
    let receiver_table = read_rows(&receiver_csv, &spec)?;
    let (sender_keys, _) = unique_keys(&sender_table);
    let (receiver_keys, receiver_rows) = unique_keys(&receiver_table);
    let expected: BTreeSet<u64> = plan.common_ids.iter().copied().collect();
    for malicious in [true, false] {
        let cfg = Rr16Config {
            malicious,
            reveal_to_sender: true,
            ..Rr16Config::default()
        };
        let t = Instant::now();
        let (sender_out, receiver_out) = runtime()?.block_on(async {
            // The sender listens on a free port and tells the receiver
            // where, as two parties on two machines would.
            let (port_tx, port_rx) = tokio::sync::oneshot::channel::<String>();
            let listen = Peer::Listen {
                addr: "127.0.0.1:0".into(),
                tls: None,
                limits: Limits::default(),
                accept_timeout: None,
            };
            let (keys, cfg2) = (sender_keys.clone(), cfg.clone());
            let sender = tokio::spawn(async move {
                rr16::facade::send(&listen, &keys, &cfg2, |addr| {
                    let _ = port_tx.send(addr.to_string());
                })
                .await
            });
            let addr = port_rx.await.context("the sender did not listen")?;
            let connect = Peer::Connect(ServerAddr::plain(addr));
            let receiver = rr16::facade::receive(&connect, &receiver_keys, &cfg, |_| {}).await?;
            anyhow::Ok((sender.await??, receiver))
        })?;
        let mode = if malicious {
            "malicious"
        } else {
            "semi-honest"
        };
        println!("{mode}: done in {}", report::secs(t.elapsed()));
        let r = &receiver_out;
        print_run(
            "  receiver",
            &r.params,
            &r.phases,
            r.bytes_sent,
            r.bytes_received,
        );
        check(
            &format!("{mode} receiver"),
            &matched_ids(&receiver_table, &receiver_rows, &r.matches)?,
            &expected,
        )?;
        let revealed = sender_out.revealed.as_ref().map_or(0, Vec::len);
        ensure!(
            revealed == expected.len(),
            "the sender was told {revealed} matches"
        );
    }
    Ok(())
}
