//! The receiver (Bob): OT receiver with biased choice bits, proves them in
//! the cut-and-choose, maps its Bloom filter onto unopened OTs, and learns
//! the intersection.

use std::time::{Duration, Instant};

use psikit_ot::{ChoiceBits, Confirm, OtExtReceiver, ReceiverOts};
use psikit_transport::Channel;
use rand::rngs::{OsRng, StdRng};
use rand::SeedableRng;
use rayon::prelude::*;

use super::config::{Rr16Config, STAGE_EXTENSION, STAGE_SESSION, STAGE_SUMMARIES};
use super::messages::{self as msg, Challenge, Response, PROTOCOL_ID};
use super::params::Rr16Params;
use super::sender::abort;
use super::session::{explained, fold, open, timed, Opened, OtSet, Phases};
use super::shuffle::Shuffle;
use crate::common::summaries::Summary;
use crate::common::Progress;
use crate::error::Error;

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

/// Runs RR16 as the receiver on `items` (distinct byte strings), telling
/// `progress` its phases (the OT extension chunk by chunk).
pub async fn run_receiver(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    progress: &dyn Progress,
) -> Result<ReceiverOutcome, Error> {
    receive(ch, items, cfg, &Behaviour::default(), progress).await
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
    progress: &dyn Progress,
) -> Result<ReceiverOutcome, Error> {
    let out = receive_steps(ch, items, cfg, behaviour, progress).await;
    explained(ch, out).await
}

async fn receive_steps(
    ch: &mut Channel,
    items: &[Vec<u8>],
    cfg: &Rr16Config,
    behaviour: &Behaviour,
    progress: &dyn Progress,
) -> Result<ReceiverOutcome, Error> {
    progress.stage(STAGE_SESSION, None);
    let Opened {
        session,
        mut ot,
        buckets,
        mut acc,
        mut phases,
        start_bytes: (sent0, recv0),
    } = open::<OtExtReceiver>(ch, cfg, items).await?;
    let p = session.params;
    let mut rng = StdRng::from_rng(OsRng).map_err(|e| Error::task("seeding the shuffle", e))?;
    let ones = (p.ones_per_chunk + behaviour.extra_ones).min(p.ots_per_chunk);
    let mut draw =
        |spare| ChunkChoices::new(p.ots_per_chunk as usize, ones as usize, &mut rng, spare);
    let t = Instant::now();
    let mut upcoming = cfg.malicious.then(|| draw(None));
    phases.offline += t.elapsed();
    // Buffers reused from chunk to chunk.
    let (mut segment, mut pi) = (Vec::new(), Vec::new());
    let mut spent: Option<ChunkChoices> = None;
    // The previous chunk's OTs and bucket (its π is in `pi`), folded once
    // this chunk's matrix is out: folded before, the sender (folding too)
    // would not read the matrix and our sends would stall.
    let mut unfolded: Option<(ReceiverOts, &[u64])> = None;
    progress.stage(STAGE_EXTENSION, Some(buckets.len() as u64));
    for (chunk, bucket) in buckets.iter().enumerate() {
        segment_bits(bucket, p.bf_per_chunk, &mut segment);
        let t = Instant::now();
        let bits = match &upcoming {
            Some(choices) => choices.bits(),
            None => ChoiceBits::from_bools(&segment),
        };
        // Unconfirmed: the sender's challenge comes with its KOS seed, and
        // a failed check shows up as its error frame in place of a later
        // message (the summary values are sent only after every check).
        let matrix = ot.send_matrix(ch, &bits, Confirm::No).await?;
        // The matrix is out: fold the previous chunk while the sender
        // processes it.
        let folded = match unfolded.take() {
            Some((ots, bucket)) => {
                timed(|| fold(&mut acc, bucket, &pi, |i, out| ots.messages_at(i, out)))
            }
            None => Duration::ZERO,
        };
        let ots = matrix.answer_check(ch).await?;
        let opened = match upcoming.take() {
            Some(choices) => Some((choices, answer_challenge(ch, &ots, &p, behaviour).await?)),
            None => None,
        };
        phases.offline += t.elapsed() - folded;
        phases.online += folded;

        let t = Instant::now();
        match opened {
            Some((mut choices, opened)) => {
                if !choices.permutation(&opened, &segment, &mut pi) {
                    return Err(
                        abort(ch, "not enough unopened OTs for the Bloom filter segment").await,
                    );
                }
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
                spent = Some(choices);
            }
            None => {
                pi.clear();
                pi.extend(0..p.bf_per_chunk as u32);
            }
        }
        unfolded = Some((ots, bucket));
        phases.online += t.elapsed();
        if cfg.malicious && chunk + 1 < buckets.len() {
            let t = Instant::now();
            upcoming = Some(draw(spent.take()));
            phases.offline += t.elapsed();
        }
        progress.advance(chunk as u64 + 1);
    }

    progress.stage(STAGE_SUMMARIES, None);
    let t = Instant::now();
    if let Some((ots, bucket)) = unfolded {
        fold(&mut acc, bucket, &pi, |i, out| ots.messages_at(i, out));
    }
    // Our summaries first: the sender is computing its own meanwhile.
    let mine: Vec<Summary> = items
        .par_iter()
        .zip(acc.par_iter())
        .map(|(y, a)| session.summary(y, *a))
        .collect();
    let matches = session
        .exchange
        .receive(ch, &mine, session.peer_set_size, cfg.reveal_to_sender)
        .await?;
    phases.online += t.elapsed();
    Ok(ReceiverOutcome {
        matches,
        params: p,
        phases,
        bytes_sent: ch.bytes_sent() - sent0,
        bytes_received: ch.bytes_received() - recv0,
    })
}

