//! The listening party's one address in a cluster job (`cluster.rs`).
//!
//! The relay runs in the listening party's driver for the whole job. It
//! accepts the peer's connections on the job's address (with TLS when the
//! job has it) and reads each one's [`ClusterOpen`]: the control
//! connection goes to the driver's sessions; bucket `b`'s connection, if
//! it carries the current control connection's token, is handed to the
//! next worker of this party that offered itself ([`Attach`] on the
//! relay's internal address, with the driver's ticket) and the two byte
//! streams are spliced. TLS ends at the relay: inside the party's cluster
//! the hop to the worker is plain TCP on the address the operator chose
//! (a private network), and it carries psikit's frames unchanged.
//!
//! Why a relay rather than an address per worker: the other organisation
//! opens one port in one firewall and needs no list of worker addresses
//! that changes as workers come and go; the cost is that the party's
//! bucket traffic passes through the driver's node (a few hundred bits
//! per item, a small part of what a 10 Gbit/s link carries).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use psikit_transport::net::{Incoming, Listener};
use psikit_transport::{Channel, Limits, TransportError};
use rand::RngCore;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use super::terms::{Attach, ClusterOpen, ClusterReady, JobDone, PROTOCOL_ID};
use crate::common::two_party::abort;
use crate::error::Error;

/// How long a new connection may take to say what it is.
const OPENING: Duration = Duration::from_secs(30);
/// Connections that have not yet said what they are, at most, on each of
/// the relay's addresses: a flood of idle connections waits for a slot
/// rather than taking a task and a descriptor each.
const OPENING_AT_ONCE: usize = 64;

/// What the relay's tasks share.
struct Shared {
    /// The current control connection's token: bucket connections must
    /// carry it (a late dial from an earlier control connection does not).
    token: Mutex<Option<[u8; 16]>>,
    /// Workers waiting for a bucket.
    idle: tokio::sync::Mutex<mpsc::UnboundedReceiver<Channel>>,
    offer: mpsc::UnboundedSender<Channel>,
    /// The driver's ticket: only its workers attach.
    ticket: [u8; 16],
    workers: u32,
    /// Set once the job is done: attaching workers are told to stop.
    done: AtomicBool,
}

