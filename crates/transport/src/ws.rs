//! psikit's frames over WebSocket, for clients in web pages.
//!
//! A browser cannot open a TCP connection, only a WebSocket. This module
//! turns an accepted WebSocket into the byte stream a [`Channel`] runs
//! on, so the server's services answer a page exactly as they answer the
//! CLI: the same frames, limits, budgets, busy answers and error
//! messages. psikit's frames travel as the payload of binary messages,
//! split and joined anyhow (frames delimit themselves): each flush of the
//! channel is one message. Text messages are refused.
//!
//! The upgrade checks the page's `Origin` against the operator's list
//! ([`AllowedOrigins`]): a browser sends it on every WebSocket, and
//! without the check any site a user visits could make the user's browser
//! query the server (and spend the user's query budget). Clients that are
//! not browsers send no `Origin` and are not affected.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_util::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::channel::{Limits, CHUNK_BYTES};
use crate::error::TransportError;
use crate::frame::HEADER_LEN;

/// The web pages (origins, `scheme://host[:port]`) allowed to open a
/// WebSocket to the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedOrigins {
    /// Exact origins, compared without regard to ASCII case.
    origins: Vec<String>,
    /// Any page (`*`): for servers whose data is public anyway.
    any: bool,
}

impl AllowedOrigins {
    /// Parses the operator's list: origins such as `https://example.org`,
    /// or `*` for any page. An empty list allows no page (clients that are
    /// not browsers still connect).
    pub fn parse(list: &[String]) -> Result<Self, TransportError> {
        let mut allowed = Self::default();
        for origin in list.iter().map(|o| o.trim().trim_end_matches('/')) {
            match origin {
                "*" => allowed.any = true,
                o if o.starts_with("http://") || o.starts_with("https://") => {
                    allowed.origins.push(o.to_ascii_lowercase())
                }
                o => {
                    return Err(TransportError::WebSocket(format!(
                        "allowed origin {o:?}: give scheme://host[:port] or *"
                    )))
                }
            }
        }
        Ok(allowed)
    }

    /// Whether a request with this `Origin` header (none: not a browser)
    /// may upgrade.
    pub fn allows(&self, origin: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(o) => self.any || self.origins.iter().any(|a| a.eq_ignore_ascii_case(o)),
        }
    }
}

/// Completes a WebSocket upgrade on `stream` (TCP or TLS), refusing a page
/// whose origin is not allowed with `403 Forbidden`. Messages larger than
/// a frame of `limits` are refused by the WebSocket layer before they are
/// buffered.
// The upgrade callback's error type is tungstenite's HTTP response.
#[allow(clippy::result_large_err)]
pub(crate) async fn accept<S>(
    stream: S,
    origins: &AllowedOrigins,
    limits: Limits,
) -> Result<WsBytes<S>, TransportError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let check = |request: &Request, response: Response| {
        let origin = request.headers().get(header::ORIGIN);
        let origin = origin.map(|o| o.to_str().unwrap_or("(not text)"));
        match origins.allows(origin) {
            true => Ok(response),
            false => Err(forbidden()),
        }
    };
    let max = limits.max_frame_bytes as usize + HEADER_LEN;
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max));
    let upgrade = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config));
    let ws = tokio::time::timeout(limits.read_timeout, upgrade)
        .await
        .map_err(|_| TransportError::Timeout("WebSocket upgrade"))?
        .map_err(|e| TransportError::WebSocket(e.to_string()))?;
    Ok(WsBytes::new(ws))
}

fn forbidden() -> ErrorResponse {
    let mut response =
        ErrorResponse::new(Some("this page's origin may not use this server".into()));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response
}

/// A WebSocket as a byte stream: reads return the payloads of binary
/// messages in order, writes are buffered and sent as one binary message
/// per flush (or per [`CHUNK_BYTES`], whichever comes first).
pub struct WsBytes<S> {
    ws: WebSocketStream<S>,
    /// The message being read, and how much of it was.
    incoming: Vec<u8>,
    read: usize,
    outgoing: Vec<u8>,
}

