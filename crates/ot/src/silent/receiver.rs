//! The silent receiver: chooses the noise, rebuilds the punctured trees.

use std::time::Instant;

use psikit_transport::Channel;
use rand::{CryptoRng, Rng, RngCore};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::both::{pack_share, plan, run, timed, Times};
use super::check::{self, CHECK_OTS};
use super::code::Symbol;
use super::ggm;
use super::params::{in_place_len, Noise, SilentParams};
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::ext::{Confirm, ExtConfig, OtExtReceiver, ReceiverOts, Security};
use crate::gf128;
use crate::messages::{abort, SilentChallenge, SilentCheck, SilentTrees};
use crate::session::SessionId;

/// The silent receiver: base OTs once, then any number of extensions.
pub struct SilentReceiver {
    ext: OtExtReceiver,
    config: ExtConfig,
    /// The session, for the trees' tweaks.
    sid: SessionId,
    /// Extensions started so far (the sender counts alike).
    extensions: u64,
}

/// A receiver's correlated OTs: `t[i] = q[i] ⊕ choices[i]·Δ`.
pub struct CotOutput {
    pub choices: ChoiceBits,
    pub t: Zeroizing<Vec<u128>>,
    /// Where the extension's time went at this party.
    pub times: Times,
}

/// A receiver's VOLE correlations: `a[i] + b[i] = c[i]·Δ`.
pub struct VoleOutput {
    pub a: Zeroizing<Vec<u128>>,
    pub c: Zeroizing<Vec<u128>>,
    /// Where the extension's time went at this party.
    pub times: Times,
}

/// A receiver's VOLE correlations whose `c` has at most 8 bits, one byte
/// each: `a[i] + b[i] = c[i]·Δ`, with `c[i]` read as an element of
/// GF(2^128) of degree below the extension's `bits`. Each is a random
/// 1-out-of-`2^bits` OT (SoftSpokenOT's small-field VOLE): the sender's
/// messages are `H(b[i] + j·Δ)` for every `j` of `bits` bits, the
/// receiver's `H(a[i])`, of index `c[i]`; for `j ≠ c[i]` the receiver
/// would need `(j + c[i])·Δ`, a uniform value, to find one.
pub struct SmallVoleOutput {
    pub a: Zeroizing<Vec<u128>>,
    pub c: Zeroizing<Vec<u8>>,
    /// Where the extension's time went at this party.
    pub times: Times,
}

/// An extension under way, in three steps so that a protocol can compute
/// while the sender works: [`SilentReceiver::start_vole`] (or
/// [`SilentReceiver::start_cot`]) runs the base correlations, which fixes
/// the noise; [`Pending::receive_trees`] reads the sender's trees (and
/// sends the malicious check's challenge); `finish` rebuilds, checks and
/// compresses. The sender runs its whole side in one call.
pub struct Pending<T: Symbol> {
    shapes: Vec<SilentParams>,
    /// Per part, its trees' tweaks.
    tweaks: Vec<ggm::Tweaks>,
    noise: Noise,
    ots: ReceiverOts,
    /// Per part, each tree's noise value `β_i`.
    betas: Vec<Vec<T>>,
    /// The malicious check's challenge (`None`: semi-honest).
    challenge: Option<u128>,
    trees: Vec<SilentTrees>,
    config: ExtConfig,
    /// `E(e)` if encoded ahead ([`Prepared`]); `finish` encodes it otherwise.
    e: Option<Zeroizing<Vec<T>>>,
    /// Where the extension's time went so far.
    times: Times,
}

/// An extension's noise as drawn, before its base correlations run.
struct Drawn<T: Symbol> {
    shapes: Vec<SilentParams>,
    tweaks: Vec<ggm::Tweaks>,
    noise: Noise,
    /// The base correlations' choice bits: the positions' and the `β_i`'s.
    bits: ChoiceBits,
    betas: Vec<Vec<T>>,
    challenge: Option<u128>,
    times: Times,
}

/// A small VOLE whose noise is drawn and encoded (the receiver's `c`) but
/// whose base correlations have not run: [`SilentReceiver::prepare_small_vole`]
/// needs no message, so a party waiting on its peer can do it ahead;
/// [`SilentReceiver::start_prepared`] then starts it as
/// [`SilentReceiver::start_small_vole`] would have. Extensions must be
/// started in the order they were prepared or started (the sender numbers
/// them alike).
pub struct Prepared {
    drawn: Drawn<u8>,
    c: Zeroizing<Vec<u8>>,
    count: usize,
    bits: u32,
}

