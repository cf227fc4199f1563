//! What the end-to-end tests share: a protocol service on loopback TCP.
// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use psikit_protocols::service::{LocalServer, Router, ServerLimits, Service};
use psikit_transport::Limits;

/// Frame and timeout limits of the test servers and clients.
pub fn limits(timeout: Duration) -> Limits {
    Limits {
        max_frame_bytes: 4 << 20,
        read_timeout: timeout,
        write_timeout: timeout,
    }
}

/// Server limits of the tests: few connections, fast reloads.
pub fn server_limits() -> ServerLimits {
    ServerLimits {
        max_connections: 16,
        reload_every: Duration::from_millis(50),
        ..ServerLimits::default()
    }
}

/// A running service (`S`: the protocol's service type); stopped on drop.
pub struct TestServer<S> {
    pub addr: String,
    pub service: Arc<S>,
    _server: LocalServer,
}

/// Serves `service` alone on a free loopback port.
pub async fn start<S: Service>(service: Arc<S>, limits: Limits) -> TestServer<S> {
    let mut router = Router::new(server_limits());
    router.register(service.clone()).unwrap();
    let server = LocalServer::start(router, limits).await.unwrap();
    TestServer {
        addr: server.addr().to_string(),
        service,
        _server: server,
    }
}

/// A throwaway PKI in `dir`: a CA and a server ("localhost") and a client
/// certificate it issued, as PEM files.
pub struct TestPki {
    pub ca: std::path::PathBuf,
    pub server: (std::path::PathBuf, std::path::PathBuf),
    pub client: (std::path::PathBuf, std::path::PathBuf),
}

pub fn test_pki(dir: &std::path::Path) -> TestPki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let put = |name: &str, pem: String| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (
            put(&format!("{name}.pem"), cert.pem()),
            put(&format!("{name}.key"), key.serialize_pem()),
        )
    };
    let (server, client) = (issue("localhost"), issue("client"));
    TestPki {
        ca: put("ca.pem", ca.pem()),
        server,
        client,
    }
}
