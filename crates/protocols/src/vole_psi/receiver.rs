//! The receiver: encodes its set in the OKVS, masks it with the VOLE, and
//! looks its OPRF values up among the sender's.

use std::time::Instant;

use psikit_ot::silent::SilentReceiver;
use psikit_ot::SessionId;
use psikit_structures::okvs::{Okvs, OkvsError, OkvsParams};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;
use rayon::prelude::*;

use super::messages::{self as msg, OkvsSeed};
use super::{exchange, oprf, Phases, VoleConfig};
use crate::common::two_party::hello;
use crate::Error;

/// What the receiver learned and what it cost.
#[derive(Debug, Clone)]
pub struct ReceiverOutcome {
    /// `matches[i]`: whether item `i` is in the sender's set.
    pub matches: Vec<bool>,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Encoding attempts before giving up: each fails with probability below
/// `2^-40`, so a second failure means something else is wrong.
const ENCODE_ATTEMPTS: usize = 3;

/// Runs VOLE-PSI as the receiver on `items` (distinct byte strings).
pub async fn run_receiver(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &VoleConfig,
) -> Result<ReceiverOutcome, Error> {
    cfg.check()?;
    let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
    let mut phases = Phases::default();
    let n_r = items.len() as u64;
    let n_s = hello::<{ msg::PROTOCOL_ID }>(ch, &cfg.terms(n_r)).await?;
    let keys = oprf::item_keys(items);
    let e = Instant::now();
    let (okvs, table) = encode(&keys)?;
    phases.okvs_encode = e.elapsed();
    let seed = okvs.seed();
    ch.send_msg(&OkvsSeed(seed)).await?;
    let m = okvs.params().table_len();
    let sid = SessionId::new(&[&seed[..], &n_s.to_be_bytes(), &n_r.to_be_bytes()].concat());
    let t = Instant::now();
    let mut vole = SilentReceiver::setup(ch, &sid, cfg.ext_config()?, &mut OsRng).await?;
    let v = vole.vole(ch, m, &mut OsRng).await?;
    phases.vole += t.elapsed();
    phases.vole_len = m;
    phases.vole_bytes = ch.bytes_sent() - sent0 + ch.bytes_received() - recv0;

    let t = Instant::now();
    let masked: Vec<u128> = table
        .par_iter()
        .zip(v.c.par_iter())
        .map(|(p, c)| p ^ c)
        .collect();
    drop(table);
    ch.send_chunked(
        msg::PROTOCOL_ID,
        msg::KIND_MASKED,
        &msg::encode_blocks(&masked),
    )
    .await?;
    drop(masked);
    let mut decoded = vec![0u128; keys.len()];
    let d = Instant::now();
    okvs.decode(&v.a, &keys, &mut decoded)?;
    phases.okvs_decode = d.elapsed();
    let x = exchange(n_s, n_r);
    let mine = oprf::summaries(decoded, x.len);
    let matches = x.receive(ch, &mine, n_s, cfg.reveal_to_sender).await?;
    phases.online += t.elapsed();
    Ok(ReceiverOutcome {
        matches,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}

/// The receiver's OKVS of `(k_y, h(k_y))` under a fresh public seed.
fn encode(keys: &[u128]) -> Result<(Okvs, Vec<u128>), Error> {
    let params = OkvsParams::new(keys.len())?;
    let values = oprf::okvs_values(keys);
    let mut attempt = 1;
    loop {
        let okvs = Okvs::new(params.clone(), OsRng.gen());
        match okvs.encode(keys, &values, &mut OsRng) {
            Ok(table) => return Ok((okvs, table)),
            Err(OkvsError::EncodeFailed(_)) if attempt < ENCODE_ATTEMPTS => attempt += 1,
            Err(e) => return Err(e.into()),
        }
    }
}
