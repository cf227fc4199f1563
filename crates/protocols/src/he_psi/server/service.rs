//! The HE protocol in the long-running server: answers parameter, OPRF and
//! query requests from a published snapshot of the [`HeState`], loaded once
//! and replaced atomically when the database file changes on disk.
//!
//! A query's homomorphic work runs on the rayon pool (bundle indices and
//! bundles in parallel) while the connection's task streams result packages
//! as they are produced. A semaphore bounds concurrent queries, since each
//! holds the powers of its bundle indices in memory.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use psikit_he::Ciphertext;
use psikit_primitives::oprf::ELEMENT_LEN;
use psikit_transport::{Channel, Frame, Message, ProtocolId, TransportError};
use tokio::sync::{mpsc, Semaphore};

use crate::error::{Error, Violation};
use crate::he_psi::common::answer::package_frames;
use crate::he_psi::common::messages::{
    OprfRequest, OprfResponse, ParamsRequest, ParamsResponse, QueryCt, QueryDone, QueryHeader,
    ShardQuery, PROTOCOL_ID,
};
use crate::he_psi::server::state::{db_path, HeState};
use crate::service::{Handled, LiveState, Metrics, ServerLimits, Service, Session};

/// Serves the HE protocol. Cheap to share across connections.
pub struct HeService {
    states: Arc<States>,
    limits: ServerLimits,
    queries: Semaphore,
}

/// The state served, and for a shard the one it replaced: kept until the
/// router asks for the new epoch, so that queries the router sends at the
/// old epoch (until every shard has the update and the router switches)
/// are still answered from it.
struct States {
    current: LiveState<HeState>,
    previous: Mutex<Option<Arc<HeState>>>,
}

impl States {
    /// Reloads the state if its files changed, keeping a shard's old one.
    fn reload(&self) -> Result<Option<Arc<HeState>>, Error> {
        let before = self.current.snapshot();
        let changed = self.current.reload_if_changed()?;
        if changed.is_some() && before.shard().is_some() {
            *self.previous.lock().unwrap_or_else(|p| p.into_inner()) = Some(before);
        }
        Ok(changed)
    }

    /// The shard state at `epoch`, if current or kept.
    fn at(&self, epoch: u64) -> Option<Arc<HeState>> {
        let current = self.current.snapshot();
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        if shard_epoch(&current) == Some(epoch) {
            // The router has switched: the old state is of no more use.
            *previous = None;
            return Some(current);
        }
        previous.clone().filter(|p| shard_epoch(p) == Some(epoch))
    }
}

fn shard_epoch(state: &HeState) -> Option<u64> {
    state.shard().map(|s| s.epoch)
}

impl HeService {
    /// Serves `state`; it changes only through [`HeService::publish`].
    pub fn new(state: HeState, limits: ServerLimits) -> Self {
        Self::with_state(LiveState::new(state), limits)
    }

    /// Serves the database in `dir`, reloaded whenever `psikit he db
    /// update` rewrites it. `cache` keeps query-ready plaintexts in memory
    /// (faster queries, more memory).
    pub fn open(dir: &Path, cache: bool, limits: ServerLimits) -> Result<Self, Error> {
        let owned = dir.to_path_buf();
        let state = LiveState::watching(db_path(dir), move || HeState::load(&owned, cache))?;
        Ok(Self::with_state(state, limits))
    }

    fn with_state(current: LiveState<HeState>, limits: ServerLimits) -> Self {
        Self {
            states: Arc::new(States {
                current,
                previous: Mutex::new(None),
            }),
            queries: Semaphore::new(limits.max_concurrent_queries.max(1)),
            limits,
        }
    }

    /// The state requests are currently answered from.
    pub fn snapshot(&self) -> Arc<HeState> {
        self.states.current.snapshot()
    }

    /// Publishes a new state; queries already running finish on the old.
    pub fn publish(&self, state: HeState) {
        self.states.current.publish(state);
    }