/// The Bloom filter bits of one segment (ones where some item hashes),
/// into `bits`.
fn segment_bits(bucket: &[u64], len: u64, bits: &mut Vec<bool>) {
    bits.clear();
    bits.resize(len as usize, false);
    for &e in bucket {
        bits[(e >> 32) as usize] = true;
    }
}

/// Steps 3-4 for one chunk: check the challenge, prove the zero choice bits.
async fn answer_challenge(
    ch: &mut Channel,
    ots: &ReceiverOts,
    p: &Rr16Params,
    behaviour: &Behaviour,
) -> Result<OtSet, Error> {
    let challenge = ch
        .recv_msg::<Challenge>(p.ots_per_chunk as u32)
        .await?
        .indices;
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
    ch.send_msg(&Response { zero_bits, proof }).await?;
    Ok(OtSet::from_indices(p.ots_per_chunk as usize, &challenge))
}

/// The choice bits of one chunk, drawn so that step 5 is cheap: a
/// uniformly random permutation of the chunk's OTs ([`Shuffle`]) whose
/// first `ones` entries have choice bit 1. So the ones sit at a uniformly
/// random `ones`-subset, and reading the permutation gives the one-OTs and
/// the zero-OTs each in uniformly random order, which is all π needs. The
/// shuffle is finished only once the opened OTs are known, so that it
/// orders just the unopened ones.
struct ChunkChoices {
    shuffle: Shuffle,
    len: usize,
}

impl ChunkChoices {
    /// `spare`: a used instance whose buffers to reuse.
    fn new(len: usize, ones: usize, rng: &mut StdRng, spare: Option<ChunkChoices>) -> Self {
        Self {
            shuffle: Shuffle::new(len, ones.min(len), rng, spare.map(|c| c.shuffle)),
            len,
        }
    }

    fn bits(&self) -> ChoiceBits {
        let mut bytes = vec![0u8; self.len.div_ceil(8)];
        for &i in self.shuffle.prefix() {
            bytes[i as usize / 8] |= 1 << (i % 8);
        }
        ChoiceBits::from_bytes(bytes, self.len).expect("a byte per 8 choice bits")
    }

    /// Step 5: writes to `pi` a uniformly random injection from the segment
    /// into the unopened OTs with `BF'[j] = b_{π(j)}`, where `BF'` is the
    /// segment with zeros turned into ones when zero-OTs run out. `false`
    /// if the chunk lacks one-OTs (negligible for honest parameters). Uses
    /// up the shuffle.
    fn permutation(&mut self, opened: &OtSet, segment: &[bool], pi: &mut Vec<u32>) -> bool {
        let (unopened, ones) = self.shuffle.finish(|i| opened.contains(i));
        let needed = segment.iter().filter(|&&b| b).count();
        if needed > ones || segment.len() > unopened.len() {
            return false;
        }
        // `unopened` is the one-OTs then the zero-OTs. Zero positions past
        // the zero-OTs take the one-OTs left over, copied to the end; a
        // sentinel lets the loop read both streams without a branch on the
        // (secret) filter bit.
        unopened.extend_from_within(needed..ones);
        unopened.push(0);
        let (mut a, mut b) = (0usize, ones);
        pi.clear();
        pi.extend(segment.iter().map(|&bit| {
            let ot = if bit { unopened[a] } else { unopened[b] };
            a += usize::from(bit);
            b += usize::from(!bit);
            ot
        }));
        true
    }
}
