//! Random OTs for the equality test and the applications, from silent OT
//! or IKNP, and silent OT's small VOLEs ([`SmallChunk`]: random
//! 1-out-of-`2^bits` OTs for the triples and the CGS leaves).
//!
//! The **forward** direction has the sender (the leader) as OT sender: it
//! makes every AND triple and the sender's weighted sums. For silent OT it
//! reuses the silent session of the OPRF's VOLE (same direction, same
//! `Δ`), so it costs no base OTs of its own. The **reverse** direction (the
//! receiver as OT sender) is set up only when an application needs it,
//! as IKNP on 128 forward random OTs (the sum of the receiver's values
//! and the union's slots: one extension each, where IKNP is cheaper than
//! a second silent session).
//!
//! Silent correlated OTs (`q`, `t = q ⊕ b·Δ`) become random OTs by the
//! correlation-robust hash of fixed-key AES: messages `H(q)`, `H(q ⊕ Δ)`,
//! the receiver's `H(t)` (GKWY20, the semi-honest IKNP hashing). IKNP's
//! random OTs come hashed already. A chunk is hashed when its consumer
//! says what it keeps ([`Chunk`]): the triples and the switching network
//! one bit of each message (packed straight from the hash, 64 at a time),
//! the leaves 16 bits, the applications a word or a key.

use std::collections::VecDeque;

use psikit_ot::aes_hash;
use psikit_ot::silent::{Pending, Prepared, PreparedVole, SilentReceiver, SilentSender, Times};
use psikit_ot::{
    BaseReceiverOutput, BaseSenderOutput, ChoiceBits, ExtConfig, OtExtReceiver, OtExtSender,
    Security, SessionId, BASE_OTS,
};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rayon::prelude::*;
use zeroize::Zeroizing;

use super::bits::Bits;
use super::messages::{recv_exact, KIND_FLIPS};
use super::pads::{hashed_low_bits, low_bits_of};
pub use super::small::{SmallChunk, SmallMasks, SmallPads};
use super::vocabulary::OtKind;
use crate::error::{Error, Violation};

/// The choice corrections of `n` derandomised OTs, at their OT sender:
/// the chooser sends its random choices XOR the bits it wants
/// ([`KIND_FLIPS`]), as the weighted sums, the inner product, the CGS
/// leaves and the union's slots all do.
pub(super) async fn recv_flips(ch: &mut Channel, n: usize) -> Result<Bits, Error> {
    let bytes = recv_exact(ch, KIND_FLIPS, n.div_ceil(8)).await?;
    Bits::from_bytes(&bytes, n).ok_or_else(|| Violation::Invalid("OT choice corrections").into())
}

/// Most OTs made by one extension here: keeps each step's memory at a few
/// tens of MB whatever the total, and matches one silent part.
pub const CHUNK: usize = psikit_ot::silent::params::MAX_PART;

/// The sending side of `n` random OTs: both messages.
pub struct Sent {
    pub m0: Vec<u128>,
    pub m1: Vec<u128>,
}

/// The receiving side: random choice bits and the chosen messages.
pub struct Received {
    pub choices: Bits,
    pub chosen: Vec<u128>,
}

/// This party's side of a batch of random OTs.
pub enum Either {
    Sent(Sent),
    Received(Received),
}

/// This party's side of a batch of random OTs, one bit of each message
/// kept (the AND triples and the switching network use no more).
pub enum LowBits {
    Sent { m0: Bits, m1: Bits },
    Received { choices: Bits, chosen: Bits },
}

/// A chunk of random OTs as the extension made them: silent OT's
/// correlations are hashed only when the consumer says how much of each
/// message it keeps ([`Chunk::whole`] or [`Chunk::low_bits`]).
pub enum Chunk {
    /// Silent sender: `q` and `Δ`; the messages are `H(q)`, `H(q ⊕ Δ)`.
    SilentSent {
        q: Zeroizing<Vec<u128>>,
        delta: u128,
    },
    /// Silent receiver: its choice bits and `t`; its messages are `H(t)`.
    SilentReceived {
        choices: ChoiceBits,
        t: Zeroizing<Vec<u128>>,
    },
    /// IKNP's random OTs, hashed by the extension.
    Hashed(Either),
}

