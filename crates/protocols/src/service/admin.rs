//! The admin listener: a router's health, readiness and metrics over
//! plain HTTP, for load balancers, orchestrators and Prometheus.
//!
//! * `GET /healthz`: 200 while the process serves (liveness);
//! * `GET /readyz`: 200 when every service's state is loaded and serving,
//!   503 with the reasons otherwise (a failed reload, a shard that does
//!   not answer, the server draining), see [`Router::readiness`];
//! * `GET /metrics`: the [`Metrics`](super::Metrics) in the OpenMetrics
//!   text format, which Prometheus scrapes.
//!
//! It has no authentication and no TLS, so it binds only loopback, private
//! (RFC 1918, RFC 4193), link-local or unspecified addresses; it never
//! shows anything of the sets, keys or clients' requests.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::router::Router;
use crate::error::Error;

/// Admin connections served at once (probes and scrapes are few).
const MAX_ADMIN_CONNECTIONS: usize = 64;

/// How long a client may take to send its request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A bound admin listener (see the module docs).
pub struct AdminListener {
    listener: TcpListener,
}

impl AdminListener {
    /// Binds `addr` (`host:port`), refusing an address reachable from
    /// outside a private network.
    pub async fn bind(addr: &str) -> Result<Self, Error> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::Config(format!("admin listener {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::Config(format!("admin listener {addr}: {e}")))?;
        if !is_private(local.ip()) {
            return Err(Error::Config(format!(
                "the admin listener serves plain HTTP without authentication: bind it to a \
                 loopback or private address, not {}",
                local.ip()
            )));
        }
        if local.ip().is_unspecified() {
            tracing::warn!(%local, "the admin listener listens on every interface");
        }
        Ok(Self { listener })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        (self.listener.local_addr()).map_err(|e| Error::Config(format!("admin listener: {e}")))
    }

    /// Serves `router`'s health, readiness and metrics until dropped.
    pub async fn serve(self, router: Arc<Router>) {
        let slots = Arc::new(Semaphore::new(MAX_ADMIN_CONNECTIONS));
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    continue;
                }
            };
            // Over the limit: closed at once.
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let router = router.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let service = service_fn(move |req| answer(router.clone(), req));
                let served = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "admin connection failed");
                }
            });
        }
    }
}

/// Whether `ip` is loopback, private, link-local or unspecified.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified()
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                // Unique local (fc00::/7) and link-local (fe80::/10).
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

async fn answer(
    router: Arc<Router>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into()));
    }
    Ok(match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match router.readiness().await {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready\n{}\n", why.join("\n")),
            ),
        },
        "/metrics" => {
            let mut response = text(StatusCode::OK, router.metrics_text());
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    })
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_addresses_are_private() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_private(ip.parse().expect("ip")), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "192.0.2.2",
            "2001:db8::1",
            "::ffff:8.8.8.8",
        ] {
            assert!(!is_private(ip.parse().expect("ip")), "{ip}");
        }
    }
}