impl Prepared {
    /// Correlations it makes.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bits of its `c`.
    pub fn bits(&self) -> u32 {
        self.bits
    }
}

impl SilentReceiver {
    /// Runs the base OTs: IKNP underneath for [`Security::SemiHonest`], KOS
    /// plus the trees' consistency check for [`Security::Malicious`].
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        security: Security,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent");
        let ext = OtExtReceiver::setup(ch, &sid, security, config.clone(), rng).await?;
        Ok(Self {
            ext,
            config,
            sid,
            extensions: 0,
        })
    }

    /// `count` correlated OTs with pseudorandom choice bits.
    pub async fn cot<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<CotOutput, OtError> {
        self.start_cot(ch, count, rng).await?.finish(ch).await
    }

    /// `count` VOLE correlations with pseudorandom `c` of `bits` bits (128
    /// for all of GF(2^128)).
    pub async fn vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<VoleOutput, OtError> {
        self.start_vole(ch, count, bits, rng)
            .await?
            .finish(ch)
            .await
    }

    /// First step of [`SilentReceiver::cot`].
    pub async fn start_cot<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        rng: &mut R,
    ) -> Result<Pending<u8>, OtError> {
        self.start(ch, count, Noise::Bit, |_| 1u8, rng).await
    }

    /// First step of [`SilentReceiver::vole`].
    pub async fn start_vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<Pending<u128>, OtError> {
        let noise = Noise::field(bits)?;
        let beta = move |rng: &mut R| nonzero(rng, bits);
        self.start(ch, count, noise, beta, rng).await
    }

    /// First step of a VOLE whose `c` has `bits` bits, 1 to 8, kept one
    /// byte each ([`Pending::finish_small_vole`]): the same rule and cost
    /// as [`SilentReceiver::start_vole`], but the receiver encodes its
    /// noise as bytes (a few bit planes) rather than 128-bit blocks.
    pub async fn start_small_vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<Pending<u8>, OtError> {
        let (noise, beta) = small_noise(bits)?;
        self.start(ch, count, noise, beta, rng).await
    }

    /// The local half of [`SilentReceiver::start_small_vole`]: draws the
    /// noise and encodes it into `c`, sending nothing ([`Prepared`]).
    pub fn prepare_small_vole<R: RngCore + CryptoRng>(
        &mut self,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<Prepared, OtError> {
        let (noise, beta) = small_noise(bits)?;
        let mut drawn = self.draw(count, noise, beta, rng)?;
        let mut c = timed(&mut drawn.times.code, || {
            noise_code(&drawn.shapes, &drawn.bits, &drawn.betas, &self.config)
        });
        // Held while the party waits: no spare entries kept.
        super::compact(&mut c);
        Ok(Prepared {
            drawn,
            c,
            count,
            bits,
        })
    }

    /// Starts a [`Prepared`] small VOLE: its base correlations.
    pub async fn start_prepared(
        &mut self,
        ch: &mut Channel,
        prepared: Prepared,
    ) -> Result<Pending<u8>, OtError> {
        self.send_drawn(ch, prepared.drawn, Some(prepared.c)).await
    }

    /// Draws the noise, then runs the base correlations that encode it.
    async fn start<T: Symbol, R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        noise: Noise,
        beta: impl Fn(&mut R) -> T,
        rng: &mut R,
    ) -> Result<Pending<T>, OtError> {
        let drawn = self.draw(count, noise, beta, rng)?;
        self.send_drawn(ch, drawn, None).await
    }

    /// Picks the noise (punctured positions, values `β` from `beta`) and
    /// the check's challenge, and the choice bits of the base correlations
    /// that encode them: per part the negated positions, then the bits of
    /// each `β_i` for VOLE; last, in malicious mode, the bits of `c'`.
    fn draw<T: Symbol, R: RngCore + CryptoRng>(
        &mut self,
        count: usize,
        noise: Noise,
        beta: impl Fn(&mut R) -> T,
        rng: &mut R,
    ) -> Result<Drawn<T>, OtError> {
        let start = Instant::now();
        let (shapes, tweaks) = plan(count, noise, &self.sid, &mut self.extensions)?;
        let malicious = self.ext.security() == Security::Malicious;
        let tree_ots: usize = shapes.iter().map(|p| p.base_ots()).sum();
        let check_ots = if malicious { CHECK_OTS } else { 0 };
        let mut bits = ChoiceBits::random(tree_ots + check_ots, rng);
        let betas: Vec<Vec<T>> = shapes
            .iter()
            .map(|p| (0..p.trees).map(|_| beta(rng)).collect())
            .collect();
        let mut first = 0;
        for (p, betas) in shapes.iter().zip(&betas) {
            let per = noise.share_ots();
            for (i, b) in betas.iter().enumerate() {
                for j in 0..per {
                    bits.set(first + p.trees * p.depth + i * per + j, b.bit(j));
                }
            }
            first += p.base_ots();
        }
        let challenge = malicious.then(|| rng.gen::<u128>());
        if let Some(x) = challenge {
            let c = noise_weight(x, &shapes, &bits, &betas);
            for j in 0..CHECK_OTS {
                bits.set(tree_ots + j, c >> j & 1 == 1);
            }
        }
        Ok(Drawn {
            shapes,
            tweaks,
            noise,
            bits,
            betas,
            challenge,
            times: Times {
                base: start.elapsed(),
                ..Times::default()
            },
        })
    }

    /// Runs the base correlations of `drawn` (`e`: its noise's code, if
    /// encoded ahead).
    async fn send_drawn<T: Symbol>(
        &mut self,
        ch: &mut Channel,
        drawn: Drawn<T>,
        e: Option<Zeroizing<Vec<T>>>,
    ) -> Result<Pending<T>, OtError> {
        let start = Instant::now();
        let matrix = self.ext.send_matrix(ch, &drawn.bits, Confirm::No).await?;
        let ots = matrix.answer_check(ch).await?;
        let mut times = drawn.times;
        times.base += start.elapsed();
        Ok(Pending {
            shapes: drawn.shapes,
            tweaks: drawn.tweaks,
            noise: drawn.noise,
            ots,
            betas: drawn.betas,
            challenge: drawn.challenge,
            trees: Vec::new(),
            config: self.config.clone(),
            e,
            times,
        })
    }
}

