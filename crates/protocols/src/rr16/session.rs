//! What both RR16 parties do the same way: hello, coin toss, parameters,
//! Bloom filter buckets and summary values.

use std::time::{Duration, Instant};

use psikit_ot::gather::gather;
use psikit_ot::{OtError, OtExtReceiver, OtExtSender, SessionId};
use psikit_transport::Channel;
use rand::rngs::OsRng;
use rand::RngCore;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use super::bloom::{BloomHasher, Positions};
use super::config::Rr16Config;
use super::messages::{self as msg, Commit, Nonce, Open};
use super::params::Rr16Params;
use crate::common::summaries::{pack, summary_bits, Exchange, Summary};
use crate::common::two_party::{hello, Mode, Terms};
use crate::error::Error;

/// What the hello and coin toss established.
pub struct Session {
    pub params: Rr16Params,
    pub peer_set_size: u64,
    pub hasher: BloomHasher,
    pub sid: SessionId,
    /// How the summary values travel (their length set by both set sizes).
    pub exchange: Exchange,
}

/// Replaces a broken-connection error with the reason the peer gave for
/// aborting, if it sent one (see [`Channel::explain`]). Transport errors met
/// inside the OT layer count too: with unconfirmed extensions, a peer's
/// abort may surface while we are in the middle of the next one.
pub async fn explained<T>(ch: &mut Channel, result: Result<T, Error>) -> Result<T, Error> {
    match result {
        Err(Error::Transport(e) | Error::Ot(OtError::Transport(e))) => {
            Err(Error::Transport(ch.explain(e).await))
        }
        other => other,
    }
}

/// Commit-then-open coin toss for the Bloom filter seed: the sender
/// commits first, so neither side can bias the seed after seeing the
/// other's share.
pub async fn coin_toss(ch: &mut Channel, is_sender: bool) -> Result<[u8; 32], Error> {
    let mut share = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut share);
    let (sender_share, receiver_share) = if is_sender {
        ch.send_msg(&Commit(commit(&share))).await?;
        let Nonce(theirs) = ch.recv_msg(()).await?;
        ch.send_msg(&Open(share)).await?;
        (share, theirs)
    } else {
        let Commit(commitment) = ch.recv_msg(()).await?;
        ch.send_msg(&Nonce(share)).await?;
        let Open(theirs) = ch.recv_msg(()).await?;
        if commit(&theirs) != commitment {
            return Err(Error::Aborted(
                "the sender's coin-toss opening does not match its commitment".into(),
            ));
        }
        (theirs, share)
    };
    Ok(Sha256::new()
        .chain_update(b"psikit-rr16-seed-v1")
        .chain_update(sender_share)
        .chain_update(receiver_share)
        .finalize()
        .into())
}

fn commit(share: &[u8; 32]) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"psikit-rr16-commit-v1")
        .chain_update(share)
        .finalize()
        .into()
}

/// Runs hello and coin toss and derives everything both sides need.
pub async fn establish(
    ch: &mut Channel,
    cfg: &Rr16Config,
    own_size: u64,
    is_sender: bool,
) -> Result<Session, Error> {
    let terms = Terms {
        mode: Mode {
            malicious: cfg.malicious,
            low_comm: false,
            reveal: cfg.reveal_to_sender,
        },
        key_format: &cfg.key_format,
        set_size: own_size,
        max_peer_size: cfg.max_set_size,
    };
    let peer_set_size = hello::<{ msg::PROTOCOL_ID }>(ch, &terms).await?;
    let receiver_size = if is_sender { peer_set_size } else { own_size };
    let sender_size = if is_sender { own_size } else { peer_set_size };
    let params = cfg.params_for(receiver_size)?;
    let seed = coin_toss(ch, is_sender).await?;
    let sid = SessionId::new(
        &[
            &seed[..],
            &sender_size.to_be_bytes(),
            &receiver_size.to_be_bytes(),
        ]
        .concat(),
    );
    Ok(Session {
        hasher: BloomHasher::new(seed, params.k, params.n_bf),
        params,
        peer_set_size,
        sid,
        exchange: Exchange {
            protocol: msg::PROTOCOL_ID,
            summaries: msg::KIND_SUMMARIES,
            reveal: msg::KIND_REVEAL,
            bits: summary_bits(sender_size, receiver_size, cfg.statistical_bits()?),
        },
    })
}

/// Division by a fixed divisor without a hardware divide (64-bit `div`
/// costs tens of cycles, and bucketing does one per Bloom filter position):
/// Lemire, Kaser and Kurz, "Faster remainder by direct computation" (2019),
/// exact for 32-bit dividends. Larger dividends use plain division.
struct Divisor {
    d: u64,
    /// `floor((2^64 - 1) / d) + 1`, or 0 when `d` is 1 or exceeds 32 bits.
    m: u64,
}

