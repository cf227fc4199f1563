//! A framed, byte-counting, time-limited message channel over any async
//! byte stream (TCP, TLS, or an in-memory pipe for tests).

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::codec::Message;
use crate::error::TransportError;
use crate::frame::{header, ErrorMessage, Frame, HEADER_LEN, WIRE_VERSION};

/// Limits applied to everything a channel receives.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest frame accepted (header included). Larger transfers use
    /// [`Channel::send_chunked`], which splits them into frames below this.
    pub max_frame_bytes: u32,
    /// How long to wait for the next frame before giving up.
    pub read_timeout: Duration,
    /// How long a single frame may take to write.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 16 << 20,
            read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
        }
    }
}

/// Payload size of each chunk of a chunked transfer.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Most bytes [`Channel::close`] reads and discards from the peer.
pub const DRAIN_BYTES: usize = 4 << 20;
/// Longest [`Channel::close`] waits for the peer to finish sending.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// Any bidirectional async byte stream.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A message channel: sends and receives [`Frame`]s, enforces [`Limits`],
/// and counts the bytes each way (for benchmarks and user reports).
pub struct Channel {
    io: Box<dyn Stream>,
    limits: Limits,
    /// Whether waits are bounded by the limits' timeouts (tokio timers).
    /// Off for a channel stepped by hand ([`crate::step::Stepper`]): it
    /// runs without a runtime, and waiting is its caller's business.
    clocked: bool,
    bytes_sent: u64,
    bytes_received: u64,
}

impl Channel {
    pub fn new(io: impl Stream + 'static, limits: Limits) -> Self {
        Self {
            io: Box::new(io),
            limits,
            clocked: true,
            bytes_sent: 0,
            bytes_received: 0,
        }
    }

    /// A channel without timers (it needs no runtime): reads wait until
    /// bytes arrive, however long. For [`crate::step::Stepper`].
    pub fn unclocked(io: impl Stream + 'static, limits: Limits) -> Self {
        Self {
            clocked: false,
            ..Self::new(io, limits)
        }
    }