/// The noise of a small VOLE of `bits` bits and its `β` sampler.
fn small_noise<R: RngCore + CryptoRng>(
    bits: u32,
) -> Result<(Noise, impl Fn(&mut R) -> u8), OtError> {
    if !(1..=8).contains(&bits) {
        return Err(OtError::InvalidArgument(format!(
            "small VOLE values of {bits} bits: 1 to 8 are possible"
        )));
    }
    let beta = move |rng: &mut R| nonzero(rng, bits).to_le_bytes()[0];
    Ok((Noise::field(bits)?, beta))
}

/// `E(e)` of every part, laid end to end and cut to the outputs as
/// `finish` lays out the leaves' code: each part's noise holds `β_i` at
/// `α_i` of tree `i` and zero elsewhere, every entry written by a mask
/// (the positions are secret).
fn noise_code<T: Symbol>(
    shapes: &[SilentParams],
    choices: &ChoiceBits,
    betas: &[Vec<T>],
    config: &ExtConfig,
) -> Zeroizing<Vec<T>> {
    let mut e_out = Zeroizing::new(vec![T::default(); in_place_len(shapes)]);
    let (mut first, mut out) = (0, 0);
    for (p, betas) in shapes.iter().zip(betas) {
        let alphas = alphas(choices, p, first);
        // This overwrites the previous part's spare entries.
        let e = &mut e_out[out..out + p.n()];
        for ((tree, &alpha), &beta) in e.chunks_mut(1 << p.depth).zip(&alphas).zip(betas) {
            for (j, x) in tree.iter_mut().enumerate() {
                *x = T::mask(ggm::equal(j, alpha) != 0) & beta;
            }
        }
        let code = p.code();
        run(config, || code.dual_encode(e));
        first += p.base_ots();
        out += p.count;
    }
    e_out.truncate(out);
    e_out
}

/// The punctured position of each tree of the part whose base correlations
/// start at `first`: level `l` of tree `i` took choice bit `¬α_l`.
fn alphas(bits: &ChoiceBits, p: &SilentParams, first: usize) -> Vec<usize> {
    (0..p.trees)
        .map(|i| {
            (0..p.depth).fold(0, |a, l| {
                a << 1 | usize::from(!bits.get(first + i * p.depth + l))
            })
        })
        .collect()
}

