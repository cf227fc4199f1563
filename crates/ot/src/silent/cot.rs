//! Silent correlated OT: the two roles over a [`Channel`].
//!
//! Per extension of `count` correlations (shape from [`SilentParams`]):
//!
//! 1. `t·depth` random OTs from the IKNP extension; the receiver's random
//!    choice bits, negated, spell the punctured position `α_i` of each
//!    tree `i`, so no derandomisation message is needed.
//! 2. The sender expands `t` GGM trees from random roots ([`ggm`]) and
//!    sends [`SilentTrees`]: per level, the left and right sums masked with
//!    the level's two random-OT messages, and per tree `Δ ⊕ Σ leaves`.
//! 3. The receiver rebuilds every leaf but `α_i` and sets that one to the
//!    correction plus the others: `w = v ⊕ e·Δ`, where `v` are the sender's
//!    leaves and `e` marks the `α_i`.
//! 4. Both apply the Expand-Convolute code `E` ([`super::code`]): the
//!    sender outputs `q = E(v)`, the receiver `t = E(w)` and choice bits
//!    `b = E(e)`, so `t = q ⊕ b·Δ` by linearity, and `b` is pseudorandom
//!    by dual LPN ([`super::params`]).

use psikit_transport::Channel;
use rand::{CryptoRng, Rng, RngCore};
use zeroize::Zeroizing;

use super::code::ExConvCode;
use super::ggm;
use super::params::SilentParams;
use crate::messages::SilentTrees;
use crate::{ChoiceBits, ExtConfig, OtError, OtExtReceiver, OtExtSender, Security, SessionId};

/// The sender's correlations: OT `i`'s messages are `q[i]` and `q[i] ⊕ Δ`.
pub struct SilentSenderOutput {
    pub delta: u128,
    pub q: Zeroizing<Vec<u128>>,
}

/// The receiver's correlations: `t[i] = q[i] ⊕ choices[i]·Δ`.
pub struct SilentReceiverOutput {
    pub choices: ChoiceBits,
    pub t: Zeroizing<Vec<u128>>,
}

/// The silent OT sender: base OTs once, then any number of extensions.
pub struct SilentOtSender {
    ext: OtExtSender,
    config: ExtConfig,
}

/// The silent OT receiver.
pub struct SilentOtReceiver {
    ext: OtExtReceiver,
    config: ExtConfig,
}

impl SilentOtSender {
    /// Runs the base OTs (semi-honest IKNP underneath).
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent-ot");
        let ext = OtExtSender::setup(ch, &sid, Security::SemiHonest, config.clone(), rng).await?;
        Ok(Self { ext, config })
    }

    /// `count` correlated OTs under a fresh random `Δ`.
    pub async fn extend<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<SilentSenderOutput, OtError> {
        let params = SilentParams::for_count(count)?;
        let ots = self.ext.extend(ch, params.base_ots()).await?;
        let delta: u128 = rng.gen();
        let roots: Zeroizing<Vec<u128>> =
            Zeroizing::new((0..params.trees).map(|_| rng.gen()).collect());
        let mut leaves = Zeroizing::new(vec![0u128; params.n()]);
        let sums = run(&self.config, || {
            ggm::sender_expand(&roots, params.depth, &mut leaves)
        });
        let (m0, m1) = (ots.messages_for(false), ots.messages_for(true));
        let mut blocks = Vec::with_capacity(params.trees * (2 * params.depth + 1));
        for (i, tree) in leaves.chunks(1 << params.depth).enumerate() {
            for l in 0..params.depth {
                let ot = i * params.depth + l;
                let [left, right] = sums[ot];
                blocks.extend([left ^ m0[ot], right ^ m1[ot]]);
            }
            blocks.push(tree.iter().fold(delta, |a, x| a ^ x));
        }
        let message = SilentTrees {
            count: count as u64,
            blocks,
        };
        ch.send_msg(&message).await?;
        run(&self.config, || params.code().dual_encode(&mut leaves[..]));
        leaves.truncate(count);
        Ok(SilentSenderOutput { delta, q: leaves })
    }
}

