//! The sender: holds the simple table, programs the OPPRF with a random
//! tag per bin, and leads every round of the circuit.

use psikit_structures::okvs::{Okvs, OkvsParams};
use psikit_transport::Channel;
use rand::Rng;

use super::apps::{self, weighted_sums};
use super::hashing::{self, bin_key};
use super::messages::Seeds;
use super::opprf::{self, Program};
use super::rot::Side;
use super::{
    compare, hello, outcome, rng, session_id, App, Compared, CpsiConfig, Input, Meter, Outcome,
    Output, Phases, Shares, Sums,
};
use crate::vole_psi::oprf::item_keys;
use crate::Error;
use psikit_ot::silent::SilentSender;
use psikit_ot::Security;
use rand::rngs::OsRng;

/// Runs circuit PSI as the sender (the simple-table side).
pub async fn run_sender(
    ch: &mut Channel,
    input: Input<'_>,
    cfg: &CpsiConfig,
) -> Result<Outcome, Error> {
    let start = (ch.bytes_sent(), ch.bytes_received());
    let mut meter = Meter::start(ch);
    let mut phases = Phases::default();
    let peer = hello(ch, cfg, &input).await?;
    let n_s = input.keys.len();
    let m = hashing::bins(peer.set_size as usize)?;
    let ell = hashing::tag_bits(m);
    (phases.bins, phases.tag_bits) = (m, ell);
    let seeds: Seeds = ch.recv_msg(()).await?;
    let keys = item_keys(input.keys);
    let simple = hashing::simple_table(&keys, m, seeds.hashing);
    phases.hashing = meter.mark(ch);

    let sid = session_id(&seeds, n_s as u64, peer.set_size);
    let okvs = Okvs::new(OkvsParams::new(m)?, seeds.okvs);
    let mut vole = SilentSender::setup(
        ch,
        &sid,
        Security::SemiHonest,
        cfg.ext_config()?,
        &mut OsRng,
    )
    .await?;
    let key = opprf::oprf_send(ch, &mut vole, okvs).await?;
    let mut rng = rng()?;
    let tag_mask = (1u128 << ell) - 1;
    let tags: Vec<u128> = (0..m).map(|_| rng.gen::<u128>() & tag_mask).collect();
    // The sender's value shares: it programs `value + w_bin` and keeps `-w_bin`.
    let masks: Option<Vec<u64>> = input.values.map(|_| (0..m).map(|_| rng.gen()).collect());
    let bin_keys: Vec<u128> = simple
        .iter()
        .map(|&(bin, i)| bin_key(keys[i as usize], bin))
        .collect();
    let bin_tags: Vec<u128> = simple.iter().map(|&(bin, _)| tags[bin as usize]).collect();
    let bin_values: Option<Vec<u64>> = input.values.zip(masks.as_ref()).map(|(v, w)| {
        simple
            .iter()
            .map(|&(bin, i)| v[i as usize].wrapping_add(w[bin as usize]))
            .collect()
    });
    let program = Program {
        keys: &bin_keys,
        tags: &bin_tags,
        values: bin_values.as_deref(),
    };
    opprf::program(ch, &key, &program, hashing::HASHES as usize * n_s, ell).await?;
    drop((key, bin_keys, bin_tags, bin_values));
    phases.opprf = meter.mark(ch);

    let Compared {
        shares,
        mut rots,
        mut triples,
    } = compare(
        ch,
        cfg,
        &sid,
        tags,
        ell,
        Side::SilentSender(vole),
        &mut meter,
        &mut phases,
    )
    .await?;

    let my_values: Option<Vec<u64>> = masks.map(|w| w.iter().map(|x| x.wrapping_neg()).collect());
    let learns = cfg.both_learn;
    // Counting is a sum of ones, held by the sender so that it runs on
    // forward OTs.
    let ones = vec![1u64; m];
    let output = match cfg.app {
        App::Shares => Output::Shares(Shares {
            membership: shares,
            item_of_bin: None,
            sender_values: my_values,
        }),
        App::Cardinality => {
            let count = weighted_sums(ch, &mut rots, &shares, Some(&[&ones]), 1, true).await?;
            Output::Cardinality(apps::open(ch, count[0], false, learns).await?)
        }
        App::Sum => {
            // Forward: the count and the sender's part of its own values;
            // reverse: the receiver's part of them, then its own values.
            let mine: Vec<&[u64]> = [Some(&ones[..]), my_values.as_deref()]
                .into_iter()
                .flatten()
                .collect();
            let fwd = weighted_sums(ch, &mut rots, &shares, Some(&mine), mine.len(), true).await?;
            let k = usize::from(my_values.is_some()) + usize::from(peer.has_values);
            let rev = match k {
                0 => Vec::new(),
                _ => weighted_sums(ch, &mut rots, &shares, None, k, false).await?,
            };
            let cardinality = apps::open(ch, fwd[0], false, learns).await?;
            let sender_values = match fwd.get(1) {
                Some(part) => apps::open(ch, part.wrapping_add(rev[0]), false, learns).await?,
                None => None,
            };
            let receiver_values = match (peer.has_values, rev.last()) {
                (true, Some(&share)) => apps::open(ch, share, false, learns).await?,
                _ => None,
            };
            Output::Sum(cardinality.map(|cardinality| Sums {
                cardinality,
                sender_values,
                receiver_values,
            }))
        }
        App::Threshold(t) => {
            let count = weighted_sums(ch, &mut rots, &shares, Some(&[&ones]), 1, true).await?;
            let bit =
                apps::at_least(ch, &mut triples, count[0], t, (m as u64).max(t), true).await?;
            Output::Threshold(
                apps::open(ch, u64::from(bit), false, learns)
                    .await?
                    .map(|b| b & 1 == 1),
            )
        }
        App::Union => {
            let width = usize::from(peer.max_item_len);
            Output::Union(Some(
                apps::union_learn(ch, &mut rots, &shares, width).await?,
            ))
        }
    };
    phases.application = meter.mark(ch);
    Ok(outcome(ch, output, phases, start))
}