impl Chunk {
    /// Whole 128-bit messages.
    pub fn whole(self) -> Either {
        match self {
            Chunk::SilentSent { q, delta } => {
                let hash = |offset: u128| {
                    let mut m: Vec<u128> = q.iter().map(|x| x ^ offset).collect();
                    m.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
                    m
                };
                Either::Sent(Sent {
                    m0: hash(0),
                    m1: hash(delta),
                })
            }
            Chunk::SilentReceived { choices, t } => {
                let mut chosen = t.to_vec();
                chosen.par_chunks_mut(1 << 12).for_each(aes_hash::cr_many);
                Either::Received(Received {
                    choices: bits_of(&choices),
                    chosen,
                })
            }
            Chunk::Hashed(ots) => ots,
        }
    }

    /// Bit 0 of every message. Silent OT's are hashed 64 at a time into a
    /// buffer on the stack and packed at once, never written out whole.
    pub fn low_bits(self) -> LowBits {
        match self {
            Chunk::SilentSent { q, delta } => LowBits::Sent {
                m0: hashed_low_bits(&q, 0),
                m1: hashed_low_bits(&q, delta),
            },
            Chunk::SilentReceived { choices, t } => LowBits::Received {
                choices: bits_of(&choices),
                chosen: hashed_low_bits(&t, 0),
            },
            Chunk::Hashed(Either::Sent(s)) => LowBits::Sent {
                m0: low_bits_of(&s.m0),
                m1: low_bits_of(&s.m1),
            },
            Chunk::Hashed(Either::Received(r)) => LowBits::Received {
                choices: r.choices,
                chosen: low_bits_of(&r.chosen),
            },
        }
    }
}

/// This party's side of base OTs made by [`Rots::forward_base`].
pub enum Base {
    Sent(BaseSenderOutput),
    Received(BaseReceiverOutput),
}

/// One direction's OT extension at this party.
pub enum Side {
    SilentSender(SilentSender),
    SilentReceiver(SilentReceiver),
    IknpSender(OtExtSender),
    IknpReceiver(OtExtReceiver),
}

/// One party's random-OT sources.
pub struct Rots {
    leader: bool,
    sid: SessionId,
    config: ExtConfig,
    forward: Side,
    reverse: Option<Side>,
    /// The next small VOLEs, prepared ahead ([`prepare_chunks`]): the
    /// forward pipeline's first chunks.
    prepared: Ahead,
    /// Where the silent extensions' time went, summed.
    times: Times,
}

impl Rots {
    /// The forward direction: `silent` (the OPRF's session) for silent OT,
    /// fresh IKNP base OTs otherwise.
    pub async fn new(
        ch: &mut Channel,
        sid: &SessionId,
        kind: OtKind,
        leader: bool,
        config: &ExtConfig,
        silent: Side,
    ) -> Result<Self, Error> {
        let forward = match kind {
            OtKind::Silent => silent,
            OtKind::Iknp | OtKind::Kk13 => {
                Side::iknp(ch, &sid.derive("cpsi-forward"), leader, config).await?
            }
        };
        Ok(Self::with_forward(leader, sid, config, forward))
    }

    fn with_forward(leader: bool, sid: &SessionId, config: &ExtConfig, forward: Side) -> Self {
        Self {
            leader,
            sid: *sid,
            config: config.clone(),
            forward,
            reverse: None,
            prepared: Ahead::default(),
            times: Times::default(),
        }
    }

    /// Hands over small VOLEs this party prepared ahead for the first
    /// chunks of its next forward pipeline ([`prepare_chunks`]).
    pub fn use_prepared(&mut self, prepared: Ahead) {
        self.prepared = prepared;
    }

    /// Refuses a forward extension other than the prepared ones while they
    /// wait: both parties number extensions in the order they start.
    fn nothing_prepared(&self) -> Result<(), Error> {
        match self.prepared.is_empty() {
            true => Ok(()),
            false => Err(Error::Internal(
                "a forward extension before the prepared ones",
            )),
        }
    }