    async fn dispatch(
        &self,
        frame: Frame,
        ch: &mut Channel,
        metrics: &Metrics,
    ) -> Result<(), Error> {
        match frame.kind {
            ParamsRequest::KIND => self.handle_params(ch).await,
            OprfRequest::KIND => self.handle_oprf(&frame.payload, ch).await,
            QueryHeader::KIND => {
                (self.handle_query(self.snapshot(), &frame.payload, ch, metrics)).await
            }
            ShardQuery::KIND => {
                let epoch = ShardQuery::decode(&frame.payload, ())?.epoch;
                let snap = self.at_epoch(epoch).await?;
                let header = ch.recv_expect(PROTOCOL_ID, QueryHeader::KIND).await?;
                self.handle_query(snap, &header.payload, ch, metrics).await
            }
            other => Err(Violation::UnknownKind(other).into()),
        }
    }

    /// The state a router's query at `epoch` is answered from. A router
    /// ahead of this shard (its update written, not yet reloaded) makes
    /// the shard reload at once; a shard without that epoch refuses.
    async fn at_epoch(&self, epoch: u64) -> Result<Arc<HeState>, Error> {
        let current = shard_epoch(&self.snapshot()).ok_or(Violation::Settings(
            "this server holds a whole database, not a shard".into(),
        ))?;
        if current < epoch {
            let states = self.states.clone();
            tokio::task::spawn_blocking(move || states.reload())
                .await
                .map_err(|e| Error::task("reloading the shard", e))??;
        }
        self.states.at(epoch).ok_or_else(|| {
            Violation::Settings(format!(
                "this shard is at epoch {current}; the router asked for epoch {epoch}"
            ))
            .into()
        })
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
            key_format: db.key_format().to_string(),
            label_columns: db.label_columns().to_vec(),
        };
        Ok(ch.send_msg(&response).await?)
    }

    async fn handle_oprf(&self, payload: &[u8], ch: &mut Channel) -> Result<(), Error> {
        let snap = self.snapshot();
        if let Some(info) = snap.shard() {
            return Err(Violation::Settings(format!(
                "this server is shard {} of {} of a database: query the shards' router",
                info.index, info.shards
            ))
            .into());
        }
        let response = oprf_response(snap, payload, self.limits.max_query_items).await?;
        Ok(ch.send_msg(&response).await?)
    }

    /// Reads the query's ciphertexts, then evaluates on the rayon pool while
    /// streaming each package's ciphertexts as they come.
    async fn handle_query(
        &self,
        snap: Arc<HeState>,
        payload: &[u8],
        ch: &mut Channel,
        metrics: &Metrics,
    ) -> Result<(), Error> {
        let he = snap.sender().he().clone();
        let header = query_header(payload, &snap)?;
        let shape = *snap.db().shape();
        let sources = snap.sender().sources();
        let mut query: Vec<Vec<Ciphertext>> = Vec::with_capacity(shape.bundle_idx_count());
        for _ in 0..shape.bundle_idx_count() {
            let mut cts = Vec::with_capacity(sources);
            for _ in 0..sources {
                // Decoded here rather than with `recv_msg`, so that a bad
                // ciphertext is answered with an error frame.
                let frame = ch.recv_expect(QueryCt::PROTOCOL, QueryCt::KIND).await?;
                cts.push(QueryCt::decode(&frame.payload, &he)?.ciphertext(&he)?);
            }
            query.push(cts);
        }
        let queued = metrics.he_queued();
        let _turn = self
            .queries
            .acquire()
            .await
            .map_err(|_| Error::task("waiting for a query turn", "server shutting down"))?;
        let _running = queued.run();
        let (tx, mut rx) = mpsc::channel::<Vec<Frame>>(8);
        // The evaluation's wall time (a link too slow to take the packages
        // as they come would hold it back: eight wait in the channel).
        let work = tokio::task::spawn_blocking(move || -> Result<(usize, Duration), Error> {
            let start = Instant::now();
            let ev = snap.sender().evaluator(&header.relin_key)?;
            let count = snap.sender().answer(&ev, query, |package| {
                let frames = package_frames(&package)?;
                tx.blocking_send(frames)
                    .map_err(|_| Error::Transport(TransportError::Closed))
            })?;
            Ok((count, start.elapsed()))
        });
        while let Some(frames) = rx.recv().await {
            for frame in &frames {
                ch.send(frame).await?;
            }
        }
        let (packages, evaluation) = work
            .await
            .map_err(|e| Error::task("query evaluation", e))??;
        let done = QueryDone {
            packages: packages as u32,
            evaluation_micros: evaluation.as_micros().try_into().unwrap_or(u64::MAX),
        };
        Ok(ch.send_msg(&done).await?)
    }
}

