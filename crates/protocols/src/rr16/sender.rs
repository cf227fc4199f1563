//! The sender (Alice): OT sender, checks the receiver's choice bits, sends
//! summary values of its items.

use std::time::{Duration, Instant};

use psikit_ot::{Confirm, OtExtSender, SenderOts};
use psikit_transport::{Channel, Message};
use rand::rngs::{OsRng, StdRng};
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use subtle::ConstantTimeEq;

use super::config::{Rr16Config, STAGE_EXTENSION, STAGE_SESSION, STAGE_SUMMARIES};
use super::messages::{self as msg, Challenge, Response, PROTOCOL_ID};
use super::params::Rr16Params;
use super::session::{explained, fold, open, timed, Opened, OtSet, Phases};
use crate::common::summaries::Summary;
use crate::common::{two_party, Progress};
use crate::error::Error;

/// What the sender learned and what it cost.
#[derive(Debug, Clone)]
pub struct SenderOutcome {
    /// Indices of the sender's items in the intersection, if the receiver
    /// revealed it (see [`Rr16Config::reveal_to_sender`]).
    pub revealed: Option<Vec<usize>>,
    pub params: Rr16Params,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Tells the peer why we stop, then returns the error.
pub(super) async fn abort(ch: &mut Channel, why: impl Into<String>) -> Error {
    two_party::abort(ch, PROTOCOL_ID, why).await
}

/// Runs RR16 as the sender on `items` (distinct byte strings), telling
/// `progress` its phases (the OT extension chunk by chunk).
pub async fn run_sender(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    progress: &dyn Progress,
) -> Result<SenderOutcome, Error> {
    let out = send_steps(ch, items, cfg, progress).await;
    explained(ch, out).await
}

async fn send_steps(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    progress: &dyn Progress,
) -> Result<SenderOutcome, Error> {
    progress.stage(STAGE_SESSION, None);
    let Opened {
        session,
        mut ot,
        buckets,
        mut acc,
        mut phases,
        start_bytes: (sent0, recv0),
    } = open::<OtExtSender>(ch, cfg, items).await?;
    let p = session.params;
    let mut opened_ones = 0u64;
    let draw = || sample_challenge(p.ots_per_chunk, p.p_chk);
    let t = Instant::now();
    let mut upcoming = cfg.malicious.then(draw);
    phases.offline += t.elapsed();
    // The previous chunk's OTs, π and bucket, folded inside this chunk's
    // extension while the receiver computes its KOS check (the receiver
    // folds the previous chunk once its matrix is out).
    let mut unfolded: Option<(SenderOts, Vec<u32>, &[u64])> = None;
    let fold_chunk = |acc: &mut [u128], (ots, pi, bucket): (SenderOts, Vec<u32>, &[u64])| {
        timed(|| fold(acc, bucket, &pi, |i, out| ots.messages_at(i, true, out)))
    };
    progress.stage(STAGE_EXTENSION, Some(buckets.len() as u64));
    for (chunk, bucket) in buckets.iter().enumerate() {
        let t = Instant::now();
        let challenge = upcoming.take();
        let challenge_frame = challenge.as_ref().map(Challenge::to_frame);
        // Unconfirmed: the receiver sends its KOS check, its response and π
        // in one go, without waiting for us; a failed check reaches it as
        // our error frame in place of a later message.
        let matrix = ot
            .receive_matrix(ch, p.ots_per_chunk as usize, Confirm::No)
            .await?;
        let seeded = matrix.send_seed(ch).await?;
        // The matrix has fixed the receiver's choice bits: the challenge
        // goes out right after the KOS seed.
        if let Some(frame) = &challenge_frame {
            ch.send(frame).await?;
        }
        // The previous chunk is folded while the receiver computes its check.
        let folded = match unfolded.take() {
            Some(previous) => fold_chunk(&mut acc, previous),
            None => Duration::ZERO,
        };
        let ots = seeded.finish(ch).await?;
        let opened = match challenge {
            Some(challenge) => {
                Some(cut_and_choose(ch, &ots, &p, &challenge.indices, &mut opened_ones).await?)
            }
            None => None,
        };
        phases.offline += t.elapsed() - folded;
        phases.online += folded;

        let t = Instant::now();
        let pi = match &opened {
            Some(opened) => {
                // The receiver now computes π: draw the next chunk's
                // challenge meanwhile instead of waiting idle.
                if chunk + 1 < buckets.len() {
                    upcoming = Some(draw());
                }
                receive_permutation(ch, &p, opened).await?
            }
            None => (0..p.bf_per_chunk as u32).collect(),
        };
        unfolded = Some((ots, pi, bucket));
        phases.online += t.elapsed();
        progress.advance(chunk as u64 + 1);
    }

    progress.stage(STAGE_SUMMARIES, None);
    let t = Instant::now();
    if let Some(last) = unfolded {
        fold_chunk(&mut acc, last);
    }
    let summaries: Vec<Summary> = items
        .par_iter()
        .zip(acc.par_iter())
        .map(|(x, a)| session.summary(x, *a))
        .collect();
    let revealed = session
        .exchange
        .send(ch, &summaries, cfg.reveal_to_sender)
        .await?;
    phases.online += t.elapsed();
    Ok(SenderOutcome {
        revealed,
        params: p,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}

/// Draws `C_t` (each OT with probability `p_chk`) from a CSPRNG.
fn sample_challenge(ots: u64, p_chk: f64) -> Challenge {
    let mut rng = StdRng::from_rng(OsRng).expect("OS randomness");
    let threshold = (p_chk * 2f64.powi(32)) as u64;
    let indices = (0..ots as u32)
        .filter(|_| u64::from(rng.gen::<u32>()) < threshold)
        .collect();
    Challenge { indices }
}

/// Steps 3-4 of Figure 4 for one chunk with challenge `C_t`, which went out
/// with the extension's KOS seed (drawn before the chunk's OTs existed is
/// fine: it is independent of them; it is sent only once the matrix has
/// fixed the receiver's choice bits). Returns the opened OTs.
async fn cut_and_choose(
    ch: &mut Channel,
    ots: &SenderOts,
    p: &Rr16Params,
    challenge: &[u32],
    opened_ones: &mut u64,
) -> Result<OtSet, Error> {
    let response = ch.recv_msg::<Response>(challenge.len()).await?;
    let zeros = response.zero_bits.iter().filter(|z| **z).count();
    *opened_ones += (challenge.len() - zeros) as u64;
    if *opened_ones > p.n_maxones {
        return Err(abort(ch, format!(
            "the receiver used choice bit 1 in {} opened OTs, more than the {} an honest receiver would",
            opened_ones, p.n_maxones
        ))
        .await);
    }
    let expected = challenge
        .iter()
        .zip(&response.zero_bits)
        .filter(|(_, zero)| **zero)
        .fold(0u128, |x, (&i, _)| x ^ ots.message(i as usize, false));
    if !bool::from(expected.to_le_bytes().ct_eq(&response.proof.to_le_bytes())) {
        return Err(abort(ch, "the receiver's proof of its choice bits is wrong").await);
    }
    Ok(OtSet::from_indices(p.ots_per_chunk as usize, challenge))
}

/// Step 5 for one chunk: `π_t` must map the segment injectively into the
/// unopened OTs.
async fn receive_permutation(
    ch: &mut Channel,
    p: &Rr16Params,
    opened: &OtSet,
) -> Result<Vec<u32>, Error> {
    let width = msg::index_width(p.ots_per_chunk);
    let expected = (p.bf_per_chunk * u64::from(width)).div_ceil(8);
    let bytes = ch
        .recv_chunked(PROTOCOL_ID, msg::KIND_PERMUTATION, expected)
        .await?;
    let pi = msg::unpack_indices(&bytes, p.bf_per_chunk as usize, width)?;
    // Every index must be new to the set of opened and already used OTs.
    let mut taken = opened.clone();
    let injective = pi
        .iter()
        .all(|&i| u64::from(i) < p.ots_per_chunk && taken.insert(i));
    if !injective {
        return Err(abort(
            ch,
            "the receiver's permutation is not an injection into the unopened OTs",
        )
        .await);
    }
    Ok(pi)
}