    /// Random OTs on IKNP alone, for a short run with no OPRF session to
    /// reuse: a job's last step, which needs only the adder's few hundred
    /// AND triples.
    pub async fn iknp(
        ch: &mut Channel,
        sid: &SessionId,
        leader: bool,
        config: &ExtConfig,
    ) -> Result<Self, Error> {
        let forward = Side::iknp(ch, &sid.derive("cpsi-forward"), leader, config).await?;
        Ok(Self::with_forward(leader, sid, config, forward))
    }

    /// `n` random OTs, the leader sending if `leader_sends`.
    pub async fn one_way(
        &mut self,
        ch: &mut Channel,
        n: usize,
        leader_sends: bool,
    ) -> Result<Either, Error> {
        Ok(self.one_way_chunk(ch, n, leader_sends).await?.whole())
    }

    async fn one_way_chunk(
        &mut self,
        ch: &mut Channel,
        n: usize,
        leader_sends: bool,
    ) -> Result<Chunk, Error> {
        let side = match leader_sends {
            true => {
                self.nothing_prepared()?;
                &mut self.forward
            }
            false => {
                if self.reverse.is_none() {
                    let side = self.reverse_side(ch).await?;
                    self.reverse = Some(side);
                }
                self.reverse.as_mut().expect("set up above")
            }
        };
        side.run(ch, n, None, &mut self.times).await?.ots()
    }

    /// The reverse direction: IKNP on [`BASE_OTS`] forward random OTs,
    /// whichever OT the forward direction runs. A silent set-up of its own
    /// (public-key base OTs, then trees and a code for every extension)
    /// cost the sum and the union 0.2-0.35 s at 2^20 bins; IKNP's
    /// extension is a transpose and two hashes per OT, for 128 bits of
    /// traffic per OT from the leader.
    async fn reverse_side(&mut self, ch: &mut Channel) -> Result<Side, Error> {
        let sid = self.sid.derive("cpsi-reverse");
        let (s, c) = (Security::SemiHonest, self.config.clone());
        Ok(match self.forward_base(ch, BASE_OTS).await? {
            Base::Sent(base) => {
                Side::IknpReceiver(OtExtReceiver::from_base_ots(&base, &sid, s, c, &mut OsRng)?)
            }
            Base::Received(base) => {
                Side::IknpSender(OtExtSender::from_base_ots(&base, &sid, s, c, &mut OsRng)?)
            }
        })
    }

    /// `n` forward random OTs as the base OTs of another extension (KK13's,
    /// module `cgs`, and the reverse direction's IKNP) without public-key
    /// work: the leader's side as base-OT sender, the other's as base-OT
    /// receiver (so the other party is that extension's sender). Silent
    /// OT's correlations are hashed to independent keys as every forward
    /// random OT is ([`Chunk::whole`]).
    pub async fn forward_base(&mut self, ch: &mut Channel, n: usize) -> Result<Base, Error> {
        self.nothing_prepared()?;
        match &mut self.forward {
            Side::IknpSender(s) => Ok(Base::Sent(s.extend(ch, n).await?.to_base_sender(0..n))),
            Side::IknpReceiver(r) => {
                let choices = ChoiceBits::random(n, &mut OsRng);
                let ots = r.extend(ch, &choices).await?;
                Ok(Base::Received(ots.to_base_receiver(0..n)))
            }
            silent => match silent
                .run(ch, n, None, &mut self.times)
                .await?
                .ots()?
                .whole()
            {
                Either::Sent(s) => {
                    let keys = s.m0.into_iter().zip(s.m1).map(|(a, b)| [a, b]);
                    Ok(Base::Sent(BaseSenderOutput::from_keys(keys.collect())))
                }
                Either::Received(r) => {
                    let choices = ChoiceBits::from_bools(&r.choices.iter().collect::<Vec<_>>());
                    Ok(Base::Received(BaseReceiverOutput::from_keys(
                        choices, r.chosen,
                    )?))
                }
            },
        }
    }