impl Service for HeService {
    fn protocol(&self) -> ProtocolId {
        PROTOCOL_ID
    }

    fn handle<'a>(
        &'a self,
        frame: Frame,
        ch: &'a mut Channel,
        session: &'a mut Session,
    ) -> Handled<'a> {
        Box::pin(self.dispatch(frame, ch, session.metrics()))
    }

    fn reload(&self) -> Result<Option<String>, Error> {
        Ok(self.states.reload()?.map(|s| describe(&s)))
    }

    fn name(&self) -> &'static str {
        "the HE protocol"
    }

    fn step(&self, kind: u8) -> &'static str {
        step(kind)
    }

    /// A shard's epoch; a whole database has none (0).
    fn epoch(&self) -> u64 {
        shard_epoch(&self.snapshot()).unwrap_or(0)
    }

    fn oprf_cost(&self, frame: &Frame) -> u64 {
        oprf_cost(frame)
    }

    fn describe(&self) -> String {
        describe(&self.snapshot())
    }
}

fn describe(state: &HeState) -> String {
    let db = state.db();
    let mem = db.memory();
    format!(
        "{} items, {} bin bundles, labels up to {} bytes, {:.1} MiB in memory",
        db.len(),
        mem.bundles,
        db.shape().max_label_bytes,
        (mem.data_bytes + mem.cache_bytes) as f64 / f64::from(1u32 << 20)
    )
}

/// The step of an HE request of kind `kind` (the label of its metrics).
pub(crate) fn step(kind: u8) -> &'static str {
    match kind {
        ParamsRequest::KIND => "params",
        OprfRequest::KIND => "oprf",
        QueryHeader::KIND | ShardQuery::KIND => "he_eval",
        _ => "unknown",
    }
}

/// The OPRF evaluations a frame asks for: an OPRF request's blinded
/// elements (32 bytes each after a short count).
pub(crate) fn oprf_cost(frame: &Frame) -> u64 {
    match frame.kind == OprfRequest::KIND {
        true => (frame.payload.len() / ELEMENT_LEN) as u64,
        false => 0,
    }
}

/// Evaluates an OPRF request with `state`'s key, off the async threads.
pub(crate) async fn oprf_response(
    state: Arc<HeState>,
    payload: &[u8],
    max_items: u32,
) -> Result<OprfResponse, Error> {
    let req = OprfRequest::decode(payload, max_items)?;
    tokio::task::spawn_blocking(move || {
        let evaluated = state.key()?.blind_evaluate_batch(&req.blinded);
        Ok(OprfResponse { evaluated })
    })
    .await
    .map_err(|e| Error::task("OPRF evaluation", e))?
}

/// Decodes a query's header for `state`'s database: a query prepared for
/// another database is stale.
pub(crate) fn query_header(payload: &[u8], state: &HeState) -> Result<QueryHeader, Error> {
    let header = match QueryHeader::decode(payload, state.sender().he()) {
        Ok(header) => header,
        // A key sized for other parameters is stale, not malformed, when
        // the header (whose first field is the database id) names another
        // database.
        Err(_) if !payload.starts_with(&state.db_id()) => return Err(Error::StaleDatabase),
        Err(e) => return Err(e.into()),
    };
    if header.db_id != state.db_id() {
        return Err(Error::StaleDatabase);
    }
    Ok(header)
}