impl Divisor {
    fn new(d: u64) -> Self {
        assert!(d > 0, "division by zero");
        let m = match d <= u64::from(u32::MAX) {
            // d = 1 overflows: 0 selects plain division there too.
            true => (u64::MAX / d).checked_add(1).unwrap_or(0),
            false => 0,
        };
        Self { d, m }
    }

    /// `(n / d, n % d)`.
    fn div_rem(&self, n: u64) -> (u64, u64) {
        if self.m == 0 || n > u64::from(u32::MAX) {
            return (n / self.d, n % self.d);
        }
        let q = ((u128::from(self.m) * u128::from(n)) >> 64) as u64;
        let low = self.m.wrapping_mul(n);
        let r = ((u128::from(low) * u128::from(self.d)) >> 64) as u64;
        (q, r)
    }
}

impl Session {
    /// For each chunk, the (position in segment, item) pairs of every
    /// item's `h*` positions, packed as `pos << 32 | item`. Items are in
    /// order within a chunk, so folding touches accumulators sequentially.
    pub fn buckets(&self, items: &[Vec<u8>]) -> Vec<Vec<u64>> {
        const BLOCK: usize = 1 << 14;
        let p = &self.params;
        let k = p.k as usize;
        let segment = Divisor::new(p.bf_per_chunk);
        // A bucket's size is binomial around `expected`; ten standard
        // deviations of headroom avoid a reallocation (which would copy the
        // bucket and double its memory) in all but negligible cases.
        let mean = (items.len() as u64 * u64::from(p.k)) / p.chunks;
        let expected = mean + 10 * (mean as f64).sqrt() as u64 + 64;
        let mut buckets: Vec<Vec<u64>> = (0..p.chunks)
            .map(|_| Vec::with_capacity(expected as usize))
            .collect();
        // Hash a block in parallel into `k` slots per item, then distribute
        // sequentially (keeps items in order within each bucket).
        let mut slots = vec![0u64; BLOCK.min(items.len()) * k];
        let mut counts = vec![0usize; BLOCK.min(items.len())];
        for (block_no, block) in items.chunks(BLOCK).enumerate() {
            let (slots, counts) = (&mut slots[..block.len() * k], &mut counts[..block.len()]);
            slots
                .par_chunks_mut(k)
                .zip(counts.par_iter_mut())
                .zip(block.par_iter())
                .for_each_init(Positions::default, |scratch, ((slot, count), x)| {
                    self.hasher.positions(x, scratch);
                    let positions = scratch.as_slice();
                    slot[..positions.len()].copy_from_slice(positions);
                    *count = positions.len();
                });
            for (offset, (slot, &count)) in slots.chunks(k).zip(counts.iter()).enumerate() {
                let item = (block_no * BLOCK + offset) as u64;
                for &j in &slot[..count] {
                    let (chunk, pos) = segment.div_rem(j);
                    buckets[chunk as usize].push((pos << 32) | item);
                }
            }
        }
        buckets
    }

    /// `H(x || acc)` truncated to the summary length.
    pub fn summary(&self, item: &[u8], acc: u128) -> Summary {
        let digest = Sha256::new()
            .chain_update(b"psikit-rr16-summary-v1")
            .chain_update((item.len() as u64).to_le_bytes())
            .chain_update(item)
            .chain_update(acc.to_le_bytes())
            .finalize();
        pack(&digest, self.exchange.bits)
    }
}

/// Bucket entries hashed per batch: enough for AES pipelining and rayon
/// work units, small enough to stay in cache.
const FOLD_BATCH: usize = 2048;
/// Batches hashed (in parallel) before they are folded in order.
const FOLD_ROUND: usize = 32 * FOLD_BATCH;

/// XORs the random-OT message of OT `pi[pos]` into `acc[item]` for every
/// bucket entry `(pos, item)`. `messages(indices, out)` fills `out` with the
/// messages of `indices` (a batched, on-demand hash). Batches are hashed in
/// parallel a round at a time, then folded in order into `acc`.
pub fn fold(
    acc: &mut [u128],
    bucket: &[u64],
    pi: &[u32],
    messages: impl Fn(&[u32], &mut [u128]) + Sync,
) {
    let mut hashed = vec![0u128; FOLD_ROUND.min(bucket.len())];
    for round in bucket.chunks(FOLD_ROUND) {
        let hashed = &mut hashed[..round.len()];
        hashed
            .par_chunks_mut(FOLD_BATCH)
            .zip(round.par_chunks(FOLD_BATCH))
            .for_each_init(Vec::new, |indices, (out, entries)| {
                ot_indices(entries, pi, indices);
                messages(indices, out);
            });
        for (&e, m) in round.iter().zip(hashed.iter()) {
            acc[(e & 0xffff_ffff) as usize] ^= m;
        }
    }
    hashed.zeroize();
}