    /// `total` forward random OTs in chunks of at most [`CHUNK`], each
    /// handed to `sink` as soon as it is ready. A silent receiver reads
    /// the next chunk's trees before compressing the current one and keeps
    /// [`AHEAD`] extensions started, so the sender expands the next chunks
    /// while the receiver finishes chunk `k`.
    pub async fn forward_chunks(
        &mut self,
        ch: &mut Channel,
        total: usize,
        mut sink: impl FnMut(Chunk),
    ) -> Result<(), Error> {
        self.forward_made(ch, &[(total, None)], Made::ots, |_, c| sink(c))
            .await
    }

    /// Forward small VOLEs (silent OT only) for `jobs`, each a count and
    /// its values' bits, in one pipeline of chunks as
    /// [`Rots::forward_chunks`] makes random OTs; `sink` gets each chunk
    /// with its job's index.
    pub async fn forward_small_chunks(
        &mut self,
        ch: &mut Channel,
        jobs: &[(usize, u32)],
        sink: impl FnMut(usize, SmallChunk),
    ) -> Result<(), Error> {
        self.forward_made(ch, &small_jobs(jobs), Made::small, sink)
            .await
    }

    /// Whether this party sends the forward OTs.
    pub fn leader(&self) -> bool {
        self.leader
    }

    /// Whether the forward direction makes small VOLEs (silent OT).
    pub fn has_small_voles(&self) -> bool {
        matches!(
            self.forward,
            Side::SilentSender(_) | Side::SilentReceiver(_)
        )
    }

    /// Runs `jobs` (each a count and what to make: random OTs, or small
    /// VOLEs of that many bits) as one pipeline of chunks, job after job,
    /// handing `sink` each chunk with its job's index: one pipeline's
    /// start and end are where one party waits for the other, so jobs that
    /// follow each other share one.
    async fn forward_made<T>(
        &mut self,
        ch: &mut Channel,
        jobs: &[(usize, Option<u32>)],
        want: fn(Made) -> Result<T, Error>,
        mut sink: impl FnMut(usize, T),
    ) -> Result<(), Error> {
        let chunks = chunks_of(jobs);
        if let Side::SilentReceiver(r) = &mut self.forward {
            let prepared = match &mut self.prepared {
                Ahead::Received(prepared) => prepared,
                Ahead::Sent(_) => return Err(Error::Internal("a sender's prepared VOLEs")),
            };
            let mut to_start = chunks.iter();
            let mut started = VecDeque::with_capacity(AHEAD);
            for &(_, n, small) in to_start.by_ref().take(AHEAD) {
                started.push_back(start_silent(r, prepared, ch, n, small).await?);
            }
            for &(job, _, small) in &chunks {
                let Some(mut pending) = started.pop_front() else {
                    break;
                };
                pending.receive_trees(ch).await?;
                if let Some(&(_, n, small)) = to_start.next() {
                    started.push_back(start_silent(r, prepared, ch, n, small).await?);
                }
                let made = match small {
                    None => {
                        let out = pending.finish(ch).await?;
                        self.times += out.times;
                        Made::Ots(Chunk::SilentReceived {
                            choices: out.choices,
                            t: out.t,
                        })
                    }
                    Some(bits) => {
                        let out = pending.finish_small_vole(ch).await?;
                        self.times += out.times;
                        Made::Small(SmallChunk::Received {
                            c: out.c,
                            a: out.a,
                            bits,
                        })
                    }
                };
                sink(job, want(made)?);
            }
            return self.nothing_prepared();
        }
        for (job, n, small) in chunks {
            let made = match self.next_sent(n, small)? {
                Some(p) => self.forward.finish_prepared(ch, p, &mut self.times).await?,
                None => self.forward.run(ch, n, small, &mut self.times).await?,
            };
            sink(job, want(made)?);
        }
        self.nothing_prepared()
    }

