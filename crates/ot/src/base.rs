//! Base OTs: the Masny-Rindal "endemic OT" on ristretto255.
//!
//! Daniel Masny and Peter Rindal, "Endemic Oblivious Transfer", CCS 2019
//! (ePrint 2019/706). The paper builds one-round OT from a key agreement and
//! a "programmable once public function" and proves it UC-secure against
//! malicious senders and receivers under the *endemic* notion (a corrupt
//! party may pick its own outputs, which is all OT extension — IKNP, KOS,
//! KK13 — needs from its base OTs), in the programmable random-oracle model.
//! For this Diffie-Hellman instantiation with four exponentiations per OT
//! the assumption is interactive DDH (the paper's 6-exponentiation variant
//! needs only DDH; see also Canetti-Sarkar-Wang, PKC 2020, for the
//! comparison). We use the key agreement over ristretto255 with the public
//! function built from a hash to the group:
//!
//! * sender: random scalar `a`, sends `A = a·G` (one `A` for the whole batch);
//! * receiver with choice `c`: random scalar `b`, `B = b·G`; a uniformly
//!   random point `r_{1-c}`, and `r_c = B − H(sid, i, r_{1-c})`; sends
//!   `(r_0, r_1)`, which are both uniform whatever `c` is;
//! * sender, for `x ∈ {0,1}`: `k_x = KDF(sid, i, A, r_0, r_1, a·(r_x + H(sid, i, r_{1-x})))`;
//! * receiver: `k_c = KDF(sid, i, A, r_0, r_1, b·A)`, equal to the sender's
//!   `k_c` because `r_c + H(r_{1-c}) = B`.
//!
//! `H` is `RistrettoPoint::from_uniform_bytes(SHA-512(...))` (Elligator,
//! indifferentiable from a random oracle to the group) and the KDF is
//! SHA-256; both bind the session id and the OT index. Both sides reject
//! non-canonical encodings and the identity point. A batch costs one message
//! each way, sent simultaneously.

use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use psikit_transport::{Channel, Message};
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;
use sha2::{Digest, Sha256, Sha512};
use subtle::{Choice, ConditionallySelectable};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::messages::{abort, malformed, BaseReceiverMessage, BaseSenderMessage, MAX_BASE_OTS};
use crate::session::SessionId;

/// The sender's outputs: two random 128-bit keys per OT.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct BaseSenderOutput {
    keys: Vec<[u128; 2]>,
}

/// The receiver's outputs: its choice bits and the chosen key of each OT.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct BaseReceiverOutput {
    choices: ChoiceBits,
    keys: Vec<u128>,
}

impl std::fmt::Debug for BaseSenderOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BaseSenderOutput({} OTs, keys hidden)", self.keys.len())
    }
}

impl std::fmt::Debug for BaseReceiverOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BaseReceiverOutput({} OTs, hidden)", self.keys.len())
    }
}

