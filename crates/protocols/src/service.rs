//! The long-running server: accepts connections and routes each request
//! frame to the protocol it names. Protocols plug in as services; today the
//! filter protocol, later the HE and OT protocols.

use std::sync::Arc;

use psikit_transport::net::Listener;
use psikit_transport::{Channel, ErrorCode, ErrorMessage};
use tokio::sync::Semaphore;

use crate::filter_psi::{self, FilterService};
use crate::he_psi::{self, HeService};
use crate::Error;

/// The protocols this server answers.
#[derive(Default)]
pub struct Services {
    pub filter: Option<Arc<FilterService>>,
    pub he: Option<Arc<HeService>>,
}

/// Serves requests on one connection until the client closes it or a
/// request fails; the client is told why before the connection closes.
pub async fn serve_connection(services: &Services, mut ch: Channel) -> Result<(), Error> {
    while let Some(frame) = ch.recv_or_eof().await? {
        let protocol = frame.protocol;
        let routed = match (protocol, &services.filter, &services.he) {
            (filter_psi::PROTOCOL_ID, Some(filter), _) => Some(filter.handle(frame, &mut ch).await),
            (he_psi::PROTOCOL_ID, _, Some(he)) => Some(he.handle(frame, &mut ch).await),
            _ => None,
        };
        let outcome = match routed {
            // One place tells clients why their request failed, whatever
            // the protocol.
            Some(Err(e)) => {
                if let Some(msg) = e.to_peer_message() {
                    ch.send_error(protocol, &msg).await;
                }
                Err(e)
            }
            Some(ok) => ok,
            None => {
                let msg = ErrorMessage::new(
                    ErrorCode::Unsupported,
                    format!("this server does not serve protocol {protocol}"),
                );
                ch.send_error(protocol, &msg).await;
                Err(Error::Protocol(msg.text))
            }
        };
        match outcome {
            // A stale client is expected to sync and retry on this connection.
            Err(Error::StaleFilter { .. }) => continue,
            other => other?,
        }
    }
    Ok(())
}

/// Accepts connections forever, at most `max_connections` at once; each
/// connection runs in its own task, so one misbehaving client never stops
/// the others. Connection errors are reported on stderr without any set
/// contents.
pub async fn run(
    listener: Listener,
    services: Arc<Services>,
    max_connections: usize,
) -> Result<(), Error> {
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let incoming = match listener.accept().await {
            Ok(i) => i,
            Err(e) => {
                eprintln!("psikit: accept failed: {e}");
                continue;
            }
        };
        let peer = incoming.peer();
        let services = services.clone();
        let permit = slots.clone().try_acquire_owned();
        tokio::spawn(async move {
            let mut ch = match incoming.handshake().await {
                Ok(ch) => ch,
                Err(e) => return eprintln!("psikit: {peer}: {e}"),
            };
            let Ok(_permit) = permit else {
                let busy = ErrorMessage::new(ErrorCode::Busy, "server busy; retry later");
                ch.send_error(0, &busy).await;
                return;
            };
            if let Err(e) = serve_connection(&services, ch).await {
                eprintln!("psikit: {peer}: {e}");
            }
        });
    }
}
