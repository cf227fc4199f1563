//! The silent sender: holds `Δ`, expands the GGM trees.

use std::time::Instant;

use psikit_transport::Channel;
use rand::{CryptoRng, Rng, RngCore};
use zeroize::Zeroizing;

use super::both::{pack_share, plan, run, timed, Times};
use super::check::{self, CHECK_OTS};
use super::ggm;
use super::params::{self, in_place_len, Noise, SilentParams};
use crate::error::OtError;
use crate::ext::{Confirm, ExtConfig, OtExtSender, Security, SenderOts};
use crate::gf128;
use crate::messages::{SilentChallenge, SilentCheck, SilentTrees};
use crate::session::SessionId;

/// An extension's base correlations from some point on: the random-OT
/// messages (the trees' level keys) and the correlated values (the noise
/// and check shares).
#[derive(Clone, Copy)]
struct Keys<'a> {
    m0: &'a [u128],
    m1: &'a [u128],
    q: &'a [u128],
}

impl<'a> Keys<'a> {
    /// The correlations from `first` on.
    fn starting_at(self, first: usize) -> Keys<'a> {
        Keys {
            m0: &self.m0[first..],
            m1: &self.m1[first..],
            q: &self.q[first..],
        }
    }
}

/// The silent sender: base OTs once, then any number of extensions, all
/// under one `Δ`.
pub struct SilentSender {
    ext: OtExtSender,
    config: ExtConfig,
    /// The session, for the trees' tweaks.
    sid: SessionId,
    /// Extensions run so far (the receiver counts alike).
    extensions: u64,
    /// Where the last extension's time went.
    last_times: Times,
    /// Test hook: the block of the next trees message to corrupt.
    #[cfg(test)]
    pub(crate) tamper: Option<usize>,
}

impl SilentSender {
    /// Runs the base OTs under a random `Δ`: IKNP underneath for
    /// [`Security::SemiHonest`]; KOS plus the trees' consistency check
    /// ([`super::check`]) for [`Security::Malicious`].
    pub async fn setup<R: RngCore + CryptoRng>(
        ch: &mut Channel,
        sid: &SessionId,
        security: Security,
        config: ExtConfig,
        rng: &mut R,
    ) -> Result<Self, OtError> {
        let sid = sid.derive("silent");
        let ext = OtExtSender::setup(ch, &sid, security, config.clone(), rng).await?;
        Ok(Self {
            ext,
            config,
            sid,
            extensions: 0,
            last_times: Times::default(),
            #[cfg(test)]
            tamper: None,
        })
    }

    /// Where the last extension's time went at this party.
    pub fn last_times(&self) -> Times {
        self.last_times
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
        self.extend(ch, count, Noise::Bit, rng).await
    }

