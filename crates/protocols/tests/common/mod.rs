//! What the end-to-end tests share: a protocol service on loopback TCP.

use std::sync::Arc;
use std::time::Duration;

use psikit_protocols::service::{self, Services};
use psikit_transport::net::Listener;
use psikit_transport::Limits;

/// Frame and timeout limits of the test servers and clients.
pub fn limits(timeout: Duration) -> Limits {
    Limits {
        max_frame_bytes: 4 << 20,
        read_timeout: timeout,
        write_timeout: timeout,
    }
}

/// A running service (`S`: the protocol's service type); stopped on drop.
pub struct TestServer<S> {
    pub addr: String,
    pub service: Arc<S>,
    task: tokio::task::JoinHandle<Result<(), psikit_protocols::Error>>,
}

impl<S> Drop for TestServer<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `services` (which include `service`) on a free loopback port.
pub async fn start<S>(service: Arc<S>, services: Services, limits: Limits) -> TestServer<S> {
    let listener = Listener::bind("127.0.0.1:0", None, limits).await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(service::run(listener, Arc::new(services), 16));
    TestServer {
        addr,
        service,
        task,
    }
}
