//! The receiver (Bob): OT receiver with biased choice bits, proves them in
//! the cut-and-choose, maps its Bloom filter onto unopened OTs, and learns
//! the intersection.

use std::time::Instant;

use psikit_ot::{ChoiceBits, OtExtReceiver, ReceiverOts};
use psikit_transport::Channel;
use rand::rngs::{OsRng, StdRng};
use rand::SeedableRng;
use rayon::prelude::*;

use super::messages::{self as msg, Response, PROTOCOL_ID};
use super::params::Rr16Params;
use super::sender::abort;
use super::session::{establish, explained, fold, OtSet, Phases, Summary};
use super::shuffle::random_permutation;
use super::Rr16Config;
use crate::Error;

/// What the receiver learned and what it cost.
#[derive(Debug, Clone)]
pub struct ReceiverOutcome {
    /// `matches[i]`: whether item `i` is in the sender's set.
    pub matches: Vec<bool>,
    pub params: Rr16Params,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Runs RR16 as the receiver on `items` (distinct byte strings).
pub async fn run_receiver(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
) -> Result<ReceiverOutcome, Error> {
    receive(ch, items, cfg, &Behaviour::default()).await
}

/// Deviations from the protocol, used by tests to check that the sender
/// catches a cheating receiver. All off for [`run_receiver`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Behaviour {
    /// Extra choice-bit-1 OTs per chunk beyond the honest count.
    pub extra_ones: u64,
    /// Claim every challenged OT used choice bit 0.
    pub claim_all_zero: bool,
    /// Map two filter positions to the same OT.
    pub repeat_in_permutation: bool,
}

pub(super) async fn receive(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    behaviour: &Behaviour,
) -> Result<ReceiverOutcome, Error> {
    let out = receive_steps(ch, items, cfg, behaviour).await;
    explained(ch, out).await
}

