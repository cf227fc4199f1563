//! TCP and TLS channels on loopback, with certificates made at test time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use psikit_transport::net::{accept_any, connect, ClientTlsFiles, Listener, ServerTlsFiles};
use psikit_transport::{Frame, Limits, TransportError};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
}

fn write(dir: &Path, name: &str, pem: String) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pem).unwrap();
    p
}

/// A CA, a server certificate for "localhost" and a client certificate.
fn make_pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec![name.to_string()]).unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        (
            write(dir.path(), &format!("{name}.pem"), cert.pem()),
            write(dir.path(), &format!("{name}.key"), key.serialize_pem()),
        )
    };
    let server = issue("localhost");
    let client = issue("client");
    let ca = write(dir.path(), "ca.pem", ca.pem());
    Pki {
        _dir: dir,
        ca,
        server,
        client,
    }
}

fn limits() -> Limits {
    Limits {
        read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

/// Serves one connection that echoes one frame.
async fn echo_once(listener: Listener) -> Result<(), TransportError> {
    let mut ch = listener.accept().await?.handshake().await?;
    let f = ch.recv().await?;
    ch.send(&f).await
}

async fn round_trip(server_tls: Option<ServerTlsFiles>, client_tls: Option<ClientTlsFiles>) {
    let listener = Listener::bind("127.0.0.1:0", server_tls.as_ref(), limits())
        .await
        .unwrap();
    let addr = format!("localhost:{}", listener.local_addr().unwrap().port());
    let server = tokio::spawn(echo_once(listener));
    let mut ch = connect(&addr, client_tls.as_ref(), limits()).await.unwrap();
    let f = Frame::new(1, 1, vec![42; 100_000]);
    ch.send(&f).await.unwrap();
    assert_eq!(ch.recv().await.unwrap(), f);
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn plain_tcp_round_trip() {
    round_trip(None, None).await;
}

#[tokio::test]
async fn tls_round_trip() {
    let pki = make_pki();
    let server = ServerTlsFiles {
        cert_chain: pki.server.0.clone(),
        private_key: pki.server.1.clone(),
        client_ca: None,
    };
    let client = ClientTlsFiles {
        server_ca: pki.ca.clone(),
        server_name: None,
        client_cert: None,
    };
    round_trip(Some(server), Some(client)).await;
}

#[tokio::test]
async fn mutual_tls_round_trip_and_missing_client_cert_rejected() {
    let pki = make_pki();
    let server = ServerTlsFiles {
        cert_chain: pki.server.0.clone(),
        private_key: pki.server.1.clone(),
        client_ca: Some(pki.ca.clone()),
    };
    let mut client = ClientTlsFiles {
        server_ca: pki.ca.clone(),
        server_name: None,
        client_cert: Some(pki.client.clone()),
    };
    round_trip(Some(server.clone()), Some(client.clone())).await;

    client.client_cert = None;
    let listener = Listener::bind("127.0.0.1:0", Some(&server), limits())
        .await
        .unwrap();
    let addr = format!("localhost:{}", listener.local_addr().unwrap().port());
    let srv = tokio::spawn(echo_once(listener));
    // With TLS 1.3 the client may finish its handshake before the server
    // rejects it; the failure then shows on first use.
    let outcome = async {
        let mut ch = connect(&addr, Some(&client), limits()).await?;
        ch.send(&Frame::new(1, 1, vec![1])).await?;
        ch.recv().await
    }
    .await;
    assert!(outcome.is_err());
    assert!(matches!(srv.await.unwrap(), Err(TransportError::Tls(_))));
}

#[tokio::test]
async fn client_rejects_untrusted_server() {
    let pki = make_pki();
    let other = make_pki();
    let server = ServerTlsFiles {
        cert_chain: pki.server.0.clone(),
        private_key: pki.server.1.clone(),
        client_ca: None,
    };
    let listener = Listener::bind("127.0.0.1:0", Some(&server), limits())
        .await
        .unwrap();
    let addr = format!("localhost:{}", listener.local_addr().unwrap().port());
    let _srv = tokio::spawn(echo_once(listener));
    let client = ClientTlsFiles {
        server_ca: other.ca.clone(),
        server_name: None,
        client_cert: None,
    };
    let err = connect(&addr, Some(&client), limits()).await.err();
    assert!(matches!(err, Some(TransportError::Tls(_))), "{err:?}");
}

#[tokio::test]
async fn missing_pem_file_is_a_clear_error() {
    let server = ServerTlsFiles {
        cert_chain: "/nonexistent/cert.pem".into(),
        private_key: "/nonexistent/key.pem".into(),
        client_ca: None,
    };
    let err = Listener::bind("127.0.0.1:0", Some(&server), limits())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}

#[tokio::test]
async fn accept_any_takes_turns_so_no_listener_starves() {
    let a = Listener::bind("127.0.0.1:0", None, limits()).await.unwrap();
    let b = Listener::bind("127.0.0.1:0", None, limits()).await.unwrap();
    let (at_a, at_b) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    // Two connections waiting on each listener; each client's own address
    // says which listener it reached.
    let mut reached = std::collections::HashMap::new();
    let mut clients = Vec::new();
    for (name, addr) in [("a", at_a), ("a", at_a), ("b", at_b), ("b", at_b)] {
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        reached.insert(client.local_addr().unwrap(), name);
        clients.push(client);
    }
    let listeners = [a, b];
    let mut order = Vec::new();
    for turn in 0..4 {
        let incoming = accept_any(&listeners, turn).await.unwrap();
        order.push(reached[&incoming.peer()]);
    }
    assert_eq!(order, ["a", "b", "a", "b"]);
}
