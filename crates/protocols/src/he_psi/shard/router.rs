//! The router of a sharded HE database (`manifest.rs`): to clients it
//! is an HE server. It holds the OPRF key and the manifest, answers the
//! parameter request (bundle counts summed over the shards) and the OPRF
//! itself, and sends every query to every shard over psikit's own frames,
//! forwarding their result packages as they arrive and ending with one
//! done message counting them all. If any shard fails, the query ends with
//! a retryable error instead of the done message, so the client, which
//! only returns once it has counted every package, never takes a partial
//! answer. Shards never see the key; the router never sees a database.
//!
//! A router given a trace sink ([`ShardRouter::with_trace`]) reports each
//! answered query's sizes and times ([`QueryTrace`]), so that a query's
//! latency can be split into the fan-out, each shard's evaluation and the
//! gathering without instrumenting the shards.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use psikit_transport::{Channel, Frame, Message, ProtocolId};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::common::connect::ServerAddr;
use crate::error::{Error, Violation};
use crate::he_psi::common::answer::{check_done, next_answer, Answer};
use crate::he_psi::common::hex::hex;
use crate::he_psi::common::messages::{
    OprfRequest, ParamsRequest, ParamsResponse, QueryCt, QueryDone, QueryHeader, ShardQuery,
    PROTOCOL_ID,
};
use crate::he_psi::params::PsiParams;
use crate::he_psi::server::service::{oprf_response, query_header};
use crate::he_psi::server::state::HeState;
use crate::he_psi::shard::manifest::Manifest;
use crate::service::{Handled, LiveState, Metrics, Readiness, ServerLimits, Service, Session};

/// The router's key and manifest, reloaded together when the manifest
/// changes (an update applied by every shard bumps its epoch).
pub struct RouterState {
    /// The key and an empty database with the shards' parameters.
    state: Arc<HeState>,
    manifest: Manifest,
}

impl RouterState {
    /// Loads a router directory (`oprf.key`, `manifest.json`), checking that
    /// the key is the one the shards were built for.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let manifest = Manifest::load(dir)?;
        let params = PsiParams::from_apsi_json(&manifest.params)?;
        let state = HeState::load_router(dir, params, manifest.max_label_bytes)?;
        if hex(&state.db_id()) != manifest.db_id {
            return Err(Error::StateFile(format!(
                "{}: the OPRF key there is not the one the shards were built with",
                dir.display()
            )));
        }
        Ok(Self {
            state: Arc::new(state),
            manifest,
        })
    }
}

/// What the router saw of one answered query: sizes and times only, never
/// anything of the sets (no items, no ciphertexts), so it may be logged.
/// Times are from the moment the query's header arrived.
#[derive(Clone, Debug)]
pub struct QueryTrace {
    /// The epoch the query was answered at.
    pub epoch: u64,
    /// When the client's whole query had arrived (the fan-out starts).
    pub received: Duration,
    /// Bytes of the query as sent to each shard (every shard gets the same
    /// query: its epoch, the header and the ciphertexts).
    pub query_bytes: u64,
    /// One entry per shard, in shard order.
    pub shards: Vec<ShardTrace>,
    /// Result packages forwarded to the client (the count its done message
    /// carries).
    pub packages: u32,
    /// Bytes of the packages forwarded to the client.
    pub forwarded_bytes: u64,
    /// When the client's done message was sent.
    pub done: Duration,
}

impl QueryTrace {
    /// The query bytes sent to all shards together.
    pub fn fan_out_bytes(&self) -> u64 {
        self.query_bytes.saturating_mul(self.shards.len() as u64)
    }

    /// When the last shard's done message arrived.
    pub fn last_shard_done(&self) -> Duration {
        (self.shards.iter().map(|s| s.done))
            .max()
            .unwrap_or(self.received)
    }

    /// The gathering: from the last shard's done message to the client's
    /// (packages still queued for the client are forwarded meanwhile).
    pub fn gather(&self) -> Duration {
        self.done.saturating_sub(self.last_shard_done())
    }