/// A running relay; its tasks stop when it is dropped.
pub(super) struct Relay {
    shared: Arc<Shared>,
    control: tokio::sync::Mutex<mpsc::Receiver<Channel>>,
    internal: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Starts relaying `external` (the job's address) to the workers that
    /// attach on `internal` (plain TCP, e.g. `10.0.0.5:0` on the cluster's
    /// private network), announcing `workers` to the peer.
    pub(super) async fn start(
        external: Listener,
        internal: &str,
        workers: u32,
        limits: Limits,
    ) -> Result<Self, Error> {
        let inside = Listener::bind(internal, None, limits).await?;
        let internal = inside.local_addr()?;
        let mut ticket = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut ticket);
        let (offer, idle) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            token: Mutex::new(None),
            idle: tokio::sync::Mutex::new(idle),
            offer,
            ticket,
            workers: workers.max(1),
            done: AtomicBool::new(false),
        });
        let (to_driver, control) = mpsc::channel(4);
        let tasks = vec![
            tokio::spawn(accept_loop(
                external,
                shared.clone(),
                move |inc, sh, slot| {
                    let to_driver = to_driver.clone();
                    async move { route(inc, &sh, &to_driver, slot).await }
                },
            )),
            tokio::spawn(accept_loop(
                inside,
                shared.clone(),
                |inc, sh, slot| async move { attach(inc, &sh, slot).await },
            )),
        ];
        Ok(Self {
            shared,
            control: tokio::sync::Mutex::new(control),
            internal,
            tasks,
        })
    }

    /// Where this party's workers attach.
    pub(super) fn internal_addr(&self) -> SocketAddr {
        self.internal
    }

    /// The ticket this party's workers attach with.
    pub(super) fn ticket(&self) -> [u8; 16] {
        self.shared.ticket
    }

    /// The peer's next control connection, within `wait` if given.
    pub(super) async fn next_control(&self, wait: Option<Duration>) -> Result<Channel, Error> {
        let mut control = self.control.lock().await;
        let next = async {
            control
                .recv()
                .await
                .ok_or(Error::Internal("the relay stopped"))
        };
        match wait {
            Some(w) => tokio::time::timeout(w, next)
                .await
                .map_err(|_| TransportError::Timeout("waiting for the peer to connect"))?,
            None => next.await,
        }
    }

    /// The job is done: waiting workers, and any that attach later, are
    /// told to stop.
    pub(super) async fn finish(&self) {
        self.shared.done.store(true, Ordering::SeqCst);
        let mut idle = self.shared.idle.lock().await;
        while let Ok(mut worker) = idle.try_recv() {
            let _ = worker.send_msg(&JobDone).await;
            worker.close().await;
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Accepts connections on `listener` for good, each handled by `handle`
/// in a task of its own (a slow peer never holds up the next one), with
/// one of [`OPENING_AT_ONCE`] slots until it said what it is.
async fn accept_loop<F, Fut>(listener: Listener, shared: Arc<Shared>, handle: F)
where
    F: Fn(Incoming, Arc<Shared>, OwnedSemaphorePermit) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok(incoming) => {
                // A failed connection concerns only itself.
                tokio::spawn(handle(incoming, shared.clone(), slot));
            }
            // Out of descriptors, say: pause rather than spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One connection from the peer: control to the driver, a bucket to a
/// worker.
async fn route(
    incoming: Incoming,
    shared: &Shared,
    to_driver: &mpsc::Sender<Channel>,
    slot: OwnedSemaphorePermit,
) -> Result<(), Error> {
    let opening = async {
        let mut ch = incoming.handshake().await?;
        let open = ch.recv_msg::<ClusterOpen>(()).await?;
        Ok::<_, Error>((ch, open))
    };
    let (mut ch, open) = tokio::time::timeout(OPENING, opening)
        .await
        .map_err(|_| TransportError::Timeout("waiting for the connection's purpose"))??;
    drop(slot);
    let Some(_) = open.bucket else {
        *lock(&shared.token)? = Some(open.token);
        ch.send_msg(&ClusterReady {
            workers: shared.workers,
        })
        .await?;
        return to_driver
            .send(ch)
            .await
            .map_err(|_| Error::Internal("the driver stopped taking connections"));
    };
    let current = *lock(&shared.token)?;
    if !current.is_some_and(|t| bool::from(t.ct_eq(&open.token))) {
        let why = "a bucket connection from another control connection than the current one";
        let e = abort(&mut ch, PROTOCOL_ID, why).await;
        ch.close().await;
        return Err(e);
    }
    // The next worker that takes the bucket (one that died while waiting
    // fails the send, or the splice, and the peer retries the bucket).
    let worker = loop {
        let next = shared.idle.lock().await.recv().await;
        let mut worker = next.ok_or(Error::Internal("the relay's workers"))?;
        if worker.send_msg(&open).await.is_ok() {
            break worker;
        }
    };
    let (mut outside, mut inside) = (ch.into_stream(), worker.into_stream());
    // Every byte of the party's buckets passes here: buffers of this size
    // take a read and a write per 256 KiB instead of per 8 KiB (tokio's
    // default), a fraction of the relay's CPU.
    tokio::io::copy_bidirectional_with_sizes(&mut outside, &mut inside, SPLICE_BUF, SPLICE_BUF)
        .await
        .map_err(TransportError::from)?;
    Ok(())
}

/// The relay's buffer each way of a spliced connection.
const SPLICE_BUF: usize = 256 << 10;

/// A worker of this party offering itself for the next bucket.
async fn attach(
    incoming: Incoming,
    shared: &Shared,
    slot: OwnedSemaphorePermit,
) -> Result<(), Error> {
    let opening = async {
        let mut ch = incoming.handshake().await?;
        let attach = ch.recv_msg::<Attach>(()).await?;
        Ok::<_, Error>((ch, attach))
    };
    let (mut ch, Attach { ticket }) = tokio::time::timeout(OPENING, opening)
        .await
        .map_err(|_| TransportError::Timeout("waiting for a worker's ticket"))??;
    drop(slot);
    if !bool::from(ticket.ct_eq(&shared.ticket)) {
        let e = abort(&mut ch, PROTOCOL_ID, "not this job's worker ticket").await;
        ch.close().await;
        return Err(e);
    }
    if shared.done.load(Ordering::SeqCst) {
        ch.send_msg(&JobDone).await?;
        ch.close().await;
        return Ok(());
    }
    shared
        .offer
        .send(ch)
        .map_err(|_| Error::Internal("the relay's worker queue"))
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, Error> {
    m.lock()
        .map_err(|_| Error::Internal("the relay's state was poisoned"))
}