    /// The sender's next prepared small VOLE, which must be the extension
    /// of `n` asked for, if any is left.
    fn next_sent(&mut self, n: usize, small: Option<u32>) -> Result<Option<PreparedVole>, Error> {
        let Ahead::Sent(prepared) = &mut self.prepared else {
            return Ok(None);
        };
        match prepared.pop_front() {
            Some(p) if (Some(p.bits()), p.count()) != (small, n) => {
                Err(Error::Internal("a prepared small VOLE out of order"))
            }
            next => Ok(next),
        }
    }

    /// Where this party's silent extensions spent their time so far.
    pub fn times(&self) -> Times {
        self.times
    }
}

/// Extensions a silent receiver keeps started (its base correlations
/// sent) ahead of the one it compresses: the sender may run that many
/// chunks ahead, so it does not wait for the next chunk's base
/// correlations while the receiver compresses (its chunks cost about as
/// much as the sender's). Each holds only its base OTs until its trees
/// arrive.
const AHEAD: usize = 2;

/// Most small VOLEs a silent receiver prepares ahead ([`prepare_chunks`]):
/// up to 2 MiB of noise code each, so 64 MiB at most whatever the run.
const MOST_PREPARED: usize = 32;

/// Most small VOLEs a silent sender prepares ahead ([`prepare_chunks`]):
/// each holds its 32 MiB `B` until used. Its work fills the sender's wait
/// for the masked table only up to that wait: past it, it delays the
/// hint, and the comparison it leaves is the receiver's as much as the
/// sender's, so nothing is won back (at 2^20, 2-4 chunks were 4-7% faster
/// than none, 9 and 13 chunks 20-40% slower).
const MOST_SENT_AHEAD: usize = 3;

/// Small VOLEs a silent party made ahead for the first chunks of its next
/// forward pipeline ([`prepare_chunks`]).
pub enum Ahead {
    /// The receiver's: its noise drawn and encoded.
    Received(VecDeque<Prepared>),
    /// The sender's: trees expanded and `B` encoded.
    Sent(VecDeque<PreparedVole>),
}

impl Default for Ahead {
    fn default() -> Self {
        Ahead::Received(VecDeque::new())
    }
}

impl Ahead {
    fn is_empty(&self) -> bool {
        match self {
            Ahead::Received(p) => p.is_empty(),
            Ahead::Sent(p) => p.is_empty(),
        }
    }
}

/// `jobs` (each a count and what to make) cut into the pipeline's chunks
/// of at most [`CHUNK`]: (job, count, small VOLE bits).
fn chunks_of(jobs: &[(usize, Option<u32>)]) -> Vec<(usize, usize, Option<u32>)> {
    jobs.iter()
        .enumerate()
        .flat_map(|(job, &(total, small))| {
            (0..total.div_ceil(CHUNK)).map(move |k| (job, (total - k * CHUNK).min(CHUNK), small))
        })
        .collect()
}

/// Small-VOLE jobs (count, bits) as [`Rots::forward_made`] takes them.
fn small_jobs(jobs: &[(usize, u32)]) -> Vec<(usize, Option<u32>)> {
    jobs.iter().map(|&(n, bits)| (n, Some(bits))).collect()
}

/// The small VOLEs of the first chunks of a forward pipeline of
/// small-VOLE `jobs` ([`Rots::forward_small_chunks`]), prepared ahead for
/// [`Rots::use_prepared`] by a silent party: the part of its work in a
/// chunk that needs nothing from the peer (and no message). A receiver
/// draws and encodes the noise of up to [`MOST_PREPARED`]; a sender
/// expands the trees and encodes `B` of up to [`MOST_SENT_AHEAD`]. Nothing
/// else may start on `side` in between; other sides prepare nothing.
pub fn prepare_chunks(side: &mut Side, jobs: &[(usize, u32)]) -> Result<Ahead, Error> {
    let chunks = chunks_of(&small_jobs(jobs)).into_iter();
    let bits = |job: usize| jobs[job].1;
    Ok(match side {
        Side::SilentReceiver(r) => Ahead::Received(
            chunks
                .take(MOST_PREPARED)
                .map(|(job, n, _)| r.prepare_small_vole(n, bits(job), &mut OsRng))
                .collect::<Result<_, _>>()?,
        ),
        Side::SilentSender(s) => Ahead::Sent(
            chunks
                .take(MOST_SENT_AHEAD)
                .map(|(job, n, _)| s.prepare_vole(n, bits(job), &mut OsRng))
                .collect::<Result<_, _>>()?,
        ),
        Side::IknpSender(_) | Side::IknpReceiver(_) => Ahead::default(),
    })
}

