//! The receiver: holds the cuckoo table, evaluates the OPPRF at its item
//! of each bin, and follows every round of the circuit.

use psikit_structures::okvs::{Okvs, OkvsParams};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;

use super::apps::Fill;
use super::config::{CpsiConfig, Input, UnionItems};
use super::hashing::{self, CuckooBins};
use super::messages::Seeds;
use super::outcome::{check_opened, outcome, Meter, Outcome, Output, Phases, Shares};
use super::rng::rng;
use super::rot::Side;
use super::steps::{
    aggregate, compare, hello, prepare_ahead, session_id, Finish, STAGE_COMPARE, STAGE_HASHING,
    STAGE_OPPRF, STAGE_RESULT,
};
use super::vocabulary::{App, Role};
use super::{apps, opprf};
use crate::common::Progress;
use crate::error::Error;
use crate::vole_psi::oprf::item_keys;
use psikit_ot::silent::SilentReceiver;
use psikit_ot::Security;

/// Runs circuit PSI as the receiver (the cuckoo-table side),
/// telling `progress` its phases.
pub(super) async fn run_receiver(
    ch: &mut Channel,
    input: Input<'_>,
    cfg: &CpsiConfig,
    progress: &dyn Progress,
    finish: Finish,
    union: Option<UnionItems<'_>>,
) -> Result<(Outcome, Option<Vec<u64>>), Error> {
    let start = (ch.bytes_sent(), ch.bytes_received());
    let mut meter = Meter::start(ch);
    let mut phases = Phases::default();
    check_product_factors(&input, cfg)?;
    let peer = hello(ch, cfg, &input, union).await?;
    progress.stage(STAGE_HASHING, None);
    let n_r = input.keys.len();
    let sigma = cfg.statistical_bits;
    let m = hashing::bins(n_r, sigma)?;
    let ell = hashing::tag_bits(m, sigma);
    (phases.bins, phases.tag_bits) = (m, ell);
    let seeds = Seeds {
        hashing: OsRng.gen(),
        okvs: OsRng.gen(),
    };
    ch.send_msg(&seeds).await?;
    // The OPRF's base OTs and the start of its VOLE first (public sizes
    // only): the sender makes the VOLE while this party hashes its items.
    let sid = session_id(&seeds, peer.set_size, n_r as u64);
    let okvs = Okvs::new(OkvsParams::with_security(m, sigma)?, seeds.okvs);
    let mut vole = SilentReceiver::setup(
        ch,
        &sid,
        Security::SemiHonest,
        cfg.ext_config()?,
        &mut OsRng,
    )
    .await?;
    let capacity = hashing::HASHES as usize * peer.set_size as usize;
    let bits = opprf::oprf_bits(capacity as u64, sigma);
    let pending = opprf::oprf_start(ch, &mut vole, &okvs, bits).await?;
    let keys = item_keys(input.keys);
    let mut rng = rng()?;
    let table = CuckooBins::build(&keys, m, seeds.hashing, &mut rng)?;
    let bin_keys = table.opprf_keys(&keys, &mut rng);
    phases.hashing = meter.mark(ch);
    progress.stage(STAGE_OPPRF, None);

    let (f, times) = opprf::oprf_receive(ch, pending, &okvs, &bin_keys, bits).await?;
    phases.silent += times;
    let mut silent = Side::SilentReceiver(vole);
    let prepared = prepare_ahead(cfg, &mut silent, m, ell)?;
    let k_s = usize::from(peer.value_columns);
    let programmed = opprf::receive_program(ch, &bin_keys, &f, capacity, ell, k_s, sigma).await?;
    drop((f, bin_keys));
    phases.opprf = meter.mark(ch);
    progress.stage(STAGE_COMPARE, None);

    let mut c = compare(
        ch,
        cfg,
        &sid,
        programmed.tags,
        ell,
        silent,
        prepared,
        &mut meter,
        &mut phases,
    )
    .await?;

    progress.stage(STAGE_RESULT, None);
    let me = Role::Receiver;
    let (output, deferred) = match cfg.app {
        App::Shares => (
            Output::Shares(Shares {
                membership: c.shares,
                item_of_bin: Some(table.item_of_bin),
                sender_values: programmed.values,
            }),
            None,
        ),
        App::Union => {
            // One-shot, every item reveals itself; in a job's bucket, its
            // encoded key, and the padding nothing.
            let (payloads, width) = match union {
                Some(u) => (u.payloads, u.width),
                None => (
                    input.keys,
                    input.keys.iter().map(Vec::len).max().unwrap_or(0),
                ),
            };
            let items: Vec<Fill<'_>> = table
                .item_of_bin
                .iter()
                .map(|item| match item {
                    None => Fill::Empty,
                    Some(i) => payloads
                        .get(*i as usize)
                        .map_or(Fill::Padding, |p| Fill::Item(p)),
                })
                .collect();
            apps::union_provide(ch, &mut c.rots, &c.shares, &items, width).await?;
            (Output::Union(None), None)
        }
        _ => {
            // Its own values per bin (zero in empty bins).
            let own: Vec<Vec<u64>> = input
                .values
                .iter()
                .map(|v| {
                    let of_bin = |item: &Option<u32>| item.map_or(0, |i| v[i as usize]);
                    table.item_of_bin.iter().map(of_bin).collect()
                })
                .collect();
            let weights: Vec<&[u64]> = programmed
                .values
                .iter()
                .chain(&own)
                .map(Vec::as_slice)
                .collect();
            let columns = (k_s, input.values.len());
            aggregate(ch, &mut c, me, cfg, &weights, columns, finish).await?
        }
    };
    let output = check_opened(output, peer.set_size, n_r as u64)?;
    phases.application = meter.mark(ch);
    Ok((outcome(ch, output, phases, start), deferred))
}

/// The inner product takes the receiver's first value column bit by bit:
/// each value must fit the agreed bits.
fn check_product_factors(input: &Input<'_>, cfg: &CpsiConfig) -> Result<(), Error> {
    match cfg.oversized_factor(input.values) {
        Some(k) => Err(Error::Config(format!(
            "the inner product takes values below 2^{}; {} is not (raise the product bits)",
            cfg.product_bits, input.values[0][k]
        ))),
        None => Ok(()),
    }
}