/// How long `work` took.
pub fn timed(work: impl FnOnce()) -> Duration {
    let t = std::time::Instant::now();
    work();
    t.elapsed()
}

/// `indices[j] = pi[pos_j]` for the bucket entries `(pos_j, item_j)`.
/// Positions are random and `pi` (4 bytes per filter position of the
/// chunk, 4 MiB at 2^20) outgrows the L2 cache, so the lookups are
/// prefetched (they were a third of the fold's time before).
fn ot_indices(entries: &[u64], pi: &[u32], indices: &mut Vec<u32>) {
    indices.clear();
    gather(pi, entries, |&e| (e >> 32) as usize, |_, i| indices.push(i));
}

/// A set of OT indices within one chunk (the opened OTs, or those π has
/// used), as a bitset: probed at random positions, it stays in cache where
/// a `Vec<bool>` would not.
#[derive(Clone)]
pub struct OtSet(Vec<u64>);

impl OtSet {
    pub fn new(len: usize) -> Self {
        Self(vec![0; len.div_ceil(64)])
    }

    /// The set of `indices`, all below `len`.
    pub fn from_indices(len: usize, indices: &[u32]) -> Self {
        let mut set = Self::new(len);
        for &i in indices {
            set.insert(i);
        }
        set
    }

    /// Adds `i`; returns whether it was absent. Panics if `i` is out of range.
    pub fn insert(&mut self, i: u32) -> bool {
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let absent = self.0[word] & bit == 0;
        self.0[word] |= bit;
        absent
    }

    pub fn contains(&self, i: u32) -> bool {
        self.0
            .get((i / 64) as usize)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
}

/// The OT extension of one role, as [`open`] sets it up.
pub trait OtRole: Sized {
    /// Whether this is the RR16 sender's side (the OT sender).
    const IS_SENDER: bool;

    /// Runs the base OTs and prepares the extension.
    fn setup(
        ch: &mut Channel,
        sid: &SessionId,
        cfg: &Rr16Config,
    ) -> impl std::future::Future<Output = Result<Self, Error>> + Send;
}

impl OtRole for OtExtSender {
    const IS_SENDER: bool = true;

    async fn setup(ch: &mut Channel, sid: &SessionId, cfg: &Rr16Config) -> Result<Self, Error> {
        let ext = cfg.ext_config()?;
        Ok(OtExtSender::setup(ch, sid, cfg.security(), ext, &mut OsRng).await?)
    }
}

impl OtRole for OtExtReceiver {
    const IS_SENDER: bool = false;

    async fn setup(ch: &mut Channel, sid: &SessionId, cfg: &Rr16Config) -> Result<Self, Error> {
        let ext = cfg.ext_config()?;
        Ok(OtExtReceiver::setup(ch, sid, cfg.security(), ext, &mut OsRng).await?)
    }
}

/// What both parties hold once the session is open, before the chunks.
pub struct Opened<Ot> {
    pub session: Session,
    pub ot: Ot,
    /// The party's items' Bloom positions, by chunk.
    pub buckets: Vec<Vec<u64>>,
    /// One fold accumulator per item.
    pub acc: Vec<u128>,
    pub phases: Phases,
    /// The channel's byte counts when the run began.
    pub start_bytes: (u64, u64),
}

/// The set-up both roles share: hello and coin toss ([`establish`]), the
/// base OTs of the party's role, then its items' buckets; timed as the
/// paper splits phases (set-up offline, buckets online).
pub async fn open<Ot: OtRole>(
    ch: &mut Channel,
    cfg: &Rr16Config,
    items: &[Vec<u8>],
) -> Result<Opened<Ot>, Error> {
    let start_bytes = (ch.bytes_sent(), ch.bytes_received());
    let mut phases = Phases::default();
    let t = Instant::now();
    let session = establish(ch, cfg, items.len() as u64, Ot::IS_SENDER).await?;
    let ot = Ot::setup(ch, &session.sid, cfg).await?;
    phases.offline += t.elapsed();
    let t = Instant::now();
    let buckets = session.buckets(items);
    let acc = vec![0u128; items.len()];
    phases.online += t.elapsed();
    Ok(Opened {
        session,
        ot,
        buckets,
        acc,
        phases,
        start_bytes,
    })
}

/// Time spent in input-independent work (OTs, cut-and-choose) and in the
/// rest, summed over chunks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub offline: Duration,
    pub online: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisor_matches_hardware_division() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for d in [
            1u64,
            2,
            3,
            7,
            1000,
            1 << 20,
            (1 << 20) + 1,
            1_048_573,
            u64::from(u32::MAX),
            1 << 33,
        ] {
            let div = Divisor::new(d);
            for n in [
                0u64,
                1,
                d - 1,
                d,
                d + 1,
                u64::from(u32::MAX),
                u64::from(u32::MAX) + 1,
                u64::MAX,
            ] {
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = x >> 32;
                assert_eq!(div.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
        }
    }
}