impl<S> WsBytes<S> {
    pub(crate) fn new(ws: WebSocketStream<S>) -> Self {
        Self {
            ws,
            incoming: Vec::new(),
            read: 0,
            outgoing: Vec::new(),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsBytes<S> {
    /// Sends the buffered bytes as one message (once the socket takes one).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.outgoing.is_empty() {
            return Poll::Ready(Ok(()));
        }
        ready!(Pin::new(&mut self.ws).poll_ready(cx)).map_err(io::Error::other)?;
        let message = Message::binary(std::mem::take(&mut self.outgoing));
        Pin::new(&mut self.ws)
            .start_send(message)
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WsBytes<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.read == this.incoming.len() {
            // Pings are answered by the WebSocket layer itself.
            match ready!(Pin::new(&mut this.ws).poll_next(cx)) {
                Some(Ok(Message::Binary(payload))) => {
                    this.incoming = payload.into();
                    this.read = 0;
                }
                Some(Ok(Message::Text(_))) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a WebSocket text message: psikit speaks binary messages",
                    )))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                // The end of the stream.
                Some(Ok(Message::Close(_))) | None => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(io::Error::other(e))),
            }
        }
        let n = buf.remaining().min(this.incoming.len() - this.read);
        buf.put_slice(&this.incoming[this.read..this.read + n]);
        this.read += n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WsBytes<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.outgoing.len() >= CHUNK_BYTES {
            ready!(self.poll_send(cx))?;
        }
        self.outgoing.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        Pin::new(&mut self.ws)
            .poll_flush(cx)
            .map_err(io::Error::other)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_send(cx))?;
        Pin::new(&mut self.ws)
            .poll_close(cx)
            .map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpStream;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    use super::*;
    use crate::channel::Channel;
    use crate::frame::Frame;
    use crate::net::Listener;

    /// A WebSocket client from `origin` to `addr`, as a channel.
    async fn connect(addr: &str, origin: &str) -> Result<Channel, TransportError> {
        let tcp = TcpStream::connect(addr).await?;
        let mut request = format!("ws://{addr}/")
            .into_client_request()
            .map_err(|e| TransportError::WebSocket(e.to_string()))?;
        let origin = origin.parse().expect("header value");
        request.headers_mut().insert(header::ORIGIN, origin);
        let (ws, _) = tokio_tungstenite::client_async(request, tcp)
            .await
            .map_err(|e| TransportError::WebSocket(e.to_string()))?;
        Ok(Channel::new(WsBytes::new(ws), Limits::default()))
    }

    #[tokio::test]
    async fn frames_cross_a_websocket_both_ways_and_origins_are_checked() {
        let allowed = AllowedOrigins::parse(&["http://page.test".into()]).expect("valid");
        let listener = Listener::bind("127.0.0.1:0", None, Limits::default())
            .await
            .expect("bind")
            .websocket(allowed);
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            // The refused page's connection fails its upgrade; the next one
            // is served.
            let refused = listener.accept().await.expect("accept");
            assert!(refused.handshake().await.is_err());
            let mut ch = listener.accept().await.expect("accept").handshake().await?;
            let frame = ch.recv().await?;
            // Larger than one WebSocket message of the writer's buffer.
            let big = vec![7u8; CHUNK_BYTES + 5];
            ch.send(&Frame::new(frame.protocol, frame.kind + 1, big))
                .await?;
            ch.send(&Frame::new(9, 9, frame.payload)).await?;
            ch.close().await;
            Ok::<_, TransportError>(())
        });
        let refused = connect(&addr, "http://evil.test").await;
        assert!(refused.is_err(), "a page from another origin is refused");
        let mut ch = connect(&addr, "http://page.test").await.expect("allowed");
        ch.send(&Frame::new(1, 2, b"hello".to_vec()))
            .await
            .expect("send");
        let big = ch.recv().await.expect("big frame");
        assert_eq!(
            (big.protocol, big.kind, big.payload.len()),
            (1, 3, CHUNK_BYTES + 5)
        );
        let echo = ch.recv().await.expect("echo");
        assert_eq!(echo.payload, b"hello");
        assert!(ch.recv_or_eof().await.expect("clean close").is_none());
        drop(ch);
        server.await.expect("server task").expect("server side");
    }

    fn origins(list: &[&str]) -> AllowedOrigins {
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        AllowedOrigins::parse(&list).expect("valid origins")
    }

    #[test]
    fn origins_are_matched_exactly() {
        let allowed = origins(&["https://Example.org/", "http://127.0.0.1:8080"]);
        assert!(allowed.allows(Some("https://example.org")));
        assert!(allowed.allows(Some("http://127.0.0.1:8080")));
        assert!(!allowed.allows(Some("https://example.org.evil.test")));
        assert!(!allowed.allows(Some("http://127.0.0.1:8081")));
        assert!(!allowed.allows(Some("null")));
        // Not a browser: no origin to check.
        assert!(allowed.allows(None));
        assert!(!origins(&[]).allows(Some("https://example.org")));
        assert!(origins(&["*"]).allows(Some("https://any.test")));
        assert!(AllowedOrigins::parse(&["example.org".into()]).is_err());
    }
}
