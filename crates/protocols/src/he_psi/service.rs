//! The HE protocol in the long-running server: answers parameter, OPRF and
//! query requests from a published snapshot of the [`HeState`], loaded once
//! and replaced atomically when the database file changes on disk.
//!
//! A query's homomorphic work runs on the rayon pool (bundle indices and
//! bundles in parallel) while the connection's task streams result packages
//! as they are produced. A semaphore bounds concurrent queries, since each
//! holds the powers of its bundle indices in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use psikit_he::{wire, Ciphertext};
use psikit_transport::{Channel, Frame};
use tokio::sync::{mpsc, Semaphore};

use super::messages::{
    query_done, OprfRequest, OprfResponse, ParamsResponse, QueryHeader, ResultCt,
    KIND_OPRF_REQUEST, KIND_PARAMS_REQUEST, KIND_QUERY_CT, KIND_QUERY_HEADER, PROTOCOL_ID,
};
use super::sender::ResultPackage;
use super::state::{db_path, HeState};
use crate::published::Published;
use crate::Error;

/// Limits the HE service enforces.
#[derive(Debug, Clone, Copy)]
pub struct HeLimits {
    /// Most items in one OPRF request.
    pub max_query_items: u32,
    /// Queries evaluated at the same time; others wait their turn.
    pub max_concurrent_queries: usize,
}

impl Default for HeLimits {
    fn default() -> Self {
        Self {
            max_query_items: 1 << 16,
            max_concurrent_queries: 2,
        }
    }
}

/// Serves the HE protocol. Cheap to share across connections.
pub struct HeService {
    current: Published<HeState>,
    limits: HeLimits,
    queries: Semaphore,
}

impl HeService {
    pub fn new(state: HeState, limits: HeLimits) -> Self {
        Self {
            current: Published::new(state),
            queries: Semaphore::new(limits.max_concurrent_queries.max(1)),
            limits,
        }
    }

    /// The state requests are currently answered from.
    pub fn snapshot(&self) -> Arc<HeState> {
        self.current.snapshot()
    }

    /// Publishes a new state; queries already running finish on the old.
    pub fn publish(&self, state: HeState) {
        self.current.publish(state);
    }

    /// Handles one request frame of this protocol; [`crate::service`] tells
    /// the client about errors it should hear of.
    pub async fn handle(&self, frame: Frame, ch: &mut Channel) -> Result<(), Error> {
        match frame.kind {
            KIND_PARAMS_REQUEST => self.handle_params(ch).await,
            KIND_OPRF_REQUEST => self.handle_oprf(&frame.payload, ch).await,
            KIND_QUERY_HEADER => self.handle_query(&frame.payload, ch).await,
            other => Err(Error::Protocol(format!("unknown request kind {other}"))),
        }
    }

    async fn handle_params(&self, ch: &mut Channel) -> Result<(), Error> {
        let snap = self.snapshot();
        let db = snap.db();
        let response = ParamsResponse {
            params_json: db.params().to_apsi_json(),
            max_label_bytes: db.shape().max_label_bytes as u32,
            db_id: snap.db_id(),
            max_query_items: self.limits.max_query_items,
            bundle_counts: db.bundle_counts().iter().map(|&c| c as u32).collect(),
        };
        Ok(ch.send(&response.to_frame()).await?)
    }

    async fn handle_oprf(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let req = OprfRequest::decode(payload, self.limits.max_query_items)?;
        let snap = self.snapshot();
        let evaluated =
            tokio::task::spawn_blocking(move || snap.key().blind_evaluate_batch(&req.blinded))
                .await
                .map_err(|e| Error::Protocol(format!("OPRF task failed: {e}")))?;
        Ok(ch.send(&OprfResponse { evaluated }.to_frame()).await?)
    }

    /// Reads the query's ciphertexts, then evaluates on the rayon pool while
    /// streaming each package's ciphertexts as they come.
    async fn handle_query(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let snap = self.snapshot();
        let he = snap.sender().he().clone();
        let header = QueryHeader::decode(payload, &he)?;
        if header.db_id != snap.db_id() {
            return Err(Error::Protocol(
                "the query was prepared for another database (parameters or key changed); \
                 fetch the parameters again"
                    .into(),
            ));
        }
        let shape = *snap.db().shape();
        let sources = snap.sender().sources();
        let mut query: Vec<Vec<Ciphertext>> = Vec::with_capacity(shape.bundle_idx_count());
        for _ in 0..shape.bundle_idx_count() {
            let mut cts = Vec::with_capacity(sources);
            for _ in 0..sources {
                let frame = ch.recv_expect(PROTOCOL_ID, KIND_QUERY_CT).await?;
                cts.push(wire::decode_query_ct(&he, &frame.payload)?);
            }
            query.push(cts);
        }
        let _turn = self
            .queries
            .acquire()
            .await
            .map_err(|_| Error::Protocol("server shutting down".into()))?;
        let (tx, mut rx) = mpsc::channel::<Vec<Frame>>(8);
        let work = tokio::task::spawn_blocking(move || -> Result<usize, Error> {
            let ev = snap.sender().evaluator(&header.relin_key)?;
            snap.sender().answer(&ev, query, |package| {
                let frames = package_frames(&package)?;
                tx.blocking_send(frames)
                    .map_err(|_| Error::Protocol("client went away".into()))
            })
        });
        while let Some(frames) = rx.recv().await {
            for frame in &frames {
                ch.send(frame).await?;
            }
        }
        let packages = work
            .await
            .map_err(|e| Error::Protocol(format!("query task failed: {e}")))??;
        Ok(ch.send(&query_done(packages as u32)).await?)
    }

    /// Reloads the state whenever the database file's modification time
    /// changes (after `psikit he db update`); a failed reload keeps serving
    /// the old state and says why on stderr.
    pub async fn watch(self: Arc<Self>, dir: PathBuf, every: Duration, cache: bool) {
        let path = db_path(&dir);
        let mut seen = modified(&path);
        loop {
            tokio::time::sleep(every).await;
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            let dir2 = dir.clone();
            match tokio::task::spawn_blocking(move || HeState::load(&dir2, cache)).await {
                Ok(Ok(state)) => {
                    eprintln!("psikit: reloaded HE database ({} items)", state.db().len());
                    self.publish(state);
                }
                Ok(Err(e)) => eprintln!("psikit: HE database reload failed: {e}"),
                Err(e) => eprintln!("psikit: HE database reload failed: {e}"),
            }
        }
    }
}

/// The frames of one result package: matching ciphertext, then labels.
fn package_frames(package: &ResultPackage) -> Result<Vec<Frame>, Error> {
    std::iter::once(&package.matching)
        .chain(&package.labels)
        .enumerate()
        .map(|(poly, ct)| Ok(ResultCt::encode(package.bundle_idx, poly as u16, ct)?))
        .collect()
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
