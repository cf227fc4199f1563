//! The router of a sharded HE database ([`super::shard`]): to clients it
//! is an HE server. It holds the OPRF key and the manifest, answers the
//! parameter request (bundle counts summed over the shards) and the OPRF
//! itself, and sends every query to every shard over psikit's own frames,
//! forwarding their result packages as they arrive and ending with one
//! done message counting them all. If any shard fails, the query ends with
//! a retryable error instead of the done message, so the client, which
//! only returns once it has counted every package, never takes a partial
//! answer. Shards never see the key; the router never sees a database.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use psikit_transport::{Channel, Frame, Message, ProtocolId};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::messages::{
    OprfRequest, ParamsRequest, ParamsResponse, QueryCt, QueryDone, QueryHeader, ResultCt,
    ShardQuery, PROTOCOL_ID,
};
use super::params::PsiParams;
use super::service::{oprf_response, query_header};
use super::shard::Manifest;
use super::state::HeState;
use crate::common::connect::ServerAddr;
use crate::service::{Handled, LiveState, ServerLimits, Service, Session};
use crate::{Error, Violation};

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
        if super::facade::hex(&state.db_id()) != manifest.db_id {
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

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

/// Serves a sharded database's clients (see the [module docs](self)).
pub struct ShardRouter {
    current: LiveState<RouterState>,
    shards: Vec<ServerAddr>,
    limits: ServerLimits,
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
        })
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
            QueryHeader::KIND => self.fan_out(&snap, frame, ch).await,
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
    ) -> Result<(), Error> {
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
        let query = Arc::new(query);
        let (tx, mut rx) = mpsc::channel::<Vec<Frame>>(8);
        // Dropped with this call (a client gone): the shard tasks end too.
        let mut asks = JoinSet::new();
        for (index, addr) in self.shards.iter().enumerate() {
            let (addr, query, tx) = (addr.clone(), query.clone(), tx.clone());
            let polys = shape.polys();
            asks.spawn(async move { (index, ask_shard(&addr, &query, polys, &tx).await) });
        }
        drop(tx);
        while let Some(package) = rx.recv().await {
            for frame in &package {
                ch.send(frame).await?;
            }
        }
        let mut packages = 0u32;
        while let Some(joined) = asks.join_next().await {
            let (index, answered) = joined.map_err(|e| Error::task("a shard's query", e))?;
            let count = answered.map_err(|e| Error::ShardUnavailable {
                shard: index as u32,
                reason: e.to_string(),
            })?;
            packages = packages.saturating_add(count);
        }
        Ok(ch.send_msg(&QueryDone { packages }).await?)
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
    }
}

/// Sends the query to the shard at `addr` and passes each of its result
/// packages (`polys` frames) to `packages`; returns how many it sent,
/// checked against the shard's done message.
async fn ask_shard(
    addr: &ServerAddr,
    query: &[Frame],
    polys: usize,
    packages: &mpsc::Sender<Vec<Frame>>,
) -> Result<u32, Error> {
    let mut ch = addr.connect().await?;
    for frame in query {
        ch.send(frame).await?;
    }
    let mut sent = 0u32;
    loop {
        let first = ch.recv().await?;
        if first.protocol == QueryDone::PROTOCOL && first.kind == QueryDone::KIND {
            let done = QueryDone::decode(&first.payload, ())?.packages;
            if done != sent {
                return Err(Violation::Count {
                    what: "result packages from a shard",
                    got: u64::from(sent),
                    expected: u64::from(done),
                }
                .into());
            }
            return Ok(sent);
        }
        if first.protocol != ResultCt::PROTOCOL || first.kind != ResultCt::KIND {
            return Err(Violation::Unexpected("a shard's answer").into());
        }
        let mut package = Vec::with_capacity(polys);
        package.push(first);
        for _ in 1..polys {
            package.push(ch.recv_expect(ResultCt::PROTOCOL, ResultCt::KIND).await?);
        }
        packages
            .send(package)
            .await
            .map_err(|_| Error::task("forwarding a shard's answer", "the client left"))?;
        sent += 1;
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

    fn oprf_cost(&self, frame: &Frame) -> u64 {
        super::service::oprf_cost(frame)
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