    /// Two connected channels in memory, for tests and single-process demos.
    pub fn memory_pair(limits: Limits) -> (Self, Self) {
        let (a, b) = tokio::io::duplex(1 << 20);
        (Self::new(a, limits), Self::new(b, limits))
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits from the next frame on (a connection that waits
    /// long for its first message, then runs a protocol).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    pub fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// Sends one frame and flushes it.
    pub async fn send(&mut self, frame: &Frame) -> Result<(), TransportError> {
        self.send_payload(frame.protocol, frame.kind, &frame.payload)
            .await
    }

    /// Sends one frame made of `payload` without copying it into a
    /// [`Frame`] first, and flushes it. If the connection broke, the error
    /// is the reason the peer gave before it hung up, when it gave one (a
    /// server refusing a request or a connection says why, then closes).
    pub async fn send_payload(
        &mut self,
        protocol: u8,
        kind: u8,
        payload: &[u8],
    ) -> Result<(), TransportError> {
        let head = header(protocol, kind, payload.len());
        let write = async {
            self.io.write_all(&head).await?;
            self.io.write_all(payload).await?;
            self.io.flush().await
        };
        let (clocked, limit) = (self.clocked, self.limits.write_timeout);
        let written = within(clocked, limit, write)
            .await
            .ok_or(TransportError::Timeout("sending a message"))?;
        if let Err(e) = written {
            return Err(self.explain(e.into()).await);
        }
        self.bytes_sent += (head.len() + payload.len()) as u64;
        Ok(())
    }

    /// Sends an error frame to the peer; failures to deliver it are ignored
    /// because the connection is being abandoned anyway.
    pub async fn send_error(&mut self, protocol: u8, err: &ErrorMessage) {
        let _ = self.send(&err.to_frame(protocol)).await;
    }

    /// The byte stream under the channel, to splice it with another (a
    /// relay). Nothing is lost: a channel reads exactly the frames it
    /// returns, never ahead into a buffer of its own.
    pub fn into_stream(self) -> Box<dyn Stream> {
        self.io
    }

    /// Ends the connection so the peer reads everything sent so far: closes
    /// this side's writes, then reads and discards what the peer still
    /// sends (at most [`DRAIN_BYTES`], for at most [`DRAIN_TIME`]). Closing
    /// a socket with unread input would make the kernel reset the
    /// connection and the peer could lose our last frame (an error, a
    /// "server busy").
    pub async fn close(mut self) {
        let clocked = self.clocked;
        let drain = async {
            if self.io.shutdown().await.is_err() {
                return;
            }
            let mut buf = vec![0u8; 64 << 10];
            let mut left = DRAIN_BYTES;
            while left > 0 {
                match self.io.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        };
        let _ = within(clocked, DRAIN_TIME, drain).await;
    }

    /// Receives one frame. Returns `Ok(None)` if the peer closed the
    /// connection cleanly between frames.
    pub async fn recv_or_eof(&mut self) -> Result<Option<Frame>, TransportError> {
        let (clocked, limit) = (self.clocked, self.limits.read_timeout);
        within(clocked, limit, self.read_frame())
            .await
            .ok_or(TransportError::Timeout("waiting for a message"))?
    }

    /// Receives one frame; a closed connection is an error. A peer's error
    /// frame is turned into [`TransportError::Peer`].
    pub async fn recv(&mut self) -> Result<Frame, TransportError> {
        let frame = self.recv_or_eof().await?.ok_or(TransportError::Closed)?;
        if frame.is_error() {
            let msg = ErrorMessage::decode(&frame.payload)?;
            return Err(TransportError::Peer(msg));
        }
        Ok(frame)
    }

    async fn read_frame(&mut self) -> Result<Option<Frame>, TransportError> {
        let mut len_buf = [0u8; 4];
        match self.io.read_exact(&mut len_buf).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let len = u32::from_be_bytes(len_buf);
        let max = self.limits.max_frame_bytes;
        if u64::from(len) + 4 > u64::from(max) {
            return Err(TransportError::FrameTooLarge {
                len: u64::from(len) + 4,
                max,
            });
        }
        if len < 3 {
            return Err(TransportError::Malformed("frame shorter than its header"));
        }
        let mut header = [0u8; 3];
        self.io
            .read_exact(&mut header)
            .await
            .map_err(eof_is_truncation)?;
        let [version, protocol, kind] = header;
        if version != WIRE_VERSION {
            return Err(TransportError::Version {
                got: version,
                want: WIRE_VERSION,
            });
        }
        debug_assert_eq!(HEADER_LEN, 7);
        // The payload is read into spare capacity (bounded by the frame
        // limit checked above): zero-filling it first cost a page-clearing
        // pass per frame, visible in profiles of the OT extension's 1 MiB
        // frames.
        // `read_buf` fills only the spare capacity, so it never reads past
        // this frame nor reallocates.
        let n = len as usize - 3;
        let mut payload = Vec::with_capacity(n);
        while payload.len() < n {
            if self.io.read_buf(&mut payload).await? == 0 {
                return Err(eof_is_truncation(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
        self.bytes_received += u64::from(len) + 4;
        Ok(Some(Frame::new(protocol, kind, payload)))
    }

    /// Sends a large byte string as a run of frames of `kind`, each carrying
    /// at most [`CHUNK_BYTES`]; the receiver learns the total first.
    pub async fn send_chunked(
        &mut self,
        protocol: u8,
        kind: u8,
        data: &[u8],
    ) -> Result<(), TransportError> {
        let total = (data.len() as u64).to_be_bytes();
        self.send_payload(protocol, kind, &total).await?;
        for chunk in data.chunks(CHUNK_BYTES) {
            self.send_payload(protocol, kind, chunk).await?;
        }
        Ok(())
    }

    /// Receives what [`Channel::send_chunked`] sent, refusing totals above
    /// `max_total`. Memory grows with bytes actually received, never with
    /// the size the peer announced.
    pub async fn recv_chunked(
        &mut self,
        protocol: u8,
        kind: u8,
        max_total: u64,
    ) -> Result<Vec<u8>, TransportError> {
        self.recv_chunked_reporting(protocol, kind, max_total, &mut |_, _| {})
            .await
    }

    /// [`Channel::recv_chunked`], calling `report(received, total)` once
    /// the total is known and after each chunk (a download's progress).
    pub async fn recv_chunked_reporting(
        &mut self,
        protocol: u8,
        kind: u8,
        max_total: u64,
        report: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Vec<u8>, TransportError> {
        let head = self.recv_expect(protocol, kind).await?;
        let total: [u8; 8] = head
            .payload
            .as_slice()
            .try_into()
            .map_err(|_| TransportError::Malformed("chunked transfer header"))?;
        let total = u64::from_be_bytes(total);
        if total > max_total {
            return Err(TransportError::TransferTooLarge {
                len: total,
                max: max_total,
            });
        }
        let mut data = Vec::with_capacity(total.min(CHUNK_BYTES as u64) as usize);
        report(0, total);
        while (data.len() as u64) < total {
            let chunk = self.recv_expect(protocol, kind).await?;
            let left = total - data.len() as u64;
            if chunk.payload.is_empty() || chunk.payload.len() as u64 > left.min(CHUNK_BYTES as u64)
            {
                return Err(TransportError::Malformed("chunk size"));
            }
            data.extend_from_slice(&chunk.payload);
            report(data.len() as u64, total);
        }
        Ok(data)
    }

    /// Replaces a broken-connection error with the reason the peer gave, if
    /// it sent an error frame before hanging up (e.g. it aborted while we
    /// were still writing). Other errors are returned unchanged.
    pub async fn explain(&mut self, err: TransportError) -> TransportError {
        if !matches!(err, TransportError::Io(_) | TransportError::Closed) {
            return err;
        }
        // A clocked channel waits briefly for the peer's last frame; an
        // unclocked one takes only what has already arrived.
        let pending = match self.clocked {
            true => within(true, Duration::from_millis(200), self.read_frame()).await,
            false => {
                let mut read = std::pin::pin!(self.read_frame());
                std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
                    Poll::Ready(r) => Poll::Ready(Some(r)),
                    Poll::Pending => Poll::Ready(None),
                })
                .await
            }
        };
        match pending {
            Some(Ok(Some(frame))) if frame.is_error() => match ErrorMessage::decode(&frame.payload)
            {
                Ok(msg) => TransportError::Peer(msg),
                Err(_) => err,
            },
            _ => err,
        }
    }

    /// Receives a frame and checks it is of the expected protocol and kind.
    pub async fn recv_expect(&mut self, protocol: u8, kind: u8) -> Result<Frame, TransportError> {
        let frame = self.recv().await?;
        if frame.protocol != protocol || frame.kind != kind {
            return Err(TransportError::Unexpected {
                protocol: frame.protocol,
                kind: frame.kind,
            });
        }
        Ok(frame)
    }

    /// Sends one message.
    pub async fn send_msg<M: Message>(&mut self, message: &M) -> Result<(), TransportError> {
        self.send(&message.to_frame()).await
    }

    /// Receives the next frame, which must carry an `M`, and decodes it
    /// within `bounds`.
    pub async fn recv_msg<M: Message>(
        &mut self,
        bounds: M::Bounds<'_>,
    ) -> Result<M, TransportError> {
        let frame = self.recv_expect(M::PROTOCOL, M::KIND).await?;
        Ok(M::decode(&frame.payload, bounds)?)
    }
}

/// `work`, limited to `limit` when `clocked`; `None` if it ran out.
async fn within<T>(clocked: bool, limit: Duration, work: impl Future<Output = T>) -> Option<T> {
    match clocked {
        true => tokio::time::timeout(limit, work).await.ok(),
        false => Some(work.await),
    }
}

fn eof_is_truncation(e: std::io::Error) -> TransportError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        TransportError::Malformed(crate::error::CUT_SHORT)
    } else {
        e.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ErrorCode;

    fn small_limits() -> Limits {
        Limits {
            max_frame_bytes: 1024,
            read_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_millis(500),
        }
    }

    #[tokio::test]
    async fn frames_round_trip_and_are_counted() {
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        let f = Frame::new(1, 2, b"hello".to_vec());
        a.send(&f).await.unwrap();
        assert_eq!(b.recv().await.unwrap(), f);
        assert_eq!(a.bytes_sent(), 12);
        assert_eq!(b.bytes_received(), 12);
    }

    #[tokio::test]
    async fn oversized_frame_is_rejected_without_reading_it() {
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        let raw = tokio::spawn(async move {
            a.io.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
            a
        });
        let err = b.recv().await.unwrap_err();
        assert!(matches!(err, TransportError::FrameTooLarge { .. }), "{err}");
        drop(raw.await);
    }

    #[tokio::test]
    async fn wrong_version_truncation_and_timeout_are_errors() {
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        a.io.write_all(&[0, 0, 0, 3, 99, 1, 1]).await.unwrap();
        assert!(matches!(
            b.recv().await.unwrap_err(),
            TransportError::Version { got: 99, .. }
        ));
        a.io.write_all(&[0, 0, 0, 10, WIRE_VERSION]).await.unwrap();
        drop(a);
        assert!(matches!(
            b.recv().await.unwrap_err(),
            TransportError::Malformed(_)
        ));
        // Whole header, payload cut short.
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        a.io.write_all(&[0, 0, 0, 10, WIRE_VERSION, 1, 1, 5, 6])
            .await
            .unwrap();
        drop(a);
        assert!(matches!(
            b.recv().await.unwrap_err(),
            TransportError::Malformed(_)
        ));

        let (_a, mut b) = Channel::memory_pair(small_limits());
        assert!(matches!(
            b.recv().await.unwrap_err(),
            TransportError::Timeout(_)
        ));
    }

    #[tokio::test]
    async fn peer_errors_surface_as_peer_variant() {
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        a.send_error(4, &ErrorMessage::new(ErrorCode::Stale, "update"))
            .await;
        match b.recv().await.unwrap_err() {
            TransportError::Peer(m) => assert_eq!(m.code, ErrorCode::Stale),
            other => panic!("unexpected {other}"),
        }
    }

    #[tokio::test]
    async fn explain_finds_the_peers_last_error() {
        let (mut a, mut b) = Channel::memory_pair(small_limits());
        a.send_error(1, &ErrorMessage::new(ErrorCode::Aborted, "cheater"))
            .await;
        drop(a);
        let err = b.explain(TransportError::Closed).await;
        assert!(matches!(err, TransportError::Peer(m) if m.text == "cheater"));
        let err = b.explain(TransportError::Timeout("x")).await;
        assert!(matches!(err, TransportError::Timeout(_)));
    }

    #[tokio::test]
    async fn chunked_transfer_round_trip_and_limit() {
        let limits = Limits {
            max_frame_bytes: 2 << 20,
            ..small_limits()
        };
        let (mut a, mut b) = Channel::memory_pair(limits);
        let data: Vec<u8> = (0..(CHUNK_BYTES * 2 + 17)).map(|i| i as u8).collect();
        let sent = data.clone();
        let t = tokio::spawn(async move {
            a.send_chunked(1, 5, &sent).await.unwrap();
            // A header announcing far more than the receiver accepts.
            let huge = (1u64 << 40).to_be_bytes().to_vec();
            a.send(&Frame::new(1, 5, huge)).await.unwrap();
            a
        });
        assert_eq!(b.recv_chunked(1, 5, 1 << 30).await.unwrap(), data);
        assert!(matches!(
            b.recv_chunked(1, 5, 1 << 30).await.unwrap_err(),
            TransportError::TransferTooLarge { .. }
        ));
        t.await.unwrap();
    }
}
