//! How a job meets its peer again and again: the listener stays bound for
//! the whole job, the connecting side dials with backoff, and which
//! errors are the link's (retried) rather than a party's.

use std::time::{Duration, Instant};

use psikit_transport::net::{self, Listener};
use psikit_transport::{Channel, Limits};

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

/// Whether an error is the link's (retry after reconnecting) rather than
/// the peer's or this side's.
pub(super) fn is_link_failure(e: &Error) -> bool {
    match e {
        Error::Transport(t) => t.is_link_failure(),
        Error::Ot(psikit_ot::OtError::Transport(t)) => t.is_link_failure(),
        _ => false,
    }
}