impl BaseSenderOutput {
    /// Wraps existing random-OT sender outputs (e.g. hashed outputs of an
    /// earlier extension, to bootstrap another one).
    pub fn from_keys(keys: Vec<[u128; 2]>) -> Self {
        Self { keys }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys `(k_0, k_1)` of each OT.
    pub fn keys(&self) -> &[[u128; 2]] {
        &self.keys
    }
}

impl BaseReceiverOutput {
    /// Wraps existing random-OT receiver outputs. Fails if the lengths differ.
    pub fn from_keys(choices: ChoiceBits, keys: Vec<u128>) -> Result<Self, OtError> {
        if choices.len() != keys.len() {
            return Err(OtError::InvalidArgument(format!(
                "{} choice bits for {} keys",
                choices.len(),
                keys.len()
            )));
        }
        Ok(Self { choices, keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn choices(&self) -> &ChoiceBits {
        &self.choices
    }

    /// The key `k_{c_i}` of each OT.
    pub fn keys(&self) -> &[u128] {
        &self.keys
    }
}

/// Hash to the group, bound to the session and OT index.
fn hash_to_group(sid: &SessionId, i: u32, point: &[u8; 32]) -> RistrettoPoint {
    let mut h = Sha512::new();
    h.update(b"psikit-ot/mr19/h2g/v1");
    h.update(sid.0);
    h.update(i.to_be_bytes());
    h.update(point);
    RistrettoPoint::from_uniform_bytes(&h.finalize().into())
}

/// Key derivation from the shared point and the transcript of OT `i`.
fn kdf(sid: &SessionId, i: u32, a: &[u8; 32], r: &[[u8; 32]; 2], shared: &RistrettoPoint) -> u128 {
    let mut h = Sha256::new();
    h.update(b"psikit-ot/mr19/kdf/v1");
    h.update(sid.0);
    h.update(i.to_be_bytes());
    h.update(a);
    h.update(r[0]);
    h.update(r[1]);
    h.update(shared.compress().as_bytes());
    let d = h.finalize();
    u128::from_le_bytes(d[..16].try_into().expect("16 bytes"))
}

/// Decodes a canonical, non-identity point.
fn decode_point(bytes: &[u8; 32], what: &'static str) -> Result<RistrettoPoint, OtError> {
    let p = CompressedRistretto(*bytes)
        .decompress()
        .ok_or(OtError::InvalidPoint(what))?;
    if p.is_identity() {
        return Err(OtError::InvalidPoint(what));
    }
    Ok(p)
}

fn check_count(count: usize) -> Result<u32, OtError> {
    if count == 0 || count > MAX_BASE_OTS {
        return Err(OtError::InvalidArgument(format!(
            "base OT count {count} outside 1..={MAX_BASE_OTS}"
        )));
    }
    Ok(count as u32)
}

/// Runs CPU-heavy `f` on `pool` if given, else on the caller's rayon
/// context. Inside a multi-threaded tokio runtime the worker thread is
/// handed back to tokio first (`block_in_place`), so other connections of a
/// server keep being served while this one computes.
pub(crate) fn run_in<T: Send>(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() -> T + Send) -> T {
    let run = || match pool {
        Some(p) => p.install(f),
        None => f(),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(run)
        }
        _ => run(),
    }
}

/// Base-OT sender: `count` random OTs; returns both keys of each.
pub async fn send<R: RngCore + CryptoRng>(
    chan: &mut Channel,
    sid: &SessionId,
    count: usize,
    rng: &mut R,
) -> Result<BaseSenderOutput, OtError> {
    send_in(chan, sid, count, rng, None).await
}

pub(crate) async fn send_in<R: RngCore + CryptoRng>(
    chan: &mut Channel,
    sid: &SessionId,
    count: usize,
    rng: &mut R,
    pool: Option<&rayon::ThreadPool>,
) -> Result<BaseSenderOutput, OtError> {
    let count32 = check_count(count)?;
    let a = Zeroizing::new(Scalar::random(rng));
    let big_a = (&*a * RISTRETTO_BASEPOINT_TABLE).compress().to_bytes();
    let offer = BaseSenderMessage {
        count: count32,
        point: big_a,
    };
    chan.send_msg(&offer).await?;

    // Decoded here rather than with `recv_msg`, so that a malformed
    // message is an `OtError` the peer is told about.
    let frame = chan
        .recv_expect(BaseReceiverMessage::PROTOCOL, BaseReceiverMessage::KIND)
        .await?;
    let pairs = match receiver_pairs(&frame.payload, count) {
        Ok(p) => p,
        Err(e) => return Err(abort(chan, e).await),
    };
    let keys = run_in(pool, || {
        pairs
            .par_iter()
            .enumerate()
            .map(|(i, r)| sender_keys(sid, i as u32, &a, &big_a, r))
            .collect::<Result<Vec<_>, _>>()
    });
    match keys {
        Ok(keys) => Ok(BaseSenderOutput { keys }),
        Err(e) => Err(abort(chan, e).await),
    }
}

/// Both keys of OT `i` from the receiver's pair `(r_0, r_1)`.
fn sender_keys(
    sid: &SessionId,
    i: u32,
    a: &Scalar,
    big_a: &[u8; 32],
    r: &[[u8; 32]; 2],
) -> Result<[u128; 2], OtError> {
    let r0 = decode_point(&r[0], "base OT receiver message")?;
    let r1 = decode_point(&r[1], "base OT receiver message")?;
    let p0 = r0 + hash_to_group(sid, i, &r[1]);
    let p1 = r1 + hash_to_group(sid, i, &r[0]);
    Ok([
        kdf(sid, i, big_a, r, &(a * p0)),
        kdf(sid, i, big_a, r, &(a * p1)),
    ])
}

/// The receiver's `(r_0, r_1)` of each OT, which must be `count`.
fn receiver_pairs(payload: &[u8], count: usize) -> Result<Vec<[[u8; 32]; 2]>, OtError> {
    let pairs = BaseReceiverMessage::decode(payload, ())
        .map_err(malformed)?
        .pairs;
    if pairs.len() != count {
        return Err(OtError::Mismatch(format!(
            "{} base OTs offered, {count} expected",
            pairs.len()
        )));
    }
    Ok(pairs)
}

/// Base-OT receiver: one random OT per choice bit; returns the chosen keys.
pub async fn receive<R: RngCore + CryptoRng>(
    chan: &mut Channel,
    sid: &SessionId,
    choices: &ChoiceBits,
    rng: &mut R,
) -> Result<BaseReceiverOutput, OtError> {
    receive_in(chan, sid, choices, rng, None).await
}

/// Per-OT secrets of the receiver, sampled sequentially from the caller's
/// RNG so the parallel part needs no RNG.
struct ReceiverSecret {
    b: Scalar,
    other: [u8; 64],
}

impl Drop for ReceiverSecret {
    fn drop(&mut self) {
        self.b.zeroize();
        self.other.zeroize();
    }
}

pub(crate) async fn receive_in<R: RngCore + CryptoRng>(
    chan: &mut Channel,
    sid: &SessionId,
    choices: &ChoiceBits,
    rng: &mut R,
    pool: Option<&rayon::ThreadPool>,
) -> Result<BaseReceiverOutput, OtError> {
    let count = choices.len();
    check_count(count)?;
    let secrets: Vec<ReceiverSecret> = (0..count)
        .map(|_| {
            let mut other = [0u8; 64];
            rng.fill_bytes(&mut other);
            ReceiverSecret {
                b: Scalar::random(rng),
                other,
            }
        })
        .collect();
    let pairs = run_in(pool, || {
        secrets
            .par_iter()
            .enumerate()
            .map(|(i, s)| receiver_pair(sid, i as u32, s, choices.get(i)))
            .collect()
    });
    let answer = BaseReceiverMessage { pairs };
    chan.send_msg(&answer).await?;

    // Decoded here rather than with `recv_msg`: see `send_in`.
    let frame = chan
        .recv_expect(BaseSenderMessage::PROTOCOL, BaseSenderMessage::KIND)
        .await?;
    let (big_a_bytes, big_a) = match sender_point(&frame.payload, count) {
        Ok(v) => v,
        Err(e) => return Err(abort(chan, e).await),
    };
    let keys = run_in(pool, || {
        secrets
            .par_iter()
            .zip(answer.pairs.par_iter())
            .enumerate()
            .map(|(i, (s, r))| kdf(sid, i as u32, &big_a_bytes, r, &(s.b * big_a)))
            .collect()
    });
    Ok(BaseReceiverOutput {
        choices: choices.clone(),
        keys,
    })
}

/// The receiver's `(r_0, r_1)` for OT `i`, placing the programmed point by
/// a constant-time select on the choice bit.
fn receiver_pair(sid: &SessionId, i: u32, s: &ReceiverSecret, choice: bool) -> [[u8; 32]; 2] {
    let big_b = &s.b * RISTRETTO_BASEPOINT_TABLE;
    let other = RistrettoPoint::from_uniform_bytes(&s.other);
    let other_bytes = other.compress().to_bytes();
    let programmed = big_b - hash_to_group(sid, i, &other_bytes);
    let c = Choice::from(u8::from(choice));
    let r0 = RistrettoPoint::conditional_select(&programmed, &other, c);
    let r1 = RistrettoPoint::conditional_select(&other, &programmed, c);
    [r0.compress().to_bytes(), r1.compress().to_bytes()]
}

/// The sender's point `A`, encoded and decoded, for a batch that must be
/// of `count` OTs.
fn sender_point(payload: &[u8], count: usize) -> Result<([u8; 32], RistrettoPoint), OtError> {
    let offer = BaseSenderMessage::decode(payload, ()).map_err(malformed)?;
    if offer.count as usize != count {
        return Err(OtError::Mismatch(format!(
            "sender runs {} base OTs, we run {count}",
            offer.count
        )));
    }
    Ok((
        offer.point,
        decode_point(&offer.point, "base OT sender message")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use psikit_transport::{Frame, Limits, Writer};
    use rand::SeedableRng;

    fn sid() -> SessionId {
        SessionId::new(b"base-test")
    }

    #[tokio::test]
    async fn outputs_are_consistent() {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let choices = ChoiceBits::random(128, &mut rng);
        let c2 = choices.clone();
        let s = tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(6);
            send(&mut a, &sid(), 128, &mut rng).await.unwrap()
        });
        let r = receive(&mut b, &sid(), &c2, &mut rng).await.unwrap();
        let s = s.await.unwrap();
        assert_eq!(s.len(), 128);
        for i in 0..128 {
            let [k0, k1] = s.keys()[i];
            assert_ne!(k0, k1);
            let c = choices.get(i);
            assert_eq!(r.keys()[i], if c { k1 } else { k0 });
        }
        assert_eq!(r.choices(), &choices);
    }

    #[tokio::test]
    async fn invalid_points_are_rejected() {
        // A receiver message carrying a non-canonical encoding (all 0xff)
        // and one carrying the identity.
        for bad in [[0xffu8; 32], [0u8; 32]] {
            let (mut a, mut b) = Channel::memory_pair(Limits::default());
            let s = tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(6);
                send(&mut a, &sid(), 1, &mut rng).await
            });
            let good = RistrettoPoint::random(&mut rand::rngs::StdRng::seed_from_u64(1));
            let pairs = vec![[bad, good.compress().to_bytes()]];
            b.send_msg(&BaseReceiverMessage { pairs }).await.unwrap();
            let err = s.await.unwrap().unwrap_err();
            assert!(matches!(err, OtError::InvalidPoint(_)), "{err}");
        }
        // A sender whose A is the identity.
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let r = tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(6);
            receive(&mut b, &sid(), &ChoiceBits::zeros(2), &mut rng).await
        });
        let identity = BaseSenderMessage {
            count: 2,
            point: [0; 32],
        };
        a.send_msg(&identity).await.unwrap();
        let err = r.await.unwrap().unwrap_err();
        assert!(matches!(err, OtError::InvalidPoint(_)), "{err}");
    }

    #[tokio::test]
    async fn short_and_mismatched_messages_are_errors() {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let s = tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(6);
            send(&mut a, &sid(), 4, &mut rng).await
        });
        let mut w = Writer::new();
        w.u32(4).bytes(&[1u8; 100]); // 4 pairs announced, 100 bytes present
        b.send(&Frame::new(
            BaseReceiverMessage::PROTOCOL,
            BaseReceiverMessage::KIND,
            w.into_bytes(),
        ))
        .await
        .unwrap();
        assert!(matches!(
            s.await.unwrap().unwrap_err(),
            OtError::Malformed(_)
        ));

        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let r = tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(6);
            receive(&mut b, &sid(), &ChoiceBits::zeros(3), &mut rng).await
        });
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let out = send(&mut a, &sid(), 2, &mut rng).await;
        assert!(out.is_err());
        assert!(matches!(
            r.await.unwrap().unwrap_err(),
            OtError::Mismatch(_)
        ));
    }
}