/// What one extension made: random OTs, or small VOLEs.
enum Made {
    Ots(Chunk),
    Small(SmallChunk),
}

impl Made {
    fn ots(self) -> Result<Chunk, Error> {
        match self {
            Made::Ots(chunk) => Ok(chunk),
            Made::Small(_) => Err(Error::Internal("random OTs asked for")),
        }
    }

    fn small(self) -> Result<SmallChunk, Error> {
        match self {
            Made::Small(chunk) => Ok(chunk),
            Made::Ots(_) => Err(Error::Internal("small VOLEs asked for")),
        }
    }
}

/// Starts a silent receiver's extension of `n`: correlated OTs, or small
/// VOLEs of `small` bits.
/// Starts the next forward extension: the first of `prepared` if any,
/// which must be the one asked for.
async fn start_silent(
    r: &mut SilentReceiver,
    prepared: &mut VecDeque<Prepared>,
    ch: &mut Channel,
    n: usize,
    small: Option<u32>,
) -> Result<Pending<u8>, Error> {
    if let Some(p) = prepared.pop_front() {
        if (Some(p.bits()), p.count()) != (small, n) {
            return Err(Error::Internal("a prepared small VOLE out of order"));
        }
        return Ok(r.start_prepared(ch, p).await?);
    }
    Ok(match small {
        None => r.start_cot(ch, n, &mut OsRng).await?,
        Some(bits) => r.start_small_vole(ch, n, bits, &mut OsRng).await?,
    })
}

impl Side {
    /// IKNP on fresh public-key base OTs (silent OT's forward direction
    /// is the OPRF's session).
    async fn iknp(
        ch: &mut Channel,
        sid: &SessionId,
        sending: bool,
        config: &ExtConfig,
    ) -> Result<Self, Error> {
        let (s, c) = (Security::SemiHonest, config.clone());
        Ok(match sending {
            true => Side::IknpSender(OtExtSender::setup(ch, sid, s, c, &mut OsRng).await?),
            false => Side::IknpReceiver(OtExtReceiver::setup(ch, sid, s, c, &mut OsRng).await?),
        })
    }

    /// A silent sender's [`PreparedVole`], finished: its small VOLEs.
    async fn finish_prepared(
        &mut self,
        ch: &mut Channel,
        prepared: PreparedVole,
        times: &mut Times,
    ) -> Result<Made, Error> {
        let Side::SilentSender(s) = self else {
            return Err(Error::Internal("a prepared VOLE at a silent receiver"));
        };
        let bits = prepared.bits();
        let b = s.finish_prepared(ch, prepared).await?;
        *times += s.last_times();
        Ok(Made::Small(SmallChunk::Sent {
            b,
            delta: s.delta(),
            bits,
        }))
    }

