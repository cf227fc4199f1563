//! The sender: holds the simple table, programs the OPPRF with a random
//! tag per bin, and leads every round of the circuit.

use psikit_structures::okvs::{Okvs, OkvsParams};
use psikit_transport::Channel;
use rand::Rng;

use super::apps;
use super::config::{CpsiConfig, Input};
use super::hashing::{self, bin_key};
use super::messages::Seeds;
use super::opprf::{self, Program};
use super::outcome::{check_opened, outcome, Meter, Outcome, Output, Phases, Shares};
use super::rng::rng;
use super::rot::Side;
use super::steps::{
    aggregate, compare, hello, prepare_ahead, session_id, Finish, STAGE_COMPARE, STAGE_HASHING,
    STAGE_OPPRF, STAGE_RESULT,
};
use super::vocabulary::{App, Role};
use crate::common::Progress;
use crate::error::Error;
use crate::vole_psi::oprf::item_keys;
use psikit_ot::silent::SilentSender;
use psikit_ot::Security;
use rand::rngs::OsRng;

/// Runs circuit PSI as the sender (the simple-table side),
/// telling `progress` its phases.
pub(super) async fn run_sender(
    ch: &mut Channel,
    input: Input<'_>,
    cfg: &CpsiConfig,
    progress: &dyn Progress,
    finish: Finish,
) -> Result<(Outcome, Option<Vec<u64>>), Error> {
    let start = (ch.bytes_sent(), ch.bytes_received());
    let mut meter = Meter::start(ch);
    let mut phases = Phases::default();
    let peer = hello(ch, cfg, &input, None).await?;
    progress.stage(STAGE_HASHING, None);
    let n_s = input.keys.len();
    let sigma = cfg.statistical_bits;
    let m = hashing::bins(peer.set_size as usize, sigma)?;
    let ell = hashing::tag_bits(m, sigma);
    (phases.bins, phases.tag_bits) = (m, ell);
    let seeds: Seeds = ch.recv_msg(()).await?;
    // The OPRF's base OTs and VOLE first: they need only public sizes, and
    // the receiver hashes its items meanwhile (while it encodes its table,
    // this party hashes its own).
    let sid = session_id(&seeds, n_s as u64, peer.set_size);
    let okvs = Okvs::new(OkvsParams::with_security(m, sigma)?, seeds.okvs);
    let mut vole = SilentSender::setup(
        ch,
        &sid,
        Security::SemiHonest,
        cfg.ext_config()?,
        &mut OsRng,
    )
    .await?;
    let programmed = u64::from(hashing::HASHES) * n_s as u64;
    let bits = opprf::oprf_bits(programmed, sigma);
    let oprf = opprf::oprf_vole(ch, &mut vole, &okvs, bits).await?;
    phases.silent += vole.last_times();
    let keys = item_keys(input.keys);
    let simple = hashing::simple_table(&keys, m, seeds.hashing);
    phases.hashing = meter.mark(ch);
    progress.stage(STAGE_OPPRF, None);

    // The comparison's first small VOLEs while the receiver encodes its
    // masked table.
    let mut silent = Side::SilentSender(vole);
    let prepared = prepare_ahead(cfg, &mut silent, m, ell)?;
    let key = opprf::oprf_send(ch, oprf, okvs).await?;
    let mut rng = rng()?;
    let tag_mask = (1u128 << ell) - 1;
    let tags: Vec<u128> = (0..m).map(|_| rng.gen::<u128>() & tag_mask).collect();
    // The sender's value shares: it programs `value + w_bin` and keeps
    // `-w_bin`, per column.
    let masks: Vec<Vec<u64>> = input
        .values
        .iter()
        .map(|_| (0..m).map(|_| rng.gen()).collect())
        .collect();
    let bin_keys: Vec<u128> = simple
        .iter()
        .map(|&(bin, i)| bin_key(keys[i as usize], bin))
        .collect();
    let bin_tags: Vec<u128> = simple.iter().map(|&(bin, _)| tags[bin as usize]).collect();
    let bin_values: Vec<Vec<u64>> = input
        .values
        .iter()
        .zip(&masks)
        .map(|(v, w)| {
            simple
                .iter()
                .map(|&(bin, i)| v[i as usize].wrapping_add(w[bin as usize]))
                .collect()
        })
        .collect();
    let program = Program {
        keys: &bin_keys,
        tags: &bin_tags,
        values: &bin_values,
    };
    let capacity = hashing::HASHES as usize * n_s;
    opprf::program(ch, &key, &program, capacity, ell, sigma).await?;
    drop((key, bin_keys, bin_tags, bin_values));
    phases.opprf = meter.mark(ch);
    progress.stage(STAGE_COMPARE, None);

    let mut c = compare(
        ch,
        cfg,
        &sid,
        tags,
        ell,
        silent,
        prepared,
        &mut meter,
        &mut phases,
    )
    .await?;

    let my_values: Vec<Vec<u64>> = masks
        .iter()
        .map(|w| w.iter().map(|x| x.wrapping_neg()).collect())
        .collect();
    progress.stage(STAGE_RESULT, None);
    let me = Role::Sender;
    let (output, deferred) = match cfg.app {
        App::Shares => (
            Output::Shares(Shares {
                membership: c.shares,
                item_of_bin: None,
                sender_values: my_values,
            }),
            None,
        ),
        App::Union => {
            let width = usize::from(peer.max_item_len);
            let items = apps::union_learn(ch, &mut c.rots, &c.shares, width).await?;
            (Output::Union(Some(items)), None)
        }
        _ => {
            let weights: Vec<&[u64]> = my_values.iter().map(Vec::as_slice).collect();
            let columns = (input.values.len(), usize::from(peer.value_columns));
            aggregate(ch, &mut c, me, cfg, &weights, columns, finish).await?
        }
    };
    let output = check_opened(output, n_s as u64, peer.set_size)?;
    phases.application = meter.mark(ch);
    Ok((outcome(ch, output, phases, start), deferred))
}