    /// One JSON object on one line, times in milliseconds, for logs that
    /// scripts read (`psikit serve --trace-queries`).
    pub fn to_json(&self) -> String {
        let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        let shards: Vec<serde_json::Value> = (self.shards.iter().enumerate())
            .map(|(i, s)| {
                serde_json::json!({
                    "shard": i,
                    "sent_ms": ms(s.sent),
                    "first_ms": s.first.map(ms),
                    "last_ms": s.last.map(ms),
                    "done_ms": ms(s.done),
                    "packages": s.packages,
                    "bytes": s.bytes,
                })
            })
            .collect();
        serde_json::json!({
            "epoch": self.epoch,
            "received_ms": ms(self.received),
            "query_bytes": self.query_bytes,
            "fan_out_bytes": self.fan_out_bytes(),
            "shards": shards,
            "gather_ms": ms(self.gather()),
            "packages": self.packages,
            "forwarded_bytes": self.forwarded_bytes,
            "done_ms": ms(self.done),
        })
        .to_string()
    }
}

/// One shard's part of a [`QueryTrace`], as the router saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardTrace {
    /// When the query was written to the shard (connection included).
    pub sent: Duration,
    /// When its first and last result package arrived (none: it had no
    /// bundle to answer from).
    pub first: Option<Duration>,
    pub last: Option<Duration>,
    /// When its done message arrived.
    pub done: Duration,
    /// Its evaluation time, as its done message states it.
    pub evaluation: Duration,
    pub packages: u32,
    /// Bytes of its result packages.
    pub bytes: u64,
}

/// Where a router reports its [`QueryTrace`]s; called once per answered
/// query, on the connection's task (so it should be quick).
pub type TraceSink = Arc<dyn Fn(&QueryTrace) + Send + Sync>;

/// How long a readiness probe waits for each shard's answer.
const READY_WAIT: Duration = Duration::from_secs(5);

/// Serves a sharded database's clients (see the docs of `shard/router.rs`).
pub struct ShardRouter {
    current: LiveState<RouterState>,
    shards: Vec<ServerAddr>,
    limits: ServerLimits,
    trace: Option<TraceSink>,
}

impl ShardRouter {
    /// Routes to `shards` (shard `i` at `shards[i]`) for the router
    /// directory `dir`, reloaded when its manifest changes.
    pub fn open(dir: &Path, shards: Vec<ServerAddr>, limits: ServerLimits) -> Result<Self, Error> {
        let owned: PathBuf = dir.to_path_buf();
        let current = LiveState::watching(Manifest::path(dir), move || RouterState::load(&owned))?;
        let want = current.snapshot().manifest.shards() as usize;
        if shards.len() != want {
            return Err(Error::Config(format!(
                "the database has {want} shards; {} shard addresses were given",
                shards.len()
            )));
        }
        Ok(Self {
            current,
            shards,
            limits,
            trace: None,
        })
    }

