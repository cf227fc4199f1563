//! The sender: holds the VOLE's `Δ`, evaluates the OPRF on its items and
//! sends the values.

use std::time::Instant;

use psikit_ot::gf128;
use psikit_ot::silent::{self, SilentSender};
use psikit_structures::okvs::Okvs;
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;
use rayon::prelude::*;

use super::config::{session_id, Phases, VoleConfig, STAGE_OKVS, STAGE_SUMMARIES, STAGE_VOLE};
use super::messages::{self as msg, Commitment, OkvsSeed, ReceiverOffset, SenderOffset};
use super::oprf;
use crate::common::two_party::hello;
use crate::common::Progress;
use crate::error::Error;

/// Blocks per parallel task of the field products.
const CHUNK: usize = 1 << 14;

/// What the sender learned and what it cost.
#[derive(Debug, Clone)]
pub struct SenderOutcome {
    /// Indices of the sender's items in the intersection, if the receiver
    /// revealed it (see [`VoleConfig::reveal_to_sender`]).
    pub revealed: Option<Vec<usize>>,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Runs VOLE-PSI as the sender on `items` (distinct byte strings),
/// telling `progress` its phases.
pub async fn run_sender(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &VoleConfig,
    progress: &dyn Progress,
) -> Result<SenderOutcome, Error> {
    cfg.check()?;
    let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
    let mut phases = Phases {
        malicious: cfg.malicious,
        low_comm: cfg.low_comm,
        ..Phases::default()
    };
    let n_s = items.len() as u64;
    let n_r = hello::<{ msg::PROTOCOL_ID }>(ch, &cfg.terms(n_s)).await?;
    let x = cfg.exchange(n_s, n_r)?;
    let bits = cfg.value_bits(n_s);
    let share: u128 = OsRng.gen();
    if cfg.malicious {
        ch.send_msg(&Commitment(oprf::commit(share))).await?;
    }
    // Chosen while the receiver chooses its own (see `run_receiver`).
    let params = cfg.okvs_params(n_r)?;
    let OkvsSeed(seed) = ch.recv_msg(()).await?;
    let okvs = Okvs::new(params, seed);
    let m = okvs.params().table_len();

    progress.stage(STAGE_VOLE, None);
    let t = Instant::now();
    let sid = session_id(&seed, n_s, n_r);
    let mut vole =
        SilentSender::setup(ch, &sid, cfg.security(), cfg.ext_config()?, &mut OsRng).await?;
    let delta = vole.delta();
    let mut b = vole.vole(ch, m, bits, &mut OsRng).await?;
    phases.vole_times = vole.last_times();
    silent::compact(&mut b);
    phases.vole += t.elapsed();
    phases.vole_len = m;
    phases.vole_bytes = ch.bytes_sent() - sent0 + ch.bytes_received() - recv0;
    progress.stage(STAGE_OKVS, None);
    // Done while the receiver encodes its OKVS.
    let keys = oprf::item_keys(items);

    // Grouped by bin before the table comes (while the receiver encodes).
    let mut decoder = okvs.decoder(&keys);

    let t = Instant::now();
    let offset = match cfg.malicious {
        true => {
            let ReceiverOffset(theirs) = ch.recv_msg(()).await?;
            Some(share ^ u128::from_le_bytes(theirs))
        }
        false => None,
    };
    let bin_len = okvs.params().bin_len();
    let mut k = b;
    let table = Instant::now();
    for bins in msg::frames(okvs.params(), bits) {
        let frame = ch.recv_expect(msg::PROTOCOL_ID, msg::KIND_MASKED).await?;
        let k = &mut k[bins.start * bin_len..bins.end * bin_len];
        let masked = msg::decode_values(&frame.payload, k.len(), bits)?;
        // K = B + Δ·(P + C) = A + Δ·P, over B.
        k.par_chunks_mut(CHUNK)
            .zip(masked.par_chunks(CHUNK))
            .for_each(|(k, pc)| gf128::mul_acc(delta, pc, k));
        let d = Instant::now();
        decoder.decode_bins(bins.clone(), k)?;
        phases.okvs_decode += d.elapsed();
        // The outputs of these bins' items, while the next frame comes:
        // `H(Decode(K, k_x) + Δ·h(k_x))` (malicious: bound first).
        decoder.map_decoded(bins, |keys, values| {
            gf128::mul_acc(delta, &oprf::okvs_values(keys, bits), values);
            oprf::outputs(values, keys, offset);
        })?;
    }
    phases.table = table.elapsed();
    drop(k);
    if offset.is_some() {
        ch.send_msg(&SenderOffset(share.to_le_bytes())).await?;
    }
    let mut outputs = vec![0u128; keys.len()];
    decoder.finish(&mut outputs)?;
    drop(keys);
    progress.stage(STAGE_SUMMARIES, None);
    let summaries = Instant::now();
    let values = oprf::summaries(&outputs, x.bits);
    drop(outputs);
    let revealed = x.send(ch, &values, cfg.reveal_to_sender).await?;
    phases.summaries = summaries.elapsed();
    phases.online += t.elapsed();
    Ok(SenderOutcome {
        revealed,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}
