//! The silent sender: holds `Δ`, expands the GGM trees.

use psikit_transport::Channel;
use rand::{CryptoRng, Rng, RngCore};
use zeroize::Zeroizing;

use super::params::{parts, SilentParams};
use super::{ggm, pack_share, run, Noise};
use crate::messages::SilentTrees;
use crate::{ExtConfig, OtError, OtExtSender, Security, SessionId};

/// The silent sender: base OTs once, then any number of extensions, all
/// under one `Δ`.
pub struct SilentSender {
    ext: OtExtSender,
    config: ExtConfig,
}

impl SilentSender {
    /// Runs the base OTs (semi-honest IKNP underneath) under a random `Δ`.
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent");
        let ext = OtExtSender::setup(ch, &sid, Security::SemiHonest, config.clone(), rng).await?;
        Ok(Self { ext, config })
    }

    /// The global correlation `Δ` (secret).
    pub fn delta(&self) -> u128 {
        self.ext.delta()
    }

    /// `count` correlated OTs: the messages of OT `i` are `q[i]` and
    /// `q[i] ⊕ Δ`.
    pub async fn cot<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        self.extend_parts(ch, count, Noise::Bit, rng).await
    }

    /// `count` VOLE correlations: `B` with `A + B = C·Δ` at the receiver.
    pub async fn vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        self.extend_parts(ch, count, Noise::Field, rng).await
    }

    /// One extension per part of `count` ([`parts`]), concatenated.
    async fn extend_parts<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        noise: Noise,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        let mut out = Zeroizing::new(Vec::with_capacity(count));
        for part in parts(count) {
            out.extend_from_slice(&self.extend(ch, part, noise, rng).await?);
        }
        Ok(out)
    }

    async fn extend<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        noise: Noise,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        let params = SilentParams::for_count(count)?;
        let (trees, depth) = (params.trees, params.depth);
        let ots = self.ext.extend(ch, noise.base_ots(&params)).await?;
        let roots: Zeroizing<Vec<u128>> = Zeroizing::new((0..trees).map(|_| rng.gen()).collect());
        let mut leaves = Zeroizing::new(vec![0u128; params.n()]);
        let sums = run(&self.config, || {
            ggm::sender_expand(&roots, depth, &mut leaves)
        });
        let (m0, m1) = (ots.messages_for(false), ots.messages_for(true));
        let shares = &ots.q()[trees * depth..];
        let mut blocks = Vec::with_capacity(trees * (2 * depth + 1));
        for (i, tree) in leaves.chunks(1 << depth).enumerate() {
            for ot in i * depth..(i + 1) * depth {
                let [left, right] = sums[ot];
                blocks.extend([left ^ m0[ot], right ^ m1[ot]]);
            }
            let share = match noise {
                Noise::Bit => self.delta(),
                Noise::Field => pack_share(&shares[i * 128..(i + 1) * 128]),
            };
            blocks.push(tree.iter().fold(share, |a, x| a ^ x));
        }
        let message = SilentTrees {
            count: count as u64,
            blocks,
        };
        ch.send_msg(&message).await?;
        run(&self.config, || params.code().dual_encode(&mut leaves[..]));
        leaves.truncate(count);
        Ok(leaves)
    }
}