    /// Asks every shard for its parameters at once: `Err` names the first
    /// shard that does not answer within [`READY_WAIT`] or answers for
    /// another database.
    async fn shards_answer(&self) -> Result<(), String> {
        let db_id = self.current.snapshot().state.db_id();
        let mut asks = JoinSet::new();
        for (index, addr) in self.shards.iter().enumerate() {
            let addr = addr.clone();
            asks.spawn(async move {
                let asked = tokio::time::timeout(READY_WAIT, async {
                    let mut ch = addr.connect().await?;
                    ch.send_msg(&ParamsRequest).await?;
                    Ok::<_, Error>(ch.recv_msg::<ParamsResponse>(()).await?.db_id)
                });
                let outcome = match asked.await {
                    Ok(Ok(id)) if id == db_id => Ok(()),
                    Ok(Ok(_)) => Err("serves another database".to_string()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(format!("no answer within {READY_WAIT:?}")),
                };
                outcome.map_err(|why| format!("shard {index} ({}): {why}", addr.addr))
            });
        }
        let mut first = Ok(());
        while let Some(joined) = asks.join_next().await {
            let outcome = joined.map_err(|e| format!("asking a shard failed: {e}"))?;
            first = first.and(outcome);
        }
        first
    }

    /// Reports every answered query to `sink` (failed queries are not
    /// reported: the server logs their error).
    pub fn with_trace(mut self, sink: TraceSink) -> Self {
        self.trace = Some(sink);
        self
    }

    async fn dispatch(
        &self,
        frame: Frame,
        ch: &mut Channel,
        session: &mut Session,
    ) -> Result<(), Error> {
        // A connection is answered at one epoch: the one its first request
        // saw, even if the router switches meanwhile.
        let snap = session
            .get_or_insert_with(|| self.current.snapshot())
            .clone();
        match frame.kind {
            ParamsRequest::KIND => {
                let response = params_response(&snap, self.limits.max_query_items);
                Ok(ch.send_msg(&response).await?)
            }
            OprfRequest::KIND => {
                let state = snap.state.clone();
                let response =
                    oprf_response(state, &frame.payload, self.limits.max_query_items).await?;
                Ok(ch.send_msg(&response).await?)
            }
            QueryHeader::KIND => self.fan_out(&snap, frame, ch, session.metrics()).await,
            other => Err(Violation::UnknownKind(other).into()),
        }
    }

    /// Reads the query, sends it to every shard at this connection's epoch
    /// and forwards their result packages (each whole, never interleaved)
    /// as they arrive.
    async fn fan_out(
        &self,
        snap: &RouterState,
        header: Frame,
        ch: &mut Channel,
        metrics: &Metrics,
    ) -> Result<(), Error> {
        let start = Instant::now();
        let state = &snap.state;
        query_header(&header.payload, state)?;
        let shape = state.db().shape();
        let cts = shape.bundle_idx_count() * state.sender().sources();
        let mut query = Vec::with_capacity(cts + 2);
        let epoch = ShardQuery {
            epoch: snap.manifest.epoch,
        };
        query.push(epoch.to_frame());
        query.push(header);
        for _ in 0..cts {
            query.push(ch.recv_expect(QueryCt::PROTOCOL, QueryCt::KIND).await?);
        }
        let received = start.elapsed();
        let query = Arc::new(query);
        let (tx, mut rx) = mpsc::channel::<Vec<Frame>>(8);
        // Dropped with this call (a client gone): the shard tasks end too.
        let mut asks = JoinSet::new();
        for (index, addr) in self.shards.iter().enumerate() {
            let (addr, query, tx) = (addr.clone(), query.clone(), tx.clone());
            let polys = shape.polys();
            asks.spawn(async move { (index, ask_shard(&addr, &query, polys, &tx, start).await) });
        }
        drop(tx);
        let (mut packages, mut forwarded_bytes) = (0u32, 0u64);
        while let Some(package) = rx.recv().await {
            for frame in &package {
                ch.send(frame).await?;
                forwarded_bytes += frame.wire_len();
            }
            packages = packages.saturating_add(1);
        }
        let mut shards = vec![None; self.shards.len()];
        while let Some(joined) = asks.join_next().await {
            let (index, answered) = joined.map_err(|e| Error::task("a shard's query", e))?;
            let took = answered.as_ref().map_or(start.elapsed(), |t| t.done);
            metrics.shard_query(index, answered.is_ok(), took);
            let shard = answered.map_err(|e| Error::ShardUnavailable {
                shard: index as u32,
                reason: e.to_string(),
            })?;
            shards[index] = Some(shard);
        }
        // The shards evaluate at once: the slowest one's time is the
        // database's.
        let evaluation = shards.iter().flatten().map(|t| t.evaluation).max();
        let evaluation_micros = evaluation.unwrap_or_default().as_micros();
        ch.send_msg(&QueryDone {
            packages,
            evaluation_micros: evaluation_micros.try_into().unwrap_or(u64::MAX),
        })
        .await?;
        if let Some(sink) = &self.trace {
            sink(&QueryTrace {
                epoch: snap.manifest.epoch,
                received,
                query_bytes: query.iter().map(Frame::wire_len).sum(),
                shards: shards.into_iter().flatten().collect(),
                packages,
                forwarded_bytes,
                done: start.elapsed(),
            });
        }
        Ok(())
    }
}

/// The parameter response for the whole sharded database.
fn params_response(snap: &RouterState, max_query_items: u32) -> ParamsResponse {
    let m = &snap.manifest;
    ParamsResponse {
        params_json: m.params.clone(),
        max_label_bytes: m.max_label_bytes as u32,
        db_id: snap.state.db_id(),
        max_query_items,
        bundle_counts: m.total_bundle_counts(),
        key_format: m.key_format.clone(),
        label_columns: m.label_columns.clone(),
    }
}

/// Sends the query to the shard at `addr` and passes each of its result
/// packages (`polys` frames) to `packages`; returns what it saw (times
/// from `start`), its package count checked against the shard's done
/// message. `query` is the frames a shard reads: [`ShardQuery`], the
/// client's [`QueryHeader`], then its
/// [`QueryCt`]s. The shard probe (`probe.rs`) asks a shard through it too,
/// so the benchmark times exactly what the router does.
pub(crate) async fn ask_shard(
    addr: &ServerAddr,
    query: &[Frame],
    polys: usize,
    packages: &mpsc::Sender<Vec<Frame>>,
    start: Instant,
) -> Result<ShardTrace, Error> {
    let mut ch = addr.connect().await?;
    for frame in query {
        ch.send(frame).await?;
    }
    let mut trace = ShardTrace {
        sent: start.elapsed(),
        first: None,
        last: None,
        done: Duration::ZERO,
        evaluation: Duration::ZERO,
        packages: 0,
        bytes: 0,
    };
    loop {
        let package = match next_answer(&mut ch, polys, "a shard's answer").await? {
            Answer::Done(done) => {
                check_done(
                    done.packages,
                    trace.packages,
                    "result packages from a shard",
                )?;
                trace.done = start.elapsed();
                trace.evaluation = Duration::from_micros(done.evaluation_micros);
                return Ok(trace);
            }
            Answer::Package(frames) => frames,
        };
        let at = start.elapsed();
        trace.first.get_or_insert(at);
        trace.last = Some(at);
        trace.packages += 1;
        trace.bytes += package.iter().map(Frame::wire_len).sum::<u64>();
        packages
            .send(package)
            .await
            .map_err(|_| Error::task("forwarding a shard's answer", "the client left"))?;
    }
}

impl Service for ShardRouter {
    fn protocol(&self) -> ProtocolId {
        PROTOCOL_ID
    }

