//! One shard's query timed stage by stage: the narrow entry `psikit bench
//! scale` builds its cost model on, so the benchmark needs no core of the
//! protocol (client receiver, sender, messages) and front ends keep to the
//! facade and the public types.
//!
//! A [`ShardProbe`] holds a client's fresh keys for a shard's database and
//! queries it with given OPRF outputs (the benchmark draws them at random
//! in place of a router's OPRF): [`ShardProbe::run_cores`] runs the query
//! through the sans-IO cores alone (the client's encryption, the shard's
//! evaluation on the calling thread pool, the client's decryption), with
//! every message framed as on the wire so byte counts are exact;
//! [`ShardProbe::run_served`] sends the same query to a shard served at an
//! address, exactly as the router asks a shard, and times it to the done
//! message. Both give back what the query found, for the caller to check.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use psikit_primitives::oprf::Output;
use psikit_transport::{Frame, Message};
use rand::rngs::OsRng;
use tokio::sync::mpsc;

use crate::common::connect::ServerAddr;
use crate::common::Match;
use crate::error::Error;
use crate::he_psi::client::receiver::{QueryState, Receiver};
use crate::he_psi::common::answer::{decode_package, package_frames};
use crate::he_psi::common::messages::{QueryCt, QueryDone, QueryHeader, ShardQuery};
use crate::he_psi::server::state::HeState;
use crate::he_psi::shard::router::ask_shard;

/// A client's keys for one shard's database, ready to query it.
pub struct ShardProbe {
    state: Arc<HeState>,
    receiver: Receiver,
    header: QueryHeader,
    epoch: u64,
}

/// What one query found.
pub struct Found {
    /// The client's items found (by index into the queried outputs), with
    /// their labels.
    pub matches: Vec<Match>,
    /// Indices of the items that did not fit the client's cuckoo table, so
    /// were not queried (a real client queries them in another round).
    pub leftovers: Vec<usize>,
}

/// One query through the sans-IO cores.
pub struct CoreRun {
    /// The client's cuckoo hashing and encryption of the query.
    pub encrypt: Duration,
    /// The shard's work: decoding the query, evaluating every bin bundle
    /// and framing the packages.
    pub eval: Duration,
    /// The client's decoding and decryption of every package.
    pub decrypt: Duration,
    /// Result packages (one per bin bundle).
    pub packages: usize,
    /// Bytes of the query as a shard reads it (the router's epoch message,
    /// the header, the ciphertexts), framed.
    pub up_bytes: u64,
    /// Bytes of the answer (the packages and the done message), framed.
    pub down_bytes: u64,
    pub found: Found,
}

/// One query of a served shard.
pub struct ServedRun {
    /// From sending the query to the shard's done message.
    pub time: Duration,
    pub found: Found,
}

impl ShardProbe {
    /// Fresh client keys for the database of `state`, which must be a
    /// shard's (the query carries its epoch, as the router's does).
    pub fn new(state: Arc<HeState>) -> Result<Self, Error> {
        let epoch = state
            .shard()
            .ok_or(Error::Misuse("a shard probe needs a shard's state"))?
            .epoch;
        let receiver = Receiver::new(state.params().clone(), state.max_label_bytes())?;
        let header = QueryHeader {
            db_id: state.db_id(),
            relin_key: receiver.relin_key().to_bytes()?,
        };
        Ok(Self {
            state,
            receiver,
            header,
            epoch,
        })
    }

    /// Queries `client` through the cores (see the module docs).
    pub fn run_cores(&self, client: &[Output]) -> Result<CoreRun, Error> {
        let t = Instant::now();
        let (query_state, query) = self.query(client)?;
        let encrypt = t.elapsed();
        let up_bytes = query.iter().map(Frame::wire_len).sum();
        let t = Instant::now();
        let sender = self.state.sender();
        // Decoded under the shard's parameters, as its server does; the
        // ciphertexts follow the epoch message and the header.
        let he = sender.he();
        let mut cts = Vec::new();
        for index in query[2..].chunks(sender.sources()) {
            let decode = |f: &Frame| -> Result<_, Error> {
                Ok(QueryCt::decode(&f.payload, he)?.ciphertext(he)?)
            };
            cts.push(index.iter().map(decode).collect::<Result<Vec<_>, _>>()?);
        }
        let ev = sender.evaluator(&self.header.relin_key)?;
        let frames = Mutex::new(Vec::new());
        let packages = sender.answer(&ev, cts, |package| {
            let f = package_frames(&package)?;
            frames
                .lock()
                .map_err(|_| Error::Internal("a poisoned lock"))?
                .push(f);
            Ok(())
        })?;
        let eval = t.elapsed();
        let frames = frames
            .into_inner()
            .map_err(|_| Error::Internal("a poisoned lock"))?;
        let down_bytes = frames.iter().flatten().map(Frame::wire_len).sum::<u64>()
            + QueryDone {
                packages: 0,
                evaluation_micros: 0,
            }
            .to_frame()
            .wire_len();
        let t = Instant::now();
        let found = self.read(query_state, &frames)?;
        Ok(CoreRun {
            encrypt,
            eval,
            decrypt: t.elapsed(),
            packages,
            up_bytes,
            down_bytes,
            found,
        })
    }

    /// Queries `client` from the shard served at `shard`, as the router
    /// asks it (see the module docs).
    pub async fn run_served(
        &self,
        shard: &ServerAddr,
        client: &[Output],
    ) -> Result<ServedRun, Error> {
        let (query_state, query) = self.query(client)?;
        let polys = self.receiver.shape().polys();
        let (tx, mut rx) = mpsc::channel(8);
        // The sender moves into the ask, so the gathering ends with it.
        let ask = async move {
            let t = Instant::now();
            let asked = ask_shard(shard, &query, polys, &tx, t).await;
            (asked, t.elapsed())
        };
        let gather = async {
            let mut packages = Vec::new();
            while let Some(package) = rx.recv().await {
                packages.push(package);
            }
            packages
        };
        let ((asked, time), packages) = tokio::join!(ask, gather);
        asked?;
        let found = self.read(query_state, &packages)?;
        Ok(ServedRun { time, found })
    }

    /// A fresh query of `client` and its frames as a shard reads them (the
    /// router's epoch message, the header, the ciphertexts).
    fn query(&self, client: &[Output]) -> Result<(QueryState, Vec<Frame>), Error> {
        let (query_state, encrypted) = self.receiver.query(client, &mut OsRng)?;
        let mut frames = vec![
            ShardQuery { epoch: self.epoch }.to_frame(),
            self.header.to_frame(),
        ];
        for ct in encrypted.iter().flatten() {
            frames.push(QueryCt::encode(ct)?.to_frame());
        }
        Ok((query_state, frames))
    }

    /// Decodes and reads a shard's packages (each its frames).
    fn read(&self, mut query_state: QueryState, packages: &[Vec<Frame>]) -> Result<Found, Error> {
        let received = (packages.iter())
            .map(|frames| decode_package(frames, self.receiver.he()))
            .collect::<Result<Vec<_>, _>>()?;
        self.receiver.process(&mut query_state, &received)?;
        let leftovers = std::mem::take(&mut query_state.leftovers);
        Ok(Found {
            matches: Receiver::matches(query_state),
            leftovers,
        })
    }
}