    /// `n` random OTs, or small VOLEs of `small` bits (silent only); a
    /// silent extension adds where its time went to `times`.
    async fn run(
        &mut self,
        ch: &mut Channel,
        n: usize,
        small: Option<u32>,
        times: &mut Times,
    ) -> Result<Made, Error> {
        Ok(match (self, small) {
            (Side::SilentSender(s), None) => Made::Ots(Chunk::SilentSent {
                delta: s.delta(),
                q: match n {
                    0 => Default::default(),
                    _ => {
                        let q = s.cot(ch, n, &mut OsRng).await?;
                        *times += s.last_times();
                        q
                    }
                },
            }),
            (Side::SilentSender(s), Some(bits)) => {
                let b = s.vole(ch, n, bits, &mut OsRng).await?;
                *times += s.last_times();
                Made::Small(SmallChunk::Sent {
                    b,
                    delta: s.delta(),
                    bits,
                })
            }
            (Side::SilentReceiver(r), None) => Made::Ots(match n {
                0 => Chunk::SilentReceived {
                    choices: ChoiceBits::zeros(0),
                    t: Default::default(),
                },
                _ => {
                    let out = r.cot(ch, n, &mut OsRng).await?;
                    *times += out.times;
                    Chunk::SilentReceived {
                        choices: out.choices,
                        t: out.t,
                    }
                }
            }),
            (Side::SilentReceiver(r), Some(bits)) => {
                let out = r
                    .start_small_vole(ch, n, bits, &mut OsRng)
                    .await?
                    .finish_small_vole(ch)
                    .await?;
                *times += out.times;
                Made::Small(SmallChunk::Received {
                    c: out.c,
                    a: out.a,
                    bits,
                })
            }
            (Side::IknpSender(s), None) => {
                let ots = s.extend_random(ch, n).await?;
                Made::Ots(Chunk::Hashed(Either::Sent(Sent {
                    m0: ots.messages_for(false).to_vec(),
                    m1: ots.messages_for(true).to_vec(),
                })))
            }
            (Side::IknpReceiver(r), None) => {
                let choices = ChoiceBits::random(n, &mut OsRng);
                let ots = r.extend_random(ch, &choices).await?;
                Made::Ots(Chunk::Hashed(Either::Received(Received {
                    choices: bits_of(&choices),
                    chosen: ots.messages().to_vec(),
                })))
            }
            (Side::IknpSender(_) | Side::IknpReceiver(_), Some(_)) => {
                return Err(Error::Internal("small VOLEs come from silent OT"))
            }
        })
    }
}

fn bits_of(choices: &ChoiceBits) -> Bits {
    let words = choices
        .as_bytes()
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
    Bits::from_words(words, choices.len())
}

/// Test helper: one party's random-OT sources on a fresh session, silent
/// (the leader as silent sender) or IKNP.
#[cfg(test)]
pub(super) async fn test_rots(ch: &mut Channel, label: &[u8], leader: bool, silent: bool) -> Rots {
    let (sid, ext) = (SessionId::new(label), ExtConfig::default());
    if !silent {
        return Rots::iknp(ch, &sid, leader, &ext).await.expect("IKNP");
    }
    let s = Security::SemiHonest;
    let side = match leader {
        true => Side::SilentSender(
            SilentSender::setup(ch, &sid, s, ext.clone(), &mut OsRng)
                .await
                .expect("silent sender"),
        ),
        false => Side::SilentReceiver(
            SilentReceiver::setup(ch, &sid, s, ext.clone(), &mut OsRng)
                .await
                .expect("silent receiver"),
        ),
    };
    Rots::new(ch, &sid, OtKind::Silent, leader, &ext, side)
        .await
        .expect("silent OTs")
}

#[cfg(test)]
mod tests {
    use super::super::pads::{hashed_lows, hashed_pads};
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pads_hold_the_low_bits_of_each_offset_hash() {
        let mut rng = StdRng::seed_from_u64(3);
        for (n, width, keep) in [
            (1usize, 4usize, 1u32),
            (37, 16, 1),
            (2000, 16, 4),
            (70, 4, 2),
        ] {
            let xs: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
            let offsets: Vec<u128> = (0..width).map(|_| rng.gen()).collect();
            let words = hashed_pads(&xs, &offsets, keep, |w| w);
            let lows = hashed_lows(&xs, keep);
            let mask = (1u64 << keep) - 1;
            for ((x, w), low) in xs.iter().zip(&words).zip(&lows) {
                for (j, o) in offsets.iter().enumerate() {
                    let want = aes_hash::cr(x ^ o) as u64 & mask;
                    assert_eq!(w >> (keep as usize * j) & mask, want, "offset {j}");
                }
                assert_eq!(w >> (keep as usize * width - 1) >> 1, 0);
                assert_eq!(u64::from(*low), aes_hash::cr(*x) as u64 & mask);
            }
        }
    }
}