/// `c' = Σ χ_i·e_i` over all parts' noise vectors (laid end to end).
fn noise_weight<T: Symbol>(
    challenge: u128,
    shapes: &[SilentParams],
    bits: &ChoiceBits,
    betas: &[Vec<T>],
) -> u128 {
    let (mut c, mut first, mut at) = (0u128, 0usize, 0u64);
    for (p, betas) in shapes.iter().zip(betas) {
        for (i, (alpha, b)) in alphas(bits, p, first).into_iter().zip(betas).enumerate() {
            let position = at + ((i << p.depth) + alpha) as u64;
            c ^= gf128::mul(check::weight(challenge, position), b.field());
        }
        first += p.base_ots();
        at += p.n() as u64;
    }
    c
}

impl<T: Symbol> Pending<T> {
    /// Test hook: the receiver's base choice bit `i`.
    #[cfg(test)]
    pub(crate) fn choice(&self, i: usize) -> bool {
        self.ots.choices().get(i)
    }

    /// Second step: reads every part's trees, then (malicious) sends the
    /// check's challenge. `finish` calls it if the caller did not.
    pub async fn receive_trees(&mut self, ch: &mut Channel) -> Result<(), OtError> {
        while self.trees.len() < self.shapes.len() {
            self.receive_part_trees(ch).await?;
        }
        Ok(())
    }

    /// Reads the next part's trees; after the last part's, sends the
    /// check's challenge (malicious), which the sender may see only once
    /// it has sent every tree. `finish` compresses each part as soon as
    /// its trees are in, while the sender still sends the next ones.
    async fn receive_part_trees(&mut self, ch: &mut Channel) -> Result<(), OtError> {
        let start = Instant::now();
        let p = self.shapes[self.trees.len()];
        let message: SilentTrees = ch.recv_msg(p.trees * (2 * p.depth + 1)).await?;
        if message.count != p.count as u64 {
            return Err(OtError::Mismatch(format!(
                "the sender made {} silent correlations, we asked for {}",
                message.count, p.count
            )));
        }
        self.trees.push(message);
        if let (Some(x), true) = (self.challenge, self.trees.len() == self.shapes.len()) {
            ch.send_msg(&SilentChallenge(x)).await?;
        }
        self.times.other += start.elapsed();
        Ok(())
    }

    /// Rebuilds each part's leaves, adds them into the check, compresses
    /// them; then (malicious) compares the sender's check hash. Returns
    /// `E(w)` and `E(e)`, cut to the count asked for.
    async fn finish_raw(
        mut self,
        ch: &mut Channel,
    ) -> Result<(Zeroizing<Vec<u128>>, Zeroizing<Vec<T>>, Times), OtError> {
        let (start, before) = (Instant::now(), self.times);
        // Every part's leaves and noise are made in place in the outputs
        // (see `params::in_place_len`): no buffer per part, no copies.
        let mut w_out = Zeroizing::new(vec![0u128; in_place_len(&self.shapes)]);
        let tree_ots: usize = self.shapes.iter().map(|p| p.base_ots()).sum();
        let mut sum = match self.challenge {
            Some(_) => (pack_share(&self.ots.t()[tree_ots..]), 0),
            None => (0, 0),
        };
        let (mut first, mut at, mut out) = (0, 0u64, 0);
        for k in 0..self.shapes.len() {
            if self.trees.len() == k {
                self.receive_part_trees(ch).await?;
            }
            let p = &self.shapes[k];
            let code = p.code();
            let alphas = alphas(self.ots.choices(), p, first);
            let w = &mut w_out[out..out + p.n()];
            let mut spent = std::time::Duration::ZERO;
            timed(&mut spent, || self.leaves(p, k, first, &alphas, w));
            self.times.trees += spent;
            if let Some(x) = self.challenge {
                sum = gf128::add_wide(sum, check::weighted_sum(x, at, w));
            }
            timed(&mut self.times.code, || {
                run(&self.config, || code.dual_encode(w))
            });
            first += p.base_ots();
            at += p.n() as u64;
            out += p.count;
        }
        if self.challenge.is_some() {
            let SilentCheck(theirs) = ch.recv_msg(()).await?;
            let ours = check::digest(gf128::reduce(sum));
            if !bool::from(ours.ct_eq(&theirs)) {
                return Err(abort(ch, OtError::SilentCheck).await);
            }
        }
        w_out.truncate(out);
        // The noise's code, unless prepared ahead.
        let mut e_out = match self.e.take() {
            Some(e) => e,
            None => timed(&mut self.times.code, || {
                noise_code(&self.shapes, self.ots.choices(), &self.betas, &self.config)
            }),
        };
        if self.shapes.len() > 1 {
            // Several parts leave the last one's spare entries (its `n -
            // count`, at least its count again) behind the outputs: wiped
            // and released, so a large extension's outputs hold no more
            // than its count.
            super::compact(&mut w_out);
            super::compact(&mut e_out);
        }
        let counted = self.times.trees + self.times.code + self.times.other
            - (before.trees + before.code + before.other);
        self.times.other += start.elapsed().saturating_sub(counted);
        Ok((w_out, e_out, self.times))
    }

