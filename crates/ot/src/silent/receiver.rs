//! The silent receiver: chooses the noise, rebuilds the punctured trees.

use psikit_transport::Channel;
use rand::{CryptoRng, Rng, RngCore};
use zeroize::Zeroizing;

use super::code::Symbol;
use super::params::{parts, SilentParams};
use super::{ggm, pack_share, run, Noise};
use crate::messages::SilentTrees;
use crate::{ChoiceBits, ExtConfig, OtError, OtExtReceiver, ReceiverOts, Security, SessionId};

/// The silent receiver: base OTs once, then any number of extensions.
pub struct SilentReceiver {
    ext: OtExtReceiver,
    config: ExtConfig,
}

/// A receiver's correlated OTs: `t[i] = q[i] ⊕ choices[i]·Δ`.
pub struct CotOutput {
    pub choices: ChoiceBits,
    pub t: Zeroizing<Vec<u128>>,
}

/// A receiver's VOLE correlations: `a[i] + b[i] = c[i]·Δ`.
pub struct VoleOutput {
    pub a: Zeroizing<Vec<u128>>,
    pub c: Zeroizing<Vec<u128>>,
}

/// The receiver's punctured trees before encoding: leaves `w = v + e·Δ`
/// and the noise `e`.
struct Noisy<T: Symbol> {
    w: Zeroizing<Vec<u128>>,
    e: Zeroizing<Vec<T>>,
}

impl SilentReceiver {
    /// Runs the base OTs (semi-honest IKNP underneath).
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent");
        let ext = OtExtReceiver::setup(ch, &sid, Security::SemiHonest, config.clone(), rng).await?;
        Ok(Self { ext, config })
    }

    /// `count` correlated OTs with pseudorandom choice bits.
    pub async fn cot<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<CotOutput, OtError> {
        let (mut t, mut choices) = (Zeroizing::new(Vec::with_capacity(count)), Vec::new());
        for part in parts(count) {
            let params = SilentParams::for_count(part)?;
            let betas = vec![1u8; params.trees];
            let Noisy { w, e } = self.punctured(ch, &params, Noise::Bit, &betas, rng).await?;
            let (tp, bits) = self.encode(&params, w, e);
            t.extend_from_slice(&tp);
            choices.extend(bits.iter().map(|&b| b == 1));
        }
        Ok(CotOutput {
            choices: ChoiceBits::from_bools(&choices),
            t,
        })
    }

    /// `count` VOLE correlations with pseudorandom `c`.
    pub async fn vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<VoleOutput, OtError> {
        let mut a = Zeroizing::new(Vec::with_capacity(count));
        let mut c = Zeroizing::new(Vec::with_capacity(count));
        for part in parts(count) {
            let params = SilentParams::for_count(part)?;
            let betas: Vec<u128> = (0..params.trees).map(|_| nonzero(rng)).collect();
            let Noisy { w, e } = self
                .punctured(ch, &params, Noise::Field, &betas, rng)
                .await?;
            let (ap, cp) = self.encode(&params, w, e);
            a.extend_from_slice(&ap);
            c.extend_from_slice(&cp);
        }
        Ok(VoleOutput { a, c })
    }

    /// Both vectors through the code, cut to `count`.
    fn encode<T: Symbol>(
        &self,
        params: &SilentParams,
        mut w: Zeroizing<Vec<u128>>,
        mut e: Zeroizing<Vec<T>>,
    ) -> (Zeroizing<Vec<u128>>, Zeroizing<Vec<T>>) {
        let code = params.code();
        run(&self.config, || {
            code.dual_encode(&mut w[..]);
            code.dual_encode(&mut e[..]);
        });
        w.truncate(params.count);
        e.truncate(params.count);
        (w, e)
    }

    /// Steps 1-3: the base OTs (choice bits: the negated punctured
    /// positions, then the bits of each `β_i` for VOLE), the sender's
    /// trees, and the rebuilt leaves with the noise `β_i` at `α_i`.
    async fn punctured<T: Symbol, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        params: &SilentParams,
        noise: Noise,
        betas: &[T],
        rng: &mut R,
    ) -> Result<Noisy<T>, OtError> {
        let (trees, depth) = (params.trees, params.depth);
        let mut bits = ChoiceBits::random(noise.base_ots(params), rng);
        for (i, beta) in betas.iter().enumerate() {
            for j in 0..noise.share_ots() {
                bits.set(trees * depth + i * 128 + j, beta.bit(j));
            }
        }
        let ots = self.ext.extend(ch, &bits).await?;
        let per_tree = 2 * depth + 1;
        let message: SilentTrees = ch.recv_msg(trees * per_tree).await?;
        if message.count != params.count as u64 {
            return Err(OtError::Mismatch(format!(
                "the sender made {} silent correlations, we asked for {}",
                message.count, params.count
            )));
        }
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
        let mut w = Zeroizing::new(vec![0u128; params.n()]);
        run(&self.config, || {
            ggm::receiver_expand(&alphas, &off_path, depth, &mut w)
        });
        let mut e = Zeroizing::new(vec![T::default(); params.n()]);
        for (i, (tree, &alpha)) in w.chunks_mut(1 << depth).zip(&alphas).enumerate() {
            let correction =
                message.blocks[i * per_tree + 2 * depth] ^ share(&ots, noise, params, i);
            tree[alpha] = tree.iter().fold(correction, |a, x| a ^ x);
            e[(i << depth) + alpha] = betas[i];
        }
        Ok(Noisy { w, e })
    }
}

/// Our share of `β_i·Δ` for tree `i` (the sender's share is in its
/// correction block): none for correlated OT, where the sender's share is
/// `Δ` itself.
fn share(ots: &ReceiverOts, noise: Noise, p: &SilentParams, i: usize) -> u128 {
    match noise {
        Noise::Bit => 0,
        Noise::Field => {
            let first = p.trees * p.depth + i * 128;
            pack_share(&ots.t()[first..first + 128])
        }
    }
}

/// A uniform nonzero element of GF(2^128).
fn nonzero<R: RngCore + CryptoRng>(rng: &mut R) -> u128 {
    loop {
        let b: u128 = rng.gen();
        if b != 0 {
            return b;
        }
    }
}
