//! Server side of the filter protocol: answers sync and query requests from
//! a published snapshot of the [`ServerState`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use psikit_transport::{Channel, Frame};

use super::messages::{
    DeltaBody, QueryRequest, QueryResponse, SyncHeader, SyncMode, SyncRequest, KIND_QUERY_REQUEST,
    KIND_SYNC_BODY, KIND_SYNC_REQUEST,
};
use super::state::{filter_digest, state_path, ServerState};
use super::PROTOCOL_ID;
use crate::Error;

/// Per-request limits the server enforces.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Most blinded elements accepted in one query request.
    pub max_query_items: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_query_items: 1 << 18,
        }
    }
}

/// A state plus what every sync needs precomputed: the serialized filter
/// and its digest. Immutable once published; updates publish a new one.
pub struct Published {
    pub state: ServerState,
    full: Vec<u8>,
    digest: [u8; 32],
}

impl Published {
    pub fn new(state: ServerState) -> Self {
        let full = state.filter().to_bytes();
        let digest = filter_digest(&full);
        Self {
            state,
            full,
            digest,
        }
    }

    /// Bytes of the serialized filter a new client downloads.
    pub fn full_filter_bytes(&self) -> usize {
        self.full.len()
    }
}

/// Serves the filter protocol. Cheap to share across connections.
pub struct FilterService {
    current: crate::published::Published<Published>,
    limits: ServerLimits,
}

impl FilterService {
    pub fn new(state: ServerState, limits: ServerLimits) -> Self {
        Self {
            current: crate::published::Published::new(Published::new(state)),
            limits,
        }
    }

    /// The state requests are currently answered from.
    pub fn snapshot(&self) -> Arc<Published> {
        self.current.snapshot()
    }

    /// Publishes a new state; requests already running finish on the old.
    pub fn publish(&self, state: ServerState) {
        self.current.publish(Published::new(state));
    }

    /// Handles one request frame of this protocol; [`crate::service`] tells
    /// the client about errors it should hear of.
    pub async fn handle(&self, frame: Frame, ch: &mut Channel) -> Result<(), Error> {
        match frame.kind {
            KIND_SYNC_REQUEST => self.handle_sync(&frame.payload, ch).await,
            KIND_QUERY_REQUEST => self.handle_query(&frame.payload, ch).await,
            other => Err(Error::Protocol(format!("unknown request kind {other}"))),
        }
    }

    async fn handle_sync(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let req = SyncRequest::decode(payload)?;
        let snap = self.snapshot();
        let mut header = SyncHeader {
            mode: SyncMode::Full,
            version: snap.state.version(),
            from_epoch: 0,
            digest: snap.digest,
            max_query_items: self.limits.max_query_items,
        };
        let delta = req.have.and_then(|have| {
            let slots = snap.state.changed_since(have)?;
            Some((have.epoch, slots))
        });
        match delta {
            Some((from, slots)) if slots.is_empty() && from == header.version.epoch => {
                header.mode = SyncMode::UpToDate;
                ch.send(&header.to_frame()).await?;
            }
            Some((from, slots)) => {
                let packed = snap.state.filter().export_slots(&slots);
                let body = DeltaBody { slots, packed }.encode();
                if body.len() < snap.full.len() / 2 {
                    header.mode = SyncMode::Delta;
                    header.from_epoch = from;
                    ch.send(&header.to_frame()).await?;
                    ch.send_chunked(PROTOCOL_ID, KIND_SYNC_BODY, &body).await?;
                } else {
                    send_full(ch, header, &snap.full).await?;
                }
            }
            None => send_full(ch, header, &snap.full).await?,
        }
        Ok(())
    }

    async fn handle_query(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let req = QueryRequest::decode(payload, self.limits.max_query_items)?;
        let snap = self.snapshot();
        let current = snap.state.version();
        if req.version != current {
            return Err(Error::StaleFilter {
                have: req.version.epoch,
                current: current.epoch,
            });
        }
        // Scalar multiplications are CPU-bound: run them on the rayon pool
        // via a blocking thread so the async workers keep serving others.
        let evaluated = tokio::task::spawn_blocking(move || {
            snap.state.key().blind_evaluate_batch(&req.blinded)
        })
        .await
        .map_err(|e| Error::Protocol(format!("evaluation task failed: {e}")))?;
        ch.send(&QueryResponse { evaluated }.to_frame()).await?;
        Ok(())
    }

    /// Reloads the state from `dir` whenever its state file changes (an
    /// `update` run rewrites it atomically). Runs until the task is dropped.
    pub async fn watch(self: Arc<Self>, dir: PathBuf, every: Duration) {
        let path = state_path(&dir);
        let mut seen = modified(&path);
        loop {
            tokio::time::sleep(every).await;
            let now = modified(&path);
            if now == seen {
                continue;
            }
            seen = now;
            let dir2 = dir.clone();
            match tokio::task::spawn_blocking(move || ServerState::load(&dir2)).await {
                Ok(Ok(state)) => {
                    let v = state.version();
                    self.publish(state);
                    eprintln!("psikit: reloaded filter state (epoch {})", v.epoch);
                }
                Ok(Err(e)) => eprintln!("psikit: keeping current state; reload failed: {e}"),
                Err(e) => eprintln!("psikit: keeping current state; reload task failed: {e}"),
            }
        }
    }
}

async fn send_full(ch: &mut Channel, mut header: SyncHeader, full: &[u8]) -> Result<(), Error> {
    header.mode = SyncMode::Full;
    ch.send(&header.to_frame()).await?;
    ch.send_chunked(PROTOCOL_ID, KIND_SYNC_BODY, full).await?;
    Ok(())
}

fn modified(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