    /// Step 3 for part `k` (base correlations from `first`, punctured at
    /// `alphas`): the rebuilt leaves `w = v + e·Δ` (of the part's length,
    /// whatever it held before); the noise `e` holds `β_i` at `α_i`.
    fn leaves(&self, p: &SilentParams, k: usize, first: usize, alphas: &[usize], w: &mut [u128]) {
        let (trees, depth) = (p.trees, p.depth);
        let bits = self.ots.choices();
        let blocks = &self.trees[k].blocks;
        let per_tree = 2 * depth + 1;
        let off_path: Zeroizing<Vec<u128>> = Zeroizing::new(
            (0..trees * depth)
                .map(|ot| {
                    let (i, l) = (ot / depth, ot % depth);
                    // Both blocks read, one kept by a mask: the choice
                    // bit is a bit of the secret `α`.
                    let side = usize::from(bits.get(first + ot));
                    let at = i * per_tree + 2 * l;
                    ggm::select(side, blocks[at], blocks[at + 1]) ^ self.ots.message(first + ot)
                })
                .collect(),
        );
        // Leaf `α` makes each tree's leaves XOR to the sender's correction
        // block plus our share of `β·Δ`: it becomes `v_α ⊕ β·Δ`.
        let totals: Zeroizing<Vec<u128>> = Zeroizing::new(
            (0..trees)
                .map(|i| blocks[i * per_tree + 2 * depth] ^ self.share(p, first, i))
                .collect(),
        );
        run(&self.config, || {
            ggm::receiver_expand(alphas, &off_path, &totals, depth, self.tweaks[k], w)
        });
    }

    /// Our share of `β_i·Δ` for tree `i` of the part starting at `first`
    /// (the sender's share is in its correction block): none for
    /// correlated OT, where the sender's share is `Δ` itself.
    fn share(&self, p: &SilentParams, first: usize, i: usize) -> u128 {
        match self.noise {
            Noise::Bit => 0,
            Noise::Field { .. } => {
                let per = self.noise.share_ots();
                let at = first + p.trees * p.depth + i * per;
                pack_share(&self.ots.t()[at..at + per])
            }
        }
    }
}

impl Pending<u128> {
    /// Last step of [`SilentReceiver::vole`].
    pub async fn finish(self, ch: &mut Channel) -> Result<VoleOutput, OtError> {
        let (a, c, times) = self.finish_raw(ch).await?;
        Ok(VoleOutput { a, c, times })
    }
}

impl Pending<u8> {
    /// Last step of [`SilentReceiver::cot`].
    pub async fn finish(self, ch: &mut Channel) -> Result<CotOutput, OtError> {
        if self.noise != Noise::Bit {
            return Err(OtError::InvalidArgument(
                "a small VOLE finishes with finish_small_vole".into(),
            ));
        }
        let (t, bits, times) = self.finish_raw(ch).await?;
        let choices: Vec<bool> = bits.iter().map(|&b| b == 1).collect();
        Ok(CotOutput {
            choices: ChoiceBits::from_bools(&choices),
            t,
            times,
        })
    }

    /// Last step of [`SilentReceiver::start_small_vole`] (of a correlated
    /// OT too, whose `c` are its choice bits).
    pub async fn finish_small_vole(self, ch: &mut Channel) -> Result<SmallVoleOutput, OtError> {
        let (a, c, times) = self.finish_raw(ch).await?;
        Ok(SmallVoleOutput { a, c, times })
    }
}

/// A uniform nonzero element of GF(2^128) of degree below `bits` (1 to
/// 128).
fn nonzero<R: RngCore + CryptoRng>(rng: &mut R, bits: u32) -> u128 {
    let mask = u128::MAX >> (128 - bits);
    loop {
        let b = rng.gen::<u128>() & mask;
        if b != 0 {
            return b;
        }
    }
}
