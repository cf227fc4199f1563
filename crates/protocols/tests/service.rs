//! The router's promises to every client, whatever the protocol: a frame
//! it cannot take is answered with an error frame naming why, and a client
//! refused for load is told the server is busy; both arrive before the
//! connection closes.

#![cfg(feature = "filter")]

use std::sync::Arc;
use std::time::Duration;

use psikit_primitives::oprf::ServerKey;
use psikit_protocols::filter_psi::{FilterConfig, FilterService, ServerState};
use psikit_protocols::service::{LocalServer, Router, ServerLimits};
use psikit_transport::frame::{ErrorCode, ErrorMessage, KIND_ERROR, WIRE_VERSION};
use psikit_transport::{Channel, Frame, TransportError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;

fn service() -> Arc<FilterService> {
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let (state, _) = ServerState::build(key, vec![[7u8; 16]], FilterConfig::default()).unwrap();
    Arc::new(FilterService::new(state, ServerLimits::default()))
}

async fn serve(max_connections: usize) -> LocalServer {
    let mut router = Router::new(ServerLimits {
        max_connections,
        ..common::server_limits()
    });
    router.register(service()).unwrap();
    LocalServer::start(router, common::limits(Duration::from_secs(10)))
        .await
        .unwrap()
}

/// Reads one raw frame (any wire version) and decodes it as an error.
async fn read_error(stream: &mut TcpStream) -> ErrorMessage {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await.unwrap();
    let mut rest = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut rest).await.unwrap();
    assert_eq!(
        rest[0], WIRE_VERSION,
        "the server answers in its own version"
    );
    assert_eq!(rest[2], KIND_ERROR);
    ErrorMessage::decode(&rest[3..]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_wire_version_is_told_which_version_the_server_speaks() {
    let server = serve(4).await;
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    // A frame of wire version 99 with a 1 KiB payload.
    let mut frame = (1024u32 + 3).to_be_bytes().to_vec();
    frame.extend([99, 1, 1]);
    frame.extend([0u8; 1024]);
    stream.write_all(&frame).await.unwrap();
    let err = read_error(&mut stream).await;
    assert_eq!(err.code, ErrorCode::Unsupported);
    assert!(
        err.text.contains(&format!("wire version {WIRE_VERSION}")),
        "{}",
        err.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_over_the_limit_hears_that_the_server_is_busy() {
    let server = serve(1).await;
    // One client holds the only slot (a sync answered proves it is in).
    let mut holder = server
        .connect(common::limits(Duration::from_secs(10)))
        .await
        .unwrap();
    let sync = Frame::new(1, 1, vec![0]);
    holder.send(&sync).await.unwrap();
    holder.recv().await.unwrap();

    // Each extra client sends a request, as a real client does.
    let mut extra = Vec::new();
    for _ in 0..12 {
        let server_addr = server.addr().to_string();
        extra.push(tokio::spawn(async move {
            let limits = common::limits(Duration::from_secs(10));
            let mut ch: Channel = psikit_transport::net::connect(&server_addr, None, limits)
                .await
                .unwrap();
            // Late enough that a server which closed at once is gone; a
            // send that fails must still report the server's reason.
            tokio::time::sleep(Duration::from_millis(100)).await;
            match ch.send(&Frame::new(1, 1, vec![0u8; 256 << 10])).await {
                Ok(()) => ch.recv().await.map(|_| ()),
                Err(e) => Err(e),
            }
        }));
    }
    for task in extra {
        match task.await.unwrap() {
            Err(TransportError::Peer(msg)) => {
                assert_eq!(msg.code, ErrorCode::Busy, "{}", msg.text)
            }
            other => panic!("expected a busy error, got {other:?}"),
        }
    }
    drop(holder);
}

/// A client refused as busy retries with backoff and succeeds once a slot
/// frees up (the CLI's filter and HE clients go through the same blocking
/// entries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_is_retried_until_a_slot_frees() {
    use psikit_protocols::common::connect::ServerAddr;
    use psikit_protocols::filter_psi::FilterClient;
    let server = serve(1).await;
    let mut holder = server
        .connect(common::limits(Duration::from_secs(10)))
        .await
        .unwrap();
    holder.send(&Frame::new(1, 1, vec![0])).await.unwrap();
    holder.recv().await.unwrap();
    let addr = ServerAddr {
        addr: server.addr().to_string(),
        tls: None,
        limits: common::limits(Duration::from_secs(10)),
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let client = tokio::task::spawn_blocking(move || {
        let mut client = FilterClient::with_cache_file(&cache, 1 << 30)?;
        client.query_blocking(&addr, &[b"absent".to_vec()], &psikit_protocols::NoProgress)
    });
    // Refused at least once (the first retry waits about 200 ms), then
    // served once the holder leaves.
    tokio::time::sleep(Duration::from_millis(400)).await;
    drop(holder);
    let query = client.await.unwrap().expect("served after retrying");
    assert_eq!(query.outcome.matches, vec![false]);
}
