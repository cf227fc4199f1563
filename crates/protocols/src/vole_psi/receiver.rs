//! The receiver: encodes its set in the OKVS, masks it with the VOLE, and
//! looks its OPRF values up among the sender's.

use std::time::{Duration, Instant};

use psikit_ot::silent::{self, SilentReceiver, VoleOutput};
use psikit_structures::okvs::{BinEncoder, Fill, Okvs, OkvsError};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::Rng;

use super::config::{session_id, Phases, VoleConfig, STAGE_OKVS, STAGE_SUMMARIES, STAGE_VOLE};
use super::messages::{self as msg, Commitment, OkvsSeed, ReceiverOffset, SenderOffset};
use super::oprf;
use crate::common::two_party::{abort, hello};
use crate::common::Progress;
use crate::error::Error;

/// What the receiver learned and what it cost.
#[derive(Debug, Clone)]
pub struct ReceiverOutcome {
    /// `matches[i]`: whether item `i` is in the sender's set.
    pub matches: Vec<bool>,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Runs VOLE-PSI as the receiver on `items` (distinct byte strings),
/// telling `progress` its phases.
///
/// The order lets each party compute while the other does: the VOLE's
/// base correlations come first, then the receiver hashes its items while
/// the sender expands its trees and finishes its VOLE while the sender
/// compresses its share and hashes its own items; then it encodes its OKVS
/// a frame of bins at a time, which the sender decodes as they come.
pub async fn run_receiver(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &VoleConfig,
    progress: &dyn Progress,
) -> Result<ReceiverOutcome, Error> {
    cfg.check()?;
    let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
    let mut phases = Phases {
        malicious: cfg.malicious,
        low_comm: cfg.low_comm,
        ..Phases::default()
    };
    let n_r = items.len() as u64;
    let n_s = hello::<{ msg::PROTOCOL_ID }>(ch, &cfg.terms(n_r)).await?;
    let x = cfg.exchange(n_s, n_r)?;
    let bits = cfg.value_bits(n_s);
    let commitment = match cfg.malicious {
        true => Some(ch.recv_msg::<Commitment>(()).await?),
        false => None,
    };
    // The seed goes first: both parties then choose the OKVS parameters
    // (10-30 ms of bound evaluations at 2^20) at the same time.
    let seed: [u8; 16] = OsRng.gen();
    ch.send_msg(&OkvsSeed(seed)).await?;
    let okvs = Okvs::new(cfg.okvs_params(items.len() as u64)?, seed);
    let m = okvs.params().table_len();

    progress.stage(STAGE_VOLE, None);
    let t = Instant::now();
    let sid = session_id(&okvs.seed(), n_s, n_r);
    let mut vole =
        SilentReceiver::setup(ch, &sid, cfg.security(), cfg.ext_config()?, &mut OsRng).await?;
    let pending = vole.start_vole(ch, m, bits, &mut OsRng).await?;
    phases.vole += t.elapsed();
    let keys = oprf::item_keys(items);
    let t = Instant::now();
    let VoleOutput {
        mut a,
        mut c,
        times,
    } = pending.finish(ch).await?;
    phases.vole_times = times;
    silent::compact(&mut a);
    silent::compact(&mut c);
    phases.vole += t.elapsed();
    phases.vole_len = m;
    phases.vole_bytes = ch.bytes_sent() - sent0 + ch.bytes_received() - recv0;

    let t = Instant::now();
    let offset: u128 = OsRng.gen();
    if cfg.malicious {
        ch.send_msg(&ReceiverOffset(offset.to_le_bytes())).await?;
    }
    progress.stage(STAGE_OKVS, None);
    let table = Instant::now();
    let (encoding, encoder) = send_masked(ch, &okvs, &keys, &c, bits).await?;
    phases.okvs_encode = encoding;
    phases.table = table.elapsed();
    drop(c);
    // After `c` is gone: the decoder's values take its place at the peak.
    let mut decoder = encoder.into_decoder();
    let mut outputs = vec![0u128; keys.len()];
    let d = Instant::now();
    decoder.decode_bins(0..okvs.params().bins(), &a)?;
    decoder.finish(&mut outputs)?;
    phases.okvs_decode = d.elapsed();
    drop(a);
    let binding = match commitment {
        Some(c) => Some(offset ^ opened(ch, &c).await?),
        None => None,
    };
    oprf::outputs(&mut outputs, &keys, binding);
    drop(keys);
    progress.stage(STAGE_SUMMARIES, None);
    let summaries = Instant::now();
    let mine = oprf::summaries(&outputs, x.bits);
    drop(outputs);
    let matches = x.receive(ch, &mine, n_s, cfg.reveal_to_sender).await?;
    phases.summaries = summaries.elapsed();
    phases.online += t.elapsed();
    Ok(ReceiverOutcome {
        matches,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}

/// The sender's offset share, checked against its commitment.
async fn opened(ch: &mut Channel, commitment: &Commitment) -> Result<u128, Error> {
    let SenderOffset(share) = ch.recv_msg(()).await?;
    let share = u128::from_le_bytes(share);
    if oprf::commit(share) != commitment.0 {
        let why = "the sender's offset share does not open its commitment";
        return Err(abort(ch, msg::PROTOCOL_ID, why).await);
    }
    Ok(share)
}

/// Encodes the receiver's OKVS `P` of `(k_y, h(k_y))` under its public
/// seed a frame of bins at a time ([`msg::frames`]) and sends each part
/// masked, `P + C`, so that the sender decodes while we encode; returns
/// the time spent encoding. Every entry is cut to `bits` bits: decoding
/// XORs entries, so each bit is a system of its own and the cut table
/// still decodes to the values (which have `bits` bits). Free entries are
/// zero ([`Fill::Zero`]): the sender sees `P + C` only, pseudorandom
/// whatever `P` holds since `C` is (a random fill cost a ChaCha12 pass
/// over the table for nothing). A failure has probability below
/// `2^-σ` (the OKVS's proven bound); the run then ends with an error
/// rather than drawing a seed the sender already used. Returns the time
/// spent encoding, and the encoder, whose grouping of the keys by bin
/// decodes the receiver's own values ([`BinEncoder::into_decoder`]).
async fn send_masked<'a>(
    ch: &mut Channel,
    okvs: &'a Okvs,
    keys: &'a [u128],
    c: &[u128],
    bits: u32,
) -> Result<(Duration, BinEncoder<'a>), Error> {
    let value = |keys: &[u128], out: &mut [u128]| oprf::okvs_values_into(keys, bits, out);
    let mut encoder = okvs.encoder_of(keys, value, Fill::Zero).map_err(failed)?;
    let frames = msg::frames(okvs.params(), bits);
    let bin_len = okvs.params().bin_len();
    let most = frames.iter().map(|f| f.len()).max().unwrap_or(0);
    let mut part = vec![0u128; most * bin_len];
    let mut bytes = Vec::new();
    let mut spent = Duration::ZERO;
    for bins in frames {
        let cols = bins.start * bin_len..bins.end * bin_len;
        let p = &mut part[..cols.len()];
        let e = Instant::now();
        encoder.encode_bins(bins, p).map_err(failed)?;
        spent += e.elapsed();
        // Packing cuts `P + C` to `bits` bits.
        msg::encode_masked_into(p, &c[cols], bits, &mut bytes);
        ch.send_payload(msg::PROTOCOL_ID, msg::KIND_MASKED, &bytes)
            .await?;
    }
    Ok((spent, encoder))
}

/// An encoding failure in the flags' words.
fn failed(e: OkvsError) -> Error {
    match e {
        OkvsError::EncodeFailed(sigma) => Error::Config(format!(
            "the OKVS could not encode this set (probability below 2^-{sigma}): run again"
        )),
        e => e.into(),
    }
}
