//! The receiver: holds the cuckoo table, evaluates the OPPRF at its item
//! of each bin, and follows every round of the circuit.

use psikit_structures::okvs::{Okvs, OkvsParams};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;

use super::apps::{self, weighted_sums};
use super::hashing::{self, CuckooBins};
use super::messages::Seeds;
use super::opprf;
use super::rot::Side;
use super::{
    compare, hello, outcome, rng, session_id, App, Compared, CpsiConfig, Input, Meter, Outcome,
    Output, Phases, Shares, Sums,
};
use crate::vole_psi::oprf::item_keys;
use crate::Error;
use psikit_ot::silent::SilentReceiver;
use psikit_ot::Security;

/// Runs circuit PSI as the receiver (the cuckoo-table side).
pub async fn run_receiver(
    ch: &mut Channel,
    input: Input<'_>,
    cfg: &CpsiConfig,
) -> Result<Outcome, Error> {
    let start = (ch.bytes_sent(), ch.bytes_received());
    let mut meter = Meter::start(ch);
    let mut phases = Phases::default();
    let peer = hello(ch, cfg, &input).await?;
    let n_r = input.keys.len();
    let m = hashing::bins(n_r)?;
    let ell = hashing::tag_bits(m);
    (phases.bins, phases.tag_bits) = (m, ell);
    let seeds = Seeds {
        hashing: OsRng.gen(),
        okvs: OsRng.gen(),
    };
    ch.send_msg(&seeds).await?;
    let keys = item_keys(input.keys);
    let mut rng = rng()?;
    let table = CuckooBins::build(&keys, m, seeds.hashing, &mut rng)?;
    let bin_keys = table.opprf_keys(&keys, &mut rng);
    phases.hashing = meter.mark(ch);

    let sid = session_id(&seeds, peer.set_size, n_r as u64);
    let okvs = Okvs::new(OkvsParams::new(m)?, seeds.okvs);
    let mut vole = SilentReceiver::setup(
        ch,
        &sid,
        Security::SemiHonest,
        cfg.ext_config()?,
        &mut OsRng,
    )
    .await?;
    let f = opprf::oprf_receive(ch, &mut vole, &okvs, &bin_keys).await?;
    let capacity = hashing::HASHES as usize * peer.set_size as usize;
    let programmed =
        opprf::receive_program(ch, &bin_keys, &f, capacity, ell, peer.has_values).await?;
    drop((f, bin_keys));
    phases.opprf = meter.mark(ch);

    let Compared {
        shares,
        mut rots,
        mut triples,
    } = compare(
        ch,
        cfg,
        &sid,
        programmed.tags,
        ell,
        Side::SilentReceiver(vole),
        &mut meter,
        &mut phases,
    )
    .await?;

    let output = match cfg.app {
        App::Shares => Output::Shares(Shares {
            membership: shares,
            item_of_bin: Some(table.item_of_bin),
            sender_values: programmed.values,
        }),
        App::Cardinality => {
            let count = weighted_sums(ch, &mut rots, &shares, None, 1, true).await?;
            Output::Cardinality(apps::open(ch, count[0], true, cfg.both_learn).await?)
        }
        App::Sum => {
            let k = 1 + usize::from(programmed.values.is_some());
            let fwd = weighted_sums(ch, &mut rots, &shares, None, k, true).await?;
            let own: Option<Vec<u64>> = input.values.map(|v| {
                table
                    .item_of_bin
                    .iter()
                    .map(|item| item.map_or(0, |i| v[i as usize]))
                    .collect()
            });
            let mine: Vec<&[u64]> = [programmed.values.as_deref(), own.as_deref()]
                .into_iter()
                .flatten()
                .collect();
            let rev = match mine.len() {
                0 => Vec::new(),
                k => weighted_sums(ch, &mut rots, &shares, Some(&mine), k, false).await?,
            };
            let cardinality = apps::open(ch, fwd[0], true, cfg.both_learn).await?;
            let sender_values = match fwd.get(1) {
                Some(part) => {
                    apps::open(ch, part.wrapping_add(rev[0]), true, cfg.both_learn).await?
                }
                None => None,
            };
            let receiver_values = match (own.is_some(), rev.last()) {
                (true, Some(&share)) => apps::open(ch, share, true, cfg.both_learn).await?,
                _ => None,
            };
            Output::Sum(cardinality.map(|cardinality| Sums {
                cardinality,
                sender_values,
                receiver_values,
            }))
        }
        App::Threshold(t) => {
            let count = weighted_sums(ch, &mut rots, &shares, None, 1, true).await?;
            let bit =
                apps::at_least(ch, &mut triples, count[0], t, (m as u64).max(t), false).await?;
            let open = apps::open(ch, u64::from(bit), true, cfg.both_learn).await?;
            Output::Threshold(open.map(|b| b & 1 == 1))
        }
        App::Union => {
            let items: Vec<Option<&[u8]>> = table
                .item_of_bin
                .iter()
                .map(|item| item.map(|i| input.keys[i as usize].as_slice()))
                .collect();
            let width = input.keys.iter().map(Vec::len).max().unwrap_or(0);
            apps::union_provide(ch, &mut rots, &shares, &items, width).await?;
            Output::Union(None)
        }
    };
    phases.application = meter.mark(ch);
    Ok(outcome(ch, output, phases, start))
}
