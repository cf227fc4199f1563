//! How a job meets its peer again and again: the listener stays bound for
//! the whole job, the connecting side dials with backoff, and which
//! errors are the link's (retried) rather than a party's.

use std::time::{Duration, Instant};

use psikit_transport::net::{self, Listener};
use psikit_transport::{Channel, Limits, TransportError};
use rand::RngCore;

use super::terms::Lane;
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
            Link::Listen {
                listener,
                accept_timeout,
            } => accept_within(listener, wait.or(*accept_timeout)).await,
            Link::Connect(server) => {
                let deadline = wait.map(|w| Instant::now() + w);
                let mut pause = Duration::from_millis(200);
                loop {
                    let tried =
                        net::connect(&server.addr, server.tls.as_ref(), server.limits).await;
                    match tried {
                        Ok(ch) => return Ok(ch),
                        Err(e)
                            if e.is_link_failure()
                                && deadline.is_some_and(|d| Instant::now() + pause < d) =>
                        {
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_secs(5));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
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
                            Some(s @ None) if lane.token == token => *s = Some(ch),
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