impl SilentOtReceiver {
    /// Runs the base OTs (semi-honest IKNP underneath).
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent-ot");
        let ext = OtExtReceiver::setup(ch, &sid, Security::SemiHonest, config.clone(), rng).await?;
        Ok(Self { ext, config })
    }

    /// `count` correlated OTs with pseudorandom choice bits.
    pub async fn extend<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<SilentReceiverOutput, OtError> {
        let params = SilentParams::for_count(count)?;
        let (trees, depth) = (params.trees, params.depth);
        let bits = ChoiceBits::random(params.base_ots(), rng);
        let ots = self.ext.extend(ch, &bits).await?;
        let message: SilentTrees = ch.recv_msg(trees * (2 * depth + 1)).await?;
        if message.count != count as u64 {
            return Err(OtError::Mismatch(format!(
                "the sender made {} silent OTs, we asked for {count}",
                message.count
            )));
        }
        let per_tree = 2 * depth + 1;
        // Level l of tree i took choice bit c = ¬α_l: we can open side c.
        let alphas: Vec<usize> = (0..trees)
            .map(|i| (0..depth).fold(0, |a, l| a << 1 | usize::from(!bits.get(i * depth + l))))
            .collect();
        let off_path: Zeroizing<Vec<u128>> = Zeroizing::new(
            (0..trees * depth)
                .map(|ot| {
                    let (i, l) = (ot / depth, ot % depth);
                    let side = usize::from(bits.get(ot));
                    message.blocks[i * per_tree + 2 * l + side] ^ ots.message(ot)
                })
                .collect(),
        );
        let mut leaves = Zeroizing::new(vec![0u128; params.n()]);
        run(&self.config, || {
            ggm::receiver_expand(&alphas, &off_path, depth, &mut leaves)
        });
        let mut noise = vec![0u8; params.n()];
        for (i, (tree, &alpha)) in leaves.chunks_mut(1 << depth).zip(&alphas).enumerate() {
            let correction = message.blocks[i * per_tree + 2 * depth];
            tree[alpha] = tree.iter().fold(correction, |a, x| a ^ x);
            noise[(i << depth) + alpha] = 1;
        }
        let code: ExConvCode = params.code();
        run(&self.config, || {
            code.dual_encode(&mut leaves[..]);
            code.dual_encode(&mut noise);
        });
        leaves.truncate(count);
        let choices: Vec<bool> = noise[..count].iter().map(|&b| b == 1).collect();
        Ok(SilentReceiverOutput {
            choices: ChoiceBits::from_bools(&choices),
            t: leaves,
        })
    }
}

/// Runs `work` on the configuration's pool, or where we are.
fn run<T: Send>(config: &ExtConfig, work: impl FnOnce() -> T + Send) -> T {
    match config.pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psikit_transport::Limits;
    use rand::rngs::OsRng;

    async fn pair(counts: &[usize]) -> Vec<(SilentSenderOutput, SilentReceiverOutput)> {
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"silent test");
        let owned = counts.to_vec();
        let sender = tokio::spawn(async move {
            let mut s =
                SilentOtSender::setup(&mut a, &sid, ExtConfig::default(), &mut OsRng).await?;
            let mut outs = Vec::new();
            for c in owned {
                outs.push(s.extend(&mut a, c, &mut OsRng).await?);
            }
            Ok::<_, OtError>(outs)
        });
        let mut r = SilentOtReceiver::setup(&mut b, &sid, ExtConfig::default(), &mut OsRng)
            .await
            .expect("receiver setup");
        let mut received = Vec::new();
        for &c in counts {
            received.push(
                r.extend(&mut b, c, &mut OsRng)
                    .await
                    .expect("receiver extend"),
            );
        }
        let sent = sender.await.expect("sender task").expect("sender");
        sent.into_iter().zip(received).collect()
    }

    #[tokio::test]
    async fn every_output_satisfies_the_correlation() {
        for (s, r) in pair(&[1, 5000, 1 << 16]).await {
            assert_eq!(s.q.len(), r.t.len());
            assert_eq!(r.choices.len(), r.t.len());
            for i in 0..s.q.len() {
                let expected = s.q[i] ^ (r.choices.mask(i) & s.delta);
                assert_eq!(r.t[i], expected, "OT {i} of {}", s.q.len());
            }
            // The choice bits are pseudorandom: about half are set.
            let n = r.choices.len();
            if n >= 5000 {
                let ones = r.choices.count_ones();
                assert!(ones.abs_diff(n / 2) < n / 20, "{ones} ones of {n}");
            }
        }
    }
}