    fn handle<'a>(
        &'a self,
        frame: Frame,
        ch: &'a mut Channel,
        session: &'a mut Session,
    ) -> Handled<'a> {
        Box::pin(self.dispatch(frame, ch, session))
    }

    fn reload(&self) -> Result<Option<String>, Error> {
        Ok(self.current.reload_if_changed()?.map(|s| describe(&s)))
    }

    fn name(&self) -> &'static str {
        "the HE protocol (a sharded database's router)"
    }

    fn step(&self, kind: u8) -> &'static str {
        crate::he_psi::server::service::step(kind)
    }

    fn epoch(&self) -> u64 {
        self.current.snapshot().manifest.epoch
    }

    /// Ready when every shard answers a parameter request.
    fn ready(&self) -> Readiness<'_> {
        Box::pin(self.shards_answer())
    }

    fn oprf_cost(&self, frame: &Frame) -> u64 {
        crate::he_psi::server::service::oprf_cost(frame)
    }

    fn describe(&self) -> String {
        describe(&self.current.snapshot())
    }
}

fn describe(state: &RouterState) -> String {
    let m = &state.manifest;
    format!(
        "{} items in {} shards, epoch {}, labels up to {} bytes",
        m.items.iter().sum::<u64>(),
        m.shards(),
        m.epoch,
        m.max_label_bytes
    )
}
