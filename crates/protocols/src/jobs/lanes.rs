//! A connection's buckets over its lanes: each lane is a connection of its
//! own running every `lanes`-th bucket still to do, one after another,
//! with its next bucket loading while one runs. Lanes fill the time one
//! side of a bucket waits for the other and use cores one bucket's
//! protocol leaves idle; each bucket's run is the same as on one lane
//! (its own protocol instance, padded to the job's capacity), so lanes
//! change neither results nor what a bucket reveals.

use std::path::PathBuf;
use std::sync::Arc;

use psikit_transport::Channel;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::kind::JobProtocol;
use super::prepare::Bucket;
use super::terms::{Agreed, BucketStart};
use crate::balanced::{self, Role, Settings};
use crate::common::NoProgress;
use crate::error::Error;

/// What every lane of a connection runs buckets with.
pub(super) struct BucketRunner {
    pub role: Role,
    pub protocol: JobProtocol,
    pub agreed: Agreed,
    /// This side's longest encoded key: the union's slot width at its
    /// provider.
    #[cfg_attr(not(feature = "cpsi"), allow(dead_code))]
    pub longest_key: u64,
}

/// A bucket one lane finished, for the journal.
pub(super) struct Ran {
    pub bucket: u64,
    /// Its matched rows (sorted), or this side's shares (circuit PSI).
    pub result: Vec<u64>,
    /// Bytes both ways on its lane while it ran.
    pub bytes: u64,
}

/// Runs `todo` (each bucket with its spool file) over `first` and `extra`
/// lanes, handing each finished bucket to `finished` as it ends (in no
/// fixed order across lanes). Returns the bytes sent and received over
/// the extra lanes (`first` counts its own). A failure on any lane stops
/// them all.
pub(super) async fn run_lanes(
    runner: BucketRunner,
    first: &mut Channel,
    extra: Vec<Channel>,
    todo: Vec<(u64, PathBuf)>,
    mut finished: impl FnMut(Ran) -> Result<(), Error>,
) -> Result<(u64, u64), Error> {
    let lanes = 1 + extra.len();
    let share = |lane: usize| -> Vec<(u64, PathBuf)> {
        todo.iter().skip(lane).step_by(lanes).cloned().collect()
    };
    let runner = Arc::new(runner);
    let (done, mut finishes) = mpsc::channel::<Ran>(lanes);
    let mut others = JoinSet::new();
    for (i, mut ch) in extra.into_iter().enumerate() {
        let (runner, buckets, done) = (runner.clone(), share(i + 1), done.clone());
        others.spawn(async move {
            let ran = runner.run_lane(&mut ch, buckets, done).await;
            let (sent, received) = (ch.bytes_sent(), ch.bytes_received());
            ch.close().await;
            (sent, received, ran)
        });
    }
    let own = runner.run_lane(first, share(0), done);
    let lanes = async move {
        let join = async {
            let mut bytes = (0u64, 0u64);
            while let Some(joined) = others.join_next().await {
                let (sent, received, ran) = joined.map_err(|e| Error::task("running a lane", e))?;
                bytes = (bytes.0 + sent, bytes.1 + received);
                ran?;
            }
            Ok::<_, Error>(bytes)
        };
        let ran = tokio::try_join!(own, join);
        // Dropping the set stops lanes still running after a failure.
        drop(others);
        ran.map(|((), bytes)| bytes)
    };
    // Buckets a lane finished are committed even when another lane fails
    // meanwhile: the queue is drained until every lane is gone. Only a
    // failure to commit (or a cancelled job) stops the lanes at once.
    let collect = async move {
        while let Some(ran) = finishes.recv().await {
            finished(ran)?;
        }
        Ok::<_, Error>(())
    };
    tokio::pin!(lanes, collect);
    tokio::select! {
        committed = &mut collect => {
            committed?;
            lanes.await
        }
        ran = &mut lanes => {
            collect.await?;
            ran
        }
    }
}

