//! Circuit PSI's demo: every application over loopback TCP on two
//! generated files, each result checked against the plaintext computation.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use psikit_protocols::common::connect::{runtime, Peer, ServerAddr};
use psikit_protocols::cpsi::facade;
use psikit_protocols::cpsi::{
    AppKind, Choices, Input, Outcome, Output, Reveal, Side, Spelling, Sums,
};
use psikit_protocols::io::{read_rows, write_overlapping_pair};
use psikit_protocols::NoProgress;

use super::args::DemoArgs;
use super::common::{email_spec, loopback_listener};
use crate::cpsi_cmd::key_values;
use crate::report;

/// One party's distinct keys and the sum of its rows' ids per key.
struct Party {
    keys: Vec<Vec<u8>>,
    values: Vec<u64>,
}

impl Party {
    fn read(path: &Path) -> Result<Self> {
        let table = read_rows(path, &email_spec())?;
        let (keys, rows) = table.unique_keys();
        let values = key_values(&table, &rows, "id", path)?;
        Ok(Self { keys, values })
    }
}

pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== cpsi: circuit PSI (cardinality, sum, threshold, union, shares) ==");
    std::fs::create_dir_all(dir)?;
    let (s_csv, r_csv) = (dir.join("sender.csv"), dir.join("receiver.csv"));
    let n = a.client_items.max(1);
    let overlap = a.overlap.min(n);
    write_overlapping_pair(&s_csv, &r_csv, n, n, overlap, a.seed)?;
    println!("generated two files of {n} rows with {overlap} in common");
    let (s, r) = (Party::read(&s_csv)?, Party::read(&r_csv)?);

    // The plaintext truth.
    let held: HashMap<&Vec<u8>, u64> = s.keys.iter().zip(&s.values).map(|(k, v)| (k, *v)).collect();
    let common: Vec<usize> = (0..r.keys.len())
        .filter(|&i| held.contains_key(&r.keys[i]))
        .collect();
    let cardinality = common.len() as u64;
    let sums = Sums {
        cardinality,
        sender_values: vec![common
            .iter()
            .fold(0u64, |t, &i| t.wrapping_add(held[&r.keys[i]]))],
        receiver_values: vec![common
            .iter()
            .fold(0u64, |t, &i| t.wrapping_add(r.values[i]))],
        inner_product: Some(common.iter().fold(0u64, |t, &i| {
            t.wrapping_add(held[&r.keys[i]].wrapping_mul(r.values[i]))
        })),
    };
    let mut outside: Vec<Vec<u8>> = (0..r.keys.len())
        .filter(|i| !common.contains(i))
        .map(|i| r.keys[i].clone())
        .collect();
    outside.sort();

    let card = |o: &Outcome| o.output.clone();
    let (_, ro) = pair(&s, &r, Choices::new(Side::Send, AppKind::Cardinality))?;
    ensure!(
        card(&ro) == Output::Cardinality(Some(cardinality)),
        "cardinality {:?}",
        ro.output
    );
    println!("cardinality: {cardinality}, equal to the plaintext");
    // The sum run also takes the inner product of the two id columns.
    let sum = Choices {
        value_columns: 1,
        inner_product: true,
        product_bits: 64,
        ..Choices::new(Side::Send, AppKind::Sum)
    };
    let (_, ro) = pair(&s, &r, sum)?;
    ensure!(
        ro.output == Output::Sum(Some(sums.clone())),
        "sums {:?}, expected {sums:?}",
        ro.output
    );
    println!(
        "sum: {cardinality} items, sender's ids sum to {}, receiver's to {}, their products to {}, equal to the plaintext",
        sums.sender_values[0],
        sums.receiver_values[0],
        sums.inner_product.unwrap_or(0)
    );
    for t in [cardinality, cardinality + 1] {
        let threshold = Choices {
            threshold: Some(t),
            ..Choices::new(Side::Send, AppKind::Threshold)
        };
        let (_, ro) = pair(&s, &r, threshold)?;
        ensure!(
            ro.output == Output::Threshold(Some(cardinality >= t)),
            "threshold {t}"
        );
        println!("threshold {t}: {}, as in the plaintext", cardinality >= t);
    }
    let union = Choices {
        reveal_to: Reveal::Sender,
        ..Choices::new(Side::Send, AppKind::Union)
    };
    let (so, _) = pair(&s, &r, union)?;
    let Output::Union(Some(mut extra)) = so.output else {
        anyhow::bail!("the union's learner got no items");
    };
    extra.sort();
    ensure!(extra == outside, "the union differs from the plaintext");
    println!(
        "union: {} keys ({} of the sender's, {} more of the receiver's), equal to the plaintext",
        s.keys.len() + extra.len(),
        s.keys.len(),
        extra.len()
    );
    let (so, ro) = pair(&s, &r, Choices::new(Side::Send, AppKind::Shares))?;
    let (Output::Shares(ss), Output::Shares(rs)) = (so.output, ro.output) else {
        anyhow::bail!("shares expected");
    };
    let bins = rs.item_of_bin.context("the receiver's bins")?;
    let members: HashSet<usize> = bins
        .iter()
        .enumerate()
        .filter(|(b, _)| ss.membership.get(*b) ^ rs.membership.get(*b))
        .filter_map(|(_, item)| item.map(|i| i as usize))
        .collect();
    ensure!(
        members == common.iter().copied().collect::<HashSet<usize>>(),
        "the shares do not recombine to the intersection"
    );
    println!(
        "shares: {} bins, recombined to the plaintext intersection",
        bins.len()
    );
    Ok(())
}

/// One run over loopback TCP of what the send party `chose` (the receive
/// party chooses the same): the send party listens, the receive party
/// connects; returns both outcomes.
fn pair(s: &Party, r: &Party, chose: Choices) -> Result<(Outcome, Outcome)> {
    let t = Instant::now();
    let values = chose.value_columns > 0;
    let (s_role, s_cfg) = chose.resolve(Spelling::Flags)?;
    let receive = Choices {
        side: Side::Receive,
        ..chose
    };
    let (r_role, cfg) = receive.resolve(Spelling::Flags)?;
    let app = cfg.app;
    let out = runtime()?.block_on(async {
        let (port_tx, port_rx) = tokio::sync::oneshot::channel::<String>();
        let listen = loopback_listener();
        let (keys, vals) = (s.keys.clone(), [s.values.clone()]);
        let sender = tokio::spawn(async move {
            let input = Input {
                keys: &keys,
                values: if values { &vals[..] } else { &[] },
            };
            let listening = |addr: &str| {
                let _ = port_tx.send(addr.to_string());
            };
            facade::run(&listen, s_role, input, &s_cfg, listening, &NoProgress).await
        });
        let addr = port_rx.await.context("the sender did not listen")?;
        let input = Input {
            keys: &r.keys,
            values: if values {
                std::slice::from_ref(&r.values)
            } else {
                &[]
            },
        };
        let connect = Peer::Connect(ServerAddr::plain(addr));
        let receiver = facade::run(&connect, r_role, input, &cfg, |_| {}, &NoProgress).await?;
        anyhow::Ok((sender.await??, receiver))
    })?;
    println!(
        "{}: done in {}, {} sent by the receiver, {} by the sender",
        app.name(),
        report::secs(t.elapsed()),
        report::bytes(out.1.bytes_sent),
        report::bytes(out.0.bytes_sent)
    );
    Ok(out)
}