async fn receive_steps(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    behaviour: &Behaviour,
) -> Result<ReceiverOutcome, Error> {
    let (sent0, recv0) = (ch.bytes_sent(), ch.bytes_received());
    let mut phases = Phases::default();
    let t = Instant::now();
    let session = establish(ch, cfg, items.len() as u64, false).await?;
    let p = session.params;
    let mut ot = OtExtReceiver::setup(
        ch,
        &session.sid,
        cfg.security(),
        cfg.ext_config()?,
        &mut OsRng,
    )
    .await?;
    phases.offline += t.elapsed();

    let t = Instant::now();
    let buckets = session.buckets(items);
    let mut acc = vec![0u128; items.len()];
    phases.online += t.elapsed();
    let mut rng = StdRng::from_rng(OsRng).map_err(|e| Error::Protocol(e.to_string()))?;
    let ones = (p.ones_per_chunk + behaviour.extra_ones).min(p.ots_per_chunk);
    let mut draw = || ChunkChoices::new(p.ots_per_chunk as usize, ones as usize, &mut rng);
    let t = Instant::now();
    let mut upcoming = cfg.malicious.then(&mut draw);
    phases.offline += t.elapsed();
    for (chunk, bucket) in buckets.iter().enumerate() {
        let segment = segment_bits(bucket, p.bf_per_chunk);
        let t = Instant::now();
        let (ots, opened) = match upcoming.take() {
            Some(choices) => {
                let ots = ot.extend(ch, &choices.bits()).await?;
                // The sender now checks the extension and draws its
                // challenge: draw the next chunk's choices meanwhile
                // instead of waiting idle (they depend on nothing sent).
                if chunk + 1 < buckets.len() {
                    upcoming = Some(draw());
                }
                let opened = answer_challenge(ch, &ots, &p, behaviour).await?;
                (ots, Some((choices, opened)))
            }
            None => (
                ot.extend(ch, &ChoiceBits::from_bools(&segment)).await?,
                None,
            ),
        };
        phases.offline += t.elapsed();

        let t = Instant::now();
        let pi = match opened {
            Some((choices, opened)) => {
                let mut pi = match choices.permutation(&opened, &segment) {
                    Some(pi) => pi,
                    None => {
                        return Err(abort(
                            ch,
                            "not enough unopened OTs for the Bloom filter segment",
                        )
                        .await)
                    }
                };
                if behaviour.repeat_in_permutation && pi.len() > 1 {
                    pi[1] = pi[0];
                }
                let width = msg::index_width(p.ots_per_chunk);
                ch.send_chunked(
                    PROTOCOL_ID,
                    msg::KIND_PERMUTATION,
                    &msg::pack_indices(&pi, width),
                )
                .await?;
                pi
            }
            None => (0..p.bf_per_chunk as u32).collect(),
        };
        fold(&mut acc, bucket, &pi, |idx, out| ots.messages_at(idx, out));
        phases.online += t.elapsed();
    }

    let t = Instant::now();
    // Our summaries first: the sender is computing its own meanwhile.
    let mine: Vec<Summary> = items
        .par_iter()
        .zip(acc.par_iter())
        .map(|(y, a)| session.summary(y, *a))
        .collect();
    let max = session.peer_set_size * session.summary_len as u64;
    let bytes = ch
        .recv_chunked(PROTOCOL_ID, msg::KIND_SUMMARIES, max)
        .await?;
    // Sorted and binary-searched: no hashing of values the peer chose.
    let mut theirs = session.decode_summaries(&bytes, session.peer_set_size)?;
    drop(bytes);
    theirs.par_sort_unstable();
    let matches: Vec<bool> = mine
        .par_iter()
        .map(|s| theirs.binary_search(s).is_ok())
        .collect();
    if cfg.reveal_to_sender {
        let found = mine
            .iter()
            .zip(&matches)
            .filter(|(_, m)| **m)
            .map(|(s, _)| s);
        ch.send_chunked(
            PROTOCOL_ID,
            msg::KIND_REVEAL,
            &session.encode_summaries(found),
        )
        .await?;
    }
    phases.online += t.elapsed();
    Ok(ReceiverOutcome {
        matches,
        params: p,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}

/// The Bloom filter bits of one segment (ones where some item hashes).
fn segment_bits(bucket: &[u64], len: u64) -> Vec<bool> {
    let mut bits = vec![false; len as usize];
    for &e in bucket {
        bits[(e >> 32) as usize] = true;
    }
    bits
}

/// Steps 3-4 for one chunk: check the challenge, prove the zero choice bits.
async fn answer_challenge(
    ch: &mut Channel,
    ots: &ReceiverOts,
    p: &Rr16Params,
    behaviour: &Behaviour,
) -> Result<OtSet, Error> {
    let frame = ch.recv_expect(PROTOCOL_ID, msg::KIND_CHALLENGE).await?;
    let challenge = msg::decode_challenge(&frame.payload, p.ots_per_chunk as u32)?;
    if challenge.len() as u64 > p.ots_per_chunk - p.bf_per_chunk {
        return Err(abort(
            ch,
            "the sender opened too many OTs to leave room for the Bloom filter",
        )
        .await);
    }
    let zero_bits: Vec<bool> = challenge
        .iter()
        .map(|&i| behaviour.claim_all_zero || !ots.choice(i as usize))
        .collect();
    let proof = challenge
        .iter()
        .zip(&zero_bits)
        .filter(|(_, z)| **z)
        .fold(0u128, |x, (&i, _)| x ^ ots.message(i as usize));
    ch.send(&Response { zero_bits, proof }.to_frame()).await?;
    Ok(OtSet::from_indices(p.ots_per_chunk as usize, &challenge))
}

/// The choice bits of one chunk, drawn so that step 5 is cheap: `order`
/// is a uniformly random permutation of the chunk's OTs and the first
/// `ones` of them have choice bit 1. So the ones sit at a uniformly random
/// `ones`-subset, and reading `order` gives the one-OTs and the zero-OTs
/// each in uniformly random order, which is all π needs.
struct ChunkChoices {
    order: Vec<u32>,
    ones: usize,
}

impl ChunkChoices {
    fn new(len: usize, ones: usize, rng: &mut StdRng) -> Self {
        Self {
            order: random_permutation(len, rng),
            ones: ones.min(len),
        }
    }

    fn bits(&self) -> ChoiceBits {
        let mut bits = ChoiceBits::zeros(self.order.len());
        for &i in &self.order[..self.ones] {
            bits.set(i as usize, true);
        }
        bits
    }

    /// Step 5: a uniformly random injection from the segment into the
    /// unopened OTs with `BF'[j] = b_{π(j)}`, where `BF'` is the segment
    /// with zeros turned into ones when zero-OTs run out. `None` if the
    /// chunk lacks one-OTs (negligible for honest parameters).
    fn permutation(&self, opened: &OtSet, segment: &[bool]) -> Option<Vec<u32>> {
        let unopened = |part: &[u32]| -> Vec<u32> {
            part.iter()
                .copied()
                .filter(|&i| !opened.contains(i))
                .collect()
        };
        let mut ones = unopened(&self.order[..self.ones]);
        let mut zeros = unopened(&self.order[self.ones..]);
        let needed = segment.iter().filter(|&&b| b).count();
        if needed > ones.len() || segment.len() > ones.len() + zeros.len() {
            return None;
        }
        // Zero positions past the zero-OTs take the one-OTs left over; a
        // sentinel at each end lets the loop read both lists without a
        // branch on the (secret) filter bit.
        zeros.extend_from_slice(&ones[needed..]);
        ones.truncate(needed);
        ones.push(0);
        zeros.push(0);
        let (mut a, mut b) = (0usize, 0usize);
        let pi = segment
            .iter()
            .map(|&bit| {
                let ot = if bit { ones[a] } else { zeros[b] };
                a += usize::from(bit);
                b += usize::from(!bit);
                ot
            })
            .collect();
        Some(pi)
    }
}
