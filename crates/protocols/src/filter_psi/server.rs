//! Server side of the filter protocol: answers sync and query requests from
//! a published snapshot of the [`ServerState`], as a [`Service`] of the
//! router.

use std::path::Path;
use std::sync::Arc;

use psikit_primitives::oprf::ELEMENT_LEN;
use psikit_transport::{Channel, Frame, Message, ProtocolId};

use super::messages::PROTOCOL_ID;
use super::messages::{
    DeltaBody, QueryRequest, QueryResponse, SyncHeader, SyncMode, SyncRequest, KIND_SYNC_BODY,
};
use super::state::{filter_digest, state_files, ServerState};
use crate::error::{Error, Violation};
use crate::service::{Handled, LiveState, ServerLimits, Service, Session};

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

    /// The sans-IO answer to a sync request: the header, and the body (full
    /// filter or delta) that follows it unless the client is up to date.
    /// A delta is sent only while it is under half the full filter.
    pub fn answer_sync(
        &self,
        req: &SyncRequest,
        max_query_items: u32,
    ) -> (SyncHeader, SyncBody<'_>) {
        let mut header = SyncHeader {
            mode: SyncMode::Full,
            version: self.state.version(),
            from_epoch: 0,
            digest: self.digest,
            max_query_items,
            key_format: self.state.key_format().to_string(),
        };
        let delta = req.have.and_then(|have| {
            let slots = self.state.changed_since(have)?;
            Some((have.epoch, slots))
        });
        let body = match delta {
            Some((from, slots)) if slots.is_empty() && from == header.version.epoch => {
                header.mode = SyncMode::UpToDate;
                SyncBody::None
            }
            Some((from, slots)) => {
                let packed = self.state.filter().export_slots(&slots);
                let body = DeltaBody { slots, packed }.encode();
                if body.len() < self.full.len() / 2 {
                    header.mode = SyncMode::Delta;
                    header.from_epoch = from;
                    SyncBody::Delta(body)
                } else {
                    SyncBody::Full(&self.full)
                }
            }
            None => SyncBody::Full(&self.full),
        };
        (header, body)
    }

    /// The sans-IO answer to a query: the blinded elements evaluated under
    /// the key, or [`Error::StaleFilter`] for a client whose filter is of
    /// another epoch. CPU-bound (one scalar multiplication per element, on
    /// the rayon pool).
    pub fn answer_query(&self, req: &QueryRequest) -> Result<QueryResponse, Error> {
        let current = self.state.version();
        if req.version != current {
            return Err(Error::StaleFilter {
                have: req.version.epoch,
                current: current.epoch,
            });
        }
        Ok(QueryResponse {
            evaluated: self.state.key().blind_evaluate_batch(&req.blinded),
        })
    }
}

/// What follows a [`SyncHeader`].
pub enum SyncBody<'a> {
    None,
    Full(&'a [u8]),
    Delta(Vec<u8>),
}

impl SyncBody<'_> {
    /// The body's bytes, if there is one.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            SyncBody::None => None,
            SyncBody::Full(full) => Some(full),
            SyncBody::Delta(delta) => Some(delta),
        }
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
    /// changes it: only the new change files are read while the base
    /// stays the same.
    pub fn open(dir: &Path, limits: ServerLimits) -> Result<Self, Error> {
        let owned = dir.to_path_buf();
        let files = dir.to_path_buf();
        let current = LiveState::watching_files(
            move || state_files(&files),
            move |current: Option<&FilterSnapshot>| {
                let refreshed = match current {
                    Some(c) => c.state.refreshed(&owned)?,
                    None => None,
                };
                let state = match refreshed {
                    Some(state) => state,
                    None => ServerState::load(&owned)?,
                };
                Ok(FilterSnapshot::new(state))
            },
        )?;
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
        let (header, body) = snap.answer_sync(&req, self.limits.max_query_items);
        ch.send_msg(&header).await?;
        if let Some(bytes) = body.bytes() {
            ch.send_chunked(PROTOCOL_ID, KIND_SYNC_BODY, bytes).await?;
        }
        Ok(())
    }

    async fn handle_query(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let req = QueryRequest::decode(payload, self.limits.max_query_items)?;
        let snap = self.snapshot();
        // Scalar multiplications are CPU-bound: run them on the rayon pool
        // via a blocking thread so the async workers keep serving others.
        let response = tokio::task::spawn_blocking(move || snap.answer_query(&req))
            .await
            .map_err(|e| Error::task("OPRF evaluation", e))??;
        ch.send_msg(&response).await?;
        Ok(())
    }
}

impl Service for FilterService {
    fn protocol(&self) -> ProtocolId {
        PROTOCOL_ID
    }

    fn handle<'a>(
        &'a self,
        frame: Frame,
        ch: &'a mut Channel,
        _session: &'a mut Session,
    ) -> Handled<'a> {
        Box::pin(self.dispatch(frame, ch))
    }

    fn reload(&self) -> Result<Option<String>, Error> {
        Ok(self.current.reload_if_changed()?.map(|s| describe(&s)))
    }

    fn name(&self) -> &'static str {
        "the filter protocol"
    }

    fn step(&self, kind: u8) -> &'static str {
        match kind {
            SyncRequest::KIND => "sync",
            QueryRequest::KIND => "oprf",
            _ => "unknown",
        }
    }

    fn epoch(&self) -> u64 {
        self.snapshot().state.version().epoch
    }

    /// A query request's blinded elements (32 bytes each; its other fields
    /// take fewer than 32 bytes).
    fn oprf_cost(&self, frame: &Frame) -> u64 {
        match frame.kind == QueryRequest::KIND {
            true => (frame.payload.len() / ELEMENT_LEN) as u64,
            false => 0,
        }
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
