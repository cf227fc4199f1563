//! A protocol party written as async steps over a [`Channel`], run as a
//! sans-IO state machine: the caller pushes the peer's bytes in, takes this
//! party's bytes out and carries them however it likes (its own transport,
//! a message queue, a Python callback, a worker of a distributed engine).
//!
//! No sockets, no runtime, no threads of its own: the party runs inside
//! [`Stepper::advance`] until it waits for bytes it has not been given.
//! This is how psikit's two-party protocols (whose rounds interleave with
//! the OT layer's) get the same sans-IO core as the request/response ones
//! without a second, hand-written state machine per role: the async code is
//! the state machine, and this type drives it.
//!
//! The party may await only its channel (no timers, no spawned tasks):
//! psikit's protocol cores do exactly that.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::channel::{Channel, Limits};

/// One party of a protocol, stepped by hand. See the [module docs](self).
pub struct Stepper<T> {
    run: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
    pipe: Pipe,
}

impl<T> Stepper<T> {
    /// Prepares the party `run` over a channel with `limits` (its frame
    /// size limit applies; its timeouts do not: waiting is the caller's
    /// business). Nothing runs before the first [`Stepper::advance`].
    pub fn new<F>(limits: Limits, run: impl FnOnce(Channel) -> F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        let pipe = Pipe::default();
        let channel = Channel::unclocked(pipe.clone(), limits);
        Self {
            run: Some(Box::pin(run(channel))),
            pipe,
        }
    }

    /// Bytes the peer sent, in order (any split: frames delimit themselves).
    pub fn push(&mut self, bytes: &[u8]) {
        self.pipe.buffers().incoming.extend(bytes);
    }

    /// The peer hung up: once the bytes pushed so far are read, the party
    /// sees the connection closed.
    pub fn peer_closed(&mut self) {
        self.pipe.buffers().peer_closed = true;
    }

    /// The bytes this party has written since the last call, to be
    /// delivered to the peer in order.
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pipe.buffers().outgoing)
    }

    /// Runs the party until it finishes (`Ready` with its result) or needs
    /// bytes not yet pushed (`Pending`: deliver [`Stepper::take_outgoing`],
    /// push the answer, call again).
    ///
    /// # Panics
    /// If called again after it returned `Ready`.
    pub fn advance(&mut self) -> Poll<T> {
        let run = self
            .run
            .as_mut()
            .expect("Stepper::advance called after the party finished");
        let result = run.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        if result.is_ready() {
            self.run = None;
        }
        result
    }

    /// Whether the party has finished.
    pub fn is_finished(&self) -> bool {
        self.run.is_none()
    }

    /// The same party, its result passed through `f` when it finishes.
    pub fn map<U>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Stepper<U>
    where
        T: 'static,
    {
        Stepper {
            run: self.run.map(|run| {
                Box::pin(async move { f(run.await) }) as Pin<Box<dyn Future<Output = U> + Send>>
            }),
            pipe: self.pipe,
        }
    }
}

/// The byte pipe between a [`Stepper`] and its party's channel. Reads with
/// nothing buffered are `Pending` without keeping the waker: the stepper
/// polls again after every push, so no wake-up is needed.
#[derive(Clone, Default)]
struct Pipe(Arc<Mutex<Buffers>>);

#[derive(Default)]
struct Buffers {
    incoming: VecDeque<u8>,
    outgoing: Vec<u8>,
    peer_closed: bool,
}

impl Pipe {
    fn buffers(&self) -> MutexGuard<'_, Buffers> {
        // A panic elsewhere cannot leave the byte queues inconsistent.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut b = self.buffers();
        if b.incoming.is_empty() {
            // Nothing filled signals end of stream.
            return match b.peer_closed {
                true => Poll::Ready(Ok(())),
                false => Poll::Pending,
            };
        }
        let (front, _) = b.incoming.as_slices();
        let n = front.len().min(buf.remaining());
        buf.put_slice(&front[..n]);
        b.incoming.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.buffers().outgoing.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TransportError;
    use crate::frame::Frame;

    /// Echoes `rounds` frames back, each with its kind incremented.
    async fn echo(mut ch: Channel, rounds: u8) -> Result<u8, TransportError> {
        for _ in 0..rounds {
            let f = ch.recv().await?;
            ch.send(&Frame::new(f.protocol, f.kind + 1, f.payload))
                .await?;
        }
        Ok(rounds)
    }

    /// Sends a frame, reads the answer, `rounds` times; returns the kinds.
    async fn ask(mut ch: Channel, rounds: u8) -> Result<Vec<u8>, TransportError> {
        let mut kinds = Vec::new();
        for k in 0..rounds {
            ch.send(&Frame::new(9, 2 * k, vec![k; 1000])).await?;
            let f = ch.recv().await?;
            assert_eq!(f.payload, vec![k; 1000]);
            kinds.push(f.kind);
        }
        Ok(kinds)
    }

    #[test]
    fn two_stepped_parties_talk_without_a_runtime() {
        let mut a = Stepper::new(Limits::default(), |ch| ask(ch, 5));
        let mut b = Stepper::new(Limits::default(), |ch| echo(ch, 5));
        let (mut out_a, mut out_b) = (None, None);
        for _ in 0..100 {
            if out_a.is_none() {
                if let Poll::Ready(r) = a.advance() {
                    out_a = Some(r);
                }
            }
            // Delivered a byte at a time: framing must not depend on splits.
            for byte in a.take_outgoing() {
                b.push(&[byte]);
            }
            if out_b.is_none() {
                if let Poll::Ready(r) = b.advance() {
                    out_b = Some(r);
                }
            }
            a.push(&b.take_outgoing());
        }
        assert_eq!(
            out_a.expect("a finished").expect("a ok"),
            vec![1, 3, 5, 7, 9]
        );
        assert_eq!(out_b.expect("b finished").expect("b ok"), 5);
        assert!(a.is_finished() && b.is_finished());
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_hang() {
        let mut b = Stepper::new(Limits::default(), |ch| echo(ch, 1));
        assert!(b.advance().is_pending());
        b.push(&[0, 0, 0]);
        b.peer_closed();
        match b.advance() {
            Poll::Ready(Err(TransportError::Io(_) | TransportError::Closed)) => {}
            other => panic!(
                "expected a closed connection, got {:?}",
                other.map(|r| r.is_ok())
            ),
        }
    }
}