/// Both sides state the bucket they start; a guard against two sides
/// that disagree on the order (or, in a cluster job, on the bucket a
/// connection carries).
pub(super) async fn meet(ch: &mut Channel, b: u64, buckets: u64) -> Result<(), Error> {
    ch.send_msg(&BucketStart { bucket: b }).await?;
    let theirs = ch.recv_msg::<BucketStart>(buckets).await?;
    if theirs.bucket != b {
        return Err(Error::Job(format!(
            "the peer starts bucket {}, this side bucket {b}",
            theirs.bucket
        )));
    }
    Ok(())
}

impl BucketRunner {
    /// One lane's buckets in order, the next one loading while one runs.
    async fn run_lane(
        &self,
        ch: &mut Channel,
        buckets: Vec<(u64, PathBuf)>,
        done: mpsc::Sender<Ran>,
    ) -> Result<(), Error> {
        let count = self.agreed.shape.buckets;
        let load = |(b, path): &(u64, PathBuf)| {
            let (b, path, role) = (*b, path.clone(), self.role);
            let cap = self.agreed.own_capacity(role);
            tokio::task::spawn_blocking(move || Bucket::load(&path, b, role, cap))
        };
        let mut next = buckets.first().map(load);
        for (i, &(b, _)) in buckets.iter().enumerate() {
            let loading = next
                .take()
                .ok_or(Error::Internal("the next bucket is loading"))?;
            let bucket = loading
                .await
                .map_err(|e| Error::task("loading a bucket", e))??;
            next = buckets.get(i + 1).map(load);
            meet(ch, b, count).await?;
            let before = ch.bytes_sent() + ch.bytes_received();
            let result = self.run_bucket(ch, &bucket).await?;
            let bytes = ch.bytes_sent() + ch.bytes_received() - before;
            let ran = Ran {
                bucket: b,
                result,
                bytes,
            };
            done.send(ran)
                .await
                .map_err(|_| Error::Internal("the journal stopped taking buckets"))?;
        }
        Ok(())
    }

    /// One bucket's run: its matched rows (sorted), this side's shares of
    /// circuit PSI's aggregates (opened once over the whole job), its
    /// per-bin shares (`shares.rs`), or the union's keys (`union.rs`).
    pub(super) async fn run_bucket(
        &self,
        ch: &mut Channel,
        bucket: &Bucket,
    ) -> Result<Vec<u64>, Error> {
        let peer_capacity = self.agreed.peer_capacity(self.role);
        let sigma = self.agreed.shape.statistical_bits();
        match &self.protocol {
            JobProtocol::Balanced(s) => {
                let settings = Settings {
                    max_peer_items: peer_capacity,
                    statistical_bits: sigma,
                    ..s.clone()
                };
                let out = balanced::run_on(ch, self.role, &bucket.keys, &settings, &NoProgress);
                let matches = out.await?.matches;
                Ok(matches.map(|m| bucket.matched_rows(&m)).unwrap_or_default())
            }
            #[cfg(feature = "cpsi")]
            JobProtocol::Circuit { config, .. } => {
                use crate::cpsi::{facade, App, CpsiConfig, Input, Output, UnionItems};
                let config = CpsiConfig {
                    max_set_size: peer_capacity,
                    statistical_bits: sigma,
                    ..config.clone()
                };
                let input = Input {
                    keys: &bucket.keys,
                    values: &bucket.values,
                };
                let role = self.role.into();
                match config.app {
                    App::Shares => {
                        let out = facade::run_on(ch, role, input, &config, &NoProgress).await?;
                        match out.output {
                            Output::Shares(s) => super::shares::encode(bucket, &s),
                            _ => Err(Error::Internal("the shares application's output")),
                        }
                    }
                    App::Union => {
                        let union = UnionItems {
                            payloads: &bucket.encoded,
                            width: usize::try_from(self.longest_key)
                                .map_err(|_| Error::Internal("a key's length"))?,
                        };
                        let learned = facade::union_on(ch, role, input, union, &config).await?;
                        // The learner keeps its own keys and those it learned.
                        let own = learned.is_some().then_some(&bucket.encoded);
                        let keys = own.into_iter().flatten().chain(learned.iter().flatten());
                        Ok(super::union::pack(keys.map(Vec::as_slice)))
                    }
                    _ => facade::shares_on(ch, role, input, &config, &NoProgress).await,
                }
            }
        }
    }
}