    /// `count` VOLE correlations: `B` with `A + B = C·Δ` at the receiver,
    /// whose `C` has `bits` bits (128 for all of GF(2^128); both parties
    /// must ask for the same).
    pub async fn vole<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        self.extend(ch, count, Noise::field(bits)?, rng).await
    }

    /// The local part of [`SilentSender::vole`] for a semi-honest
    /// extension of one part ([`params::MAX_PART`] at most): the trees
    /// expanded from fresh roots and the leaves encoded into `B`, which
    /// needs nothing from the receiver; [`SilentSender::finish_prepared`]
    /// later runs the base correlations and sends the trees. A party
    /// waiting on its peer can so do its share of the next extensions
    /// ahead. Extensions must be finished in the order they were prepared
    /// or run (the receiver numbers them alike).
    pub fn prepare_vole<R: RngCore + CryptoRng>(
        &mut self,
        count: usize,
        bits: u32,
        rng: &mut R,
    ) -> Result<PreparedVole, OtError> {
        // The malicious check hashes the leaves under the receiver's
        // challenge, so they could not be encoded ahead.
        if self.ext.security() == Security::Malicious || params::parts(count).len() != 1 {
            return Err(OtError::InvalidArgument(format!(
                "only a semi-honest extension of one part is prepared ahead (asked {count})"
            )));
        }
        let start = Instant::now();
        let mut times = Times::default();
        let (shapes, tweaks) = plan(count, Noise::field(bits)?, &self.sid, &mut self.extensions)?;
        let (shape, t) = (shapes[0], tweaks[0]);
        let mut b = Zeroizing::new(vec![0u128; shape.n()]);
        let trees = timed(&mut times.trees, || self.expand(&shape, t, &mut b, rng));
        timed(&mut times.code, || {
            run(&self.config, || shape.code().dual_encode(&mut b))
        });
        b.truncate(count);
        // Held while the party waits: no spare entries kept.
        super::compact(&mut b);
        Ok(PreparedVole {
            shape,
            trees,
            b,
            bits,
            times: times.with_total(start.elapsed()),
        })
    }

    /// Sends a [`PreparedVole`]'s trees after its base correlations and
    /// returns its `B`, as [`SilentSender::vole`] would have.
    pub async fn finish_prepared(
        &mut self,
        ch: &mut Channel,
        prepared: PreparedVole,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        let start = Instant::now();
        let shape = prepared.shape;
        let ots = self.base(ch, shape.base_ots()).await?;
        let base = start.elapsed();
        let mut times = prepared.times;
        times.base += base;
        let (m0, m1) = (ots.messages_for(false), ots.messages_for(true));
        let keys = Keys {
            m0: &m0,
            m1: &m1,
            q: ots.q(),
        };
        self.send_trees(ch, &shape, keys, &prepared.trees).await?;
        times.other += start.elapsed().saturating_sub(base);
        self.last_times = times;
        Ok(prepared.b)
    }

    /// One extension of `count`: the base correlations of all its parts
    /// ([`super::params::parts`]) at once, then every part's trees, then (malicious) the
    /// receiver's challenge, then each part compressed, and (malicious) the
    /// check's hash over all parts.
    async fn extend<R: RngCore + CryptoRng>(
        &mut self,
        ch: &mut Channel,
        count: usize,
        noise: Noise,
        rng: &mut R,
    ) -> Result<Zeroizing<Vec<u128>>, OtError> {
        let start = Instant::now();
        let mut times = Times::default();
        let (shapes, tweaks) = plan(count, noise, &self.sid, &mut self.extensions)?;
        let malicious = self.ext.security() == Security::Malicious;
        let tree_ots: usize = shapes.iter().map(|p| p.base_ots()).sum();
        let check_ots = if malicious { CHECK_OTS } else { 0 };
        let ots = self.base(ch, tree_ots + check_ots).await?;
        times.base = start.elapsed();
        // In malicious mode these messages are KOS's, hashed with TCCR under
        // each OT's index (`Security::Malicious` picks it): with the
        // untweaked hash a malicious receiver could make two rows collide
        // up to Δ, open both sums of a level and recover Δ from the
        // punctured leaf (pinned by the `ext` test
        // `malicious_random_ots_hash_each_row_under_its_own_index`).
        let (m0, m1) = (ots.messages_for(false), ots.messages_for(true));
        let keys = Keys {
            m0: &m0,
            m1: &m1,
            q: ots.q(),
        };
        // Every part is made in place in the outputs (see
        // `params::in_place_len`). All trees are sent first, expanded in
        // the first part's region, so the receiver can go on while we
        // compress (it needs every part's trees before its own work). A
        // single part's leaves stay; with several, each part's are
        // expanded again from its roots when compressed (one GGM
        // expansion instead of holding 2 blocks per output).
        let mut out = Zeroizing::new(vec![0u128; in_place_len(&shapes)]);
        let keep = shapes.len() == 1;
        let mut roots = Vec::with_capacity(shapes.len());
        let mut first = 0;
        for (p, &t) in shapes.iter().zip(&tweaks) {
            let leaves = &mut out[..p.n()];
            let trees = timed(&mut times.trees, || self.expand(p, t, leaves, rng));
            self.send_trees(ch, p, keys.starting_at(first), &trees)
                .await?;
            roots.push(trees.roots);
            first += p.base_ots();
        }
        let challenge = match malicious {
            true => Some(ch.recv_msg::<SilentChallenge>(()).await?.0),
            false => None,
        };
        let mut sum = match challenge {
            Some(_) => (pack_share(&ots.q()[tree_ots..]), 0),
            None => (0, 0),
        };
        let (mut at, mut done) = (0u64, 0);
        for ((p, roots), &t) in shapes.iter().zip(&roots).zip(&tweaks) {
            let leaves = &mut out[done..done + p.n()];
            if !keep {
                timed(&mut times.trees, || {
                    run(&self.config, || {
                        ggm::sender_expand(roots, p.depth, t, leaves)
                    })
                });
            }
            if let Some(x) = challenge {
                sum = gf128::add_wide(sum, check::weighted_sum(x, at, leaves));
            }
            at += leaves.len() as u64;
            timed(&mut times.code, || {
                run(&self.config, || p.code().dual_encode(leaves))
            });
            done += p.count;
        }
        if challenge.is_some() {
            let hash = check::digest(gf128::reduce(sum));
            ch.send_msg(&SilentCheck(hash)).await?;
        }
        self.last_times = times.with_total(start.elapsed());
        out.truncate(done);
        if !keep {
            // The last part's spare entries: released, as the receiver does.
            super::compact(&mut out);
        }
        Ok(out)
    }

    /// The base correlations: IKNP, or KOS without confirmation (a failed
    /// check reaches the receiver as an error frame in place of the trees).
    async fn base(&mut self, ch: &mut Channel, n: usize) -> Result<SenderOts, OtError> {
        let matrix = self.ext.receive_matrix(ch, n, Confirm::No).await?;
        matrix.send_seed(ch).await?.finish(ch).await
    }

    /// Expands one part's trees from fresh roots into `leaves` (tree `i`
    /// at `leaves[i << depth ..]`).
    fn expand<R: RngCore + CryptoRng>(
        &self,
        params: &SilentParams,
        tweaks: ggm::Tweaks,
        leaves: &mut [u128],
        rng: &mut R,
    ) -> Trees {
        let roots: Zeroizing<Vec<u128>> =
            Zeroizing::new((0..params.trees).map(|_| rng.gen()).collect());
        let sums = run(&self.config, || {
            ggm::sender_expand(&roots, params.depth, tweaks, leaves)
        });
        let leaf_sums = leaves
            .chunks(1 << params.depth)
            .map(|tree| tree.iter().fold(0, |a, x| a ^ x))
            .collect();
        Trees {
            roots,
            sums: Zeroizing::new(sums),
            leaf_sums: Zeroizing::new(leaf_sums),
        }
    }

    /// Sends one part's expanded `trees`, each level's sums masked by the
    /// random-OT messages of `keys` (which start at the part's base
    /// correlations), each tree's leaf sum by its noise share.
    async fn send_trees(
        &mut self,
        ch: &mut Channel,
        params: &SilentParams,
        keys: Keys<'_>,
        trees: &Trees,
    ) -> Result<(), OtError> {
        let depth = params.depth;
        let (m0, m1) = (keys.m0, keys.m1);
        let shares = &keys.q[params.trees * depth..];
        let mut blocks = Vec::with_capacity(params.trees * (2 * depth + 1));
        for (i, leaf_sum) in trees.leaf_sums.iter().enumerate() {
            for ot in i * depth..(i + 1) * depth {
                let [left, right] = trees.sums[ot];
                blocks.extend([left ^ m0[ot], right ^ m1[ot]]);
            }
            let per = params.noise.share_ots();
            let share = match params.noise {
                Noise::Bit => self.delta(),
                Noise::Field { .. } => pack_share(&shares[i * per..(i + 1) * per]),
            };
            blocks.push(share ^ leaf_sum);
        }
        #[cfg(test)]
        if let Some(i) = self.tamper.take() {
            blocks[i] ^= 1;
        }
        let message = SilentTrees {
            count: params.count as u64,
            blocks,
        };
        ch.send_msg(&message).await?;
        Ok(())
    }
}

/// One part's GGM trees as the sender expanded them: what it sends once
/// the part's base correlations have run.
struct Trees {
    roots: Zeroizing<Vec<u128>>,
    /// Each tree's level sums, `[left, right]` per level, tree-major.
    sums: Zeroizing<Vec<[u128; 2]>>,
    /// Each tree's leaves added up.
    leaf_sums: Zeroizing<Vec<u128>>,
}

/// A VOLE extension the sender made ahead ([`SilentSender::prepare_vole`]):
/// its `B` and the trees still to send.
pub struct PreparedVole {
    shape: SilentParams,
    trees: Trees,
    b: Zeroizing<Vec<u128>>,
    bits: u32,
    /// Where the preparation's time went.
    times: Times,
}

impl PreparedVole {
    /// Correlations it makes.
    pub fn count(&self) -> usize {
        self.b.len()
    }

    /// Bits of the receiver's `c`.
    pub fn bits(&self) -> u32 {
        self.bits
    }
}
