//! Server side of the filter protocol: answers sync and query requests from
//! a published snapshot of the [`ServerState`], as a [`Service`] of the
//! router.

use std::path::Path;
use std::sync::Arc;

use psikit_transport::{Channel, Frame, Message, ProtocolId};

use super::messages::{
    DeltaBody, QueryRequest, QueryResponse, SyncHeader, SyncMode, SyncRequest, KIND_SYNC_BODY,
};
use super::state::{filter_digest, state_path, ServerState};
use super::PROTOCOL_ID;
use crate::service::{Handled, LiveState, ServerLimits, Service};
use crate::{Error, Violation};

/// A state plus what every sync needs precomputed: the serialized filter
/// and its digest. Immutable once published; updates publish a new one.
pub struct FilterSnapshot {
    pub state: ServerState,
    full: Vec<u8>,
    digest: [u8; 32],
}

impl FilterSnapshot {
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
    current: LiveState<FilterSnapshot>,
    limits: ServerLimits,
}

impl FilterService {
    /// Serves `state`; it changes only through [`FilterService::publish`].
    pub fn new(state: ServerState, limits: ServerLimits) -> Self {
        Self {
            current: LiveState::new(FilterSnapshot::new(state)),
            limits,
        }
    }

    /// Serves the state in `dir`, reloaded whenever `psikit filter update`
    /// rewrites it.
    pub fn open(dir: &Path, limits: ServerLimits) -> Result<Self, Error> {
        let owned = dir.to_path_buf();
        let current = LiveState::watching(state_path(dir), move || {
            ServerState::load(&owned).map(FilterSnapshot::new)
        })?;
        Ok(Self { current, limits })
    }

    /// The state requests are currently answered from.
    pub fn snapshot(&self) -> Arc<FilterSnapshot> {
        self.current.snapshot()
    }

    /// Publishes a new state; requests already running finish on the old.
    pub fn publish(&self, state: ServerState) {
        self.current.publish(FilterSnapshot::new(state));
    }

    async fn dispatch(&self, frame: Frame, ch: &mut Channel) -> Result<(), Error> {
        match frame.kind {
            SyncRequest::KIND => self.handle_sync(&frame.payload, ch).await,
            QueryRequest::KIND => self.handle_query(&frame.payload, ch).await,
            other => Err(Violation::UnknownKind(other).into()),
        }
    }

    async fn handle_sync(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let req = SyncRequest::decode(payload, ())?;
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
                ch.send_msg(&header).await?;
            }
            Some((from, slots)) => {
                let packed = snap.state.filter().export_slots(&slots);
                let body = DeltaBody { slots, packed }.encode();
                if body.len() < snap.full.len() / 2 {
                    header.mode = SyncMode::Delta;
                    header.from_epoch = from;
                    ch.send_msg(&header).await?;
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
        .map_err(|e| Error::task("OPRF evaluation", e))?;
        ch.send_msg(&QueryResponse { evaluated }).await?;
        Ok(())
    }
}

impl Service for FilterService {
    fn protocol(&self) -> ProtocolId {
        PROTOCOL_ID
    }

    fn handle<'a>(&'a self, frame: Frame, ch: &'a mut Channel) -> Handled<'a> {
        Box::pin(self.dispatch(frame, ch))
    }

    fn reload(&self) -> Result<Option<String>, Error> {
        Ok(self.current.reload_if_changed()?.map(|s| describe(&s)))
    }

    fn name(&self) -> &'static str {
        "the filter protocol"
    }

    fn describe(&self) -> String {
        describe(&self.snapshot())
    }
}

fn describe(snap: &FilterSnapshot) -> String {
    format!(
        "{} items, epoch {}, filter {} bytes",
        snap.state.len(),
        snap.state.version().epoch,
        snap.full_filter_bytes()
    )
}

async fn send_full(ch: &mut Channel, mut header: SyncHeader, full: &[u8]) -> Result<(), Error> {
    header.mode = SyncMode::Full;
    ch.send_msg(&header).await?;
    ch.send_chunked(PROTOCOL_ID, KIND_SYNC_BODY, full).await?;
    Ok(())
}
