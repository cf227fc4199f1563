//! How a job meets its peer again and again: the listener stays bound for
//! the whole job, the connecting side dials with backoff, and which
//! errors are the link's (retried) rather than a party's.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use psikit_transport::net::{self, Listener};
use psikit_transport::{Channel, Limits, TransportError};
use rand::RngCore;
use subtle::ConstantTimeEq;

use super::relay::Relay;
use super::terms::{ClusterOpen, ClusterReady, Lane};
use crate::common::connect::{accept_within, Peer, ServerAddr};
use crate::error::Error;

/// How this side meets its peer, again after a dropped link: a listener
/// stays bound for the whole job.
pub(super) enum Link {
    Listen {
        listener: Listener,
        accept_timeout: Option<Duration>,
    },
    Connect(ServerAddr),
    /// A cluster job's listening driver: control connections come through
    /// its relay (`relay.rs`).
    Relay(Relay),
    /// A cluster job's connecting driver: each control connection opens
    /// with a fresh token, which its bucket connections then carry.
    Cluster {
        server: ServerAddr,
        token: Mutex<Option<[u8; 16]>>,
        /// The peer's workers, as its last control connection stated.
        peer_workers: AtomicU32,
    },
}

impl Link {
    pub(super) async fn new(
        peer: &Peer,
        idle: Duration,
        listening: impl FnOnce(&str),
    ) -> Result<Self, Error> {
        // A job's only timeouts count from the last byte each way: no
        // bound on the job or on one bucket.
        let with_idle = |limits: Limits| Limits {
            read_timeout: idle,
            write_timeout: idle,
            ..limits
        };
        Ok(match peer {
            Peer::Listen {
                addr,
                tls,
                limits,
                accept_timeout,
            } => {
                let listener = Listener::bind(addr, tls.as_ref(), with_idle(*limits)).await?;
                listening(&listener.local_addr()?.to_string());
                Link::Listen {
                    listener,
                    accept_timeout: *accept_timeout,
                }
            }
            Peer::Connect(server) => Link::Connect(ServerAddr {
                limits: with_idle(server.limits),
                ..server.clone()
            }),
        })
    }

    /// The next connection: accepted within `wait` (the first one within
    /// the accept timeout), or dialled until `wait` runs out.
    pub(super) async fn open(&self, wait: Option<Duration>) -> Result<Channel, Error> {
        match self {
            Link::Relay(relay) => relay.next_control(wait.or(Some(NO_WAIT_LIMIT))).await,
            Link::Cluster {
                server,
                token,
                peer_workers,
            } => {
                let mut ch = dial(server, wait).await?;
                let mut fresh = [0u8; 16];
                rand::rngs::OsRng.fill_bytes(&mut fresh);
                let open = ClusterOpen {
                    token: fresh,
                    bucket: None,
                };
                ch.send_msg(&open).await?;
                let ready = ch.recv_msg::<ClusterReady>(()).await?;
                peer_workers.store(ready.workers, Ordering::SeqCst);
                *token
                    .lock()
                    .map_err(|_| Error::Internal("a cluster link's token"))? = Some(fresh);
                Ok(ch)
            }
            Link::Listen {
                listener,
                accept_timeout,
            } => accept_within(listener, wait.or(*accept_timeout)).await,
            Link::Connect(server) => dial(server, wait).await,
        }
    }
}

/// How long a cluster job's listening driver waits for the next control
/// connection when no retry is running: the connecting party's buckets
/// run meanwhile, for as long as they take.
const NO_WAIT_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Dials `server` until `wait` runs out, with backoff.
pub(super) async fn dial(server: &ServerAddr, wait: Option<Duration>) -> Result<Channel, Error> {
    let deadline = wait.map(|w| Instant::now() + w);
    let mut pause = Duration::from_millis(200);
    loop {
        let tried = net::connect(&server.addr, server.tls.as_ref(), server.limits).await;
        match tried {
            Ok(ch) => return Ok(ch),
            Err(e)
                if e.is_link_failure() && deadline.is_some_and(|d| Instant::now() + pause < d) =>
            {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl Link {
    /// The connection's other `lanes - 1` lanes, in lane order, within
    /// `wait`: the connecting side draws a token, states it on `first`
    /// (lane 0) and dials each lane with it; the listening side accepts
    /// until it holds every lane, dropping connections that open with
    /// another token or lane (a late dial from an earlier connection).
    pub(super) async fn open_lanes(
        &self,
        first: &mut Channel,
        lanes: u8,
        wait: Duration,
    ) -> Result<Vec<Channel>, Error> {
        if lanes <= 1 {
            return Ok(Vec::new());
        }
        match self {
            Link::Relay(_) | Link::Cluster { .. } => Err(Error::Internal("lanes of a cluster job")),
            Link::Connect(_) => {
                let mut token = [0u8; 16];
                rand::rngs::OsRng.fill_bytes(&mut token);
                first.send_msg(&Lane { token, lane: 0 }).await?;
                let mut opened = Vec::with_capacity(usize::from(lanes - 1));
                for lane in 1..lanes {
                    let mut ch = self.open(Some(wait)).await?;
                    ch.send_msg(&Lane { token, lane }).await?;
                    opened.push(ch);
                }
                Ok(opened)
            }
            Link::Listen { listener, .. } => {
                let Lane { token, .. } = first.recv_msg::<Lane>(1).await?;
                let deadline = Instant::now() + wait;
                let mut slots: Vec<Option<Channel>> = (1..lanes).map(|_| None).collect();
                while slots.iter().any(Option::is_none) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(TransportError::Timeout("waiting for the peer's lanes").into());
                    }
                    let Ok(mut ch) = accept_within(listener, Some(left)).await else {
                        // A failed handshake or a refused accept: pause, so
                        // a failing listener does not spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let opened = tokio::time::timeout(left, ch.recv_msg::<Lane>(lanes)).await;
                    if let Ok(Ok(lane)) = opened {
                        let slot = usize::from(lane.lane).wrapping_sub(1);
                        match slots.get_mut(slot) {
                            Some(s @ None) if bool::from(lane.token.ct_eq(&token)) => *s = Some(ch),
                            _ => {}
                        }
                    }
                }
                Ok(slots.into_iter().flatten().collect())
            }
        }
    }
}

/// Whether an error is the link's (retry after reconnecting) rather than
/// the peer's or this side's.
pub(super) fn is_link_failure(e: &Error) -> bool {
    match e {
        Error::Transport(t) => t.is_link_failure(),
        Error::Ot(psikit_ot::OtError::Transport(t)) => t.is_link_failure(),
        _ => false,
    }
}
