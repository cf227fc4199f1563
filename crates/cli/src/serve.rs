//! `psikit serve`: the long-running server.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use psikit_protocols::filter_psi::{FilterService, ServerLimits, ServerState};
use psikit_protocols::service::{self, Services};
use psikit_transport::net::Listener;

use crate::args::{runtime, NetArgs, ServerTlsArgs};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: String,
    /// Serve the filter protocol from this state directory (made by
    /// `psikit filter setup`). Updates written there are picked up live.
    #[arg(long)]
    pub filter_state: Option<PathBuf>,
    /// Most items a client may send in one query request.
    #[arg(long, default_value_t = 1 << 18)]
    pub max_query_items: u32,
    /// Most concurrent client connections.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Seconds between checks for an updated state.
    #[arg(long, default_value_t = 2)]
    pub reload_secs: u64,
    #[command(flatten)]
    pub tls: ServerTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

pub fn run(a: ServeArgs) -> Result<()> {
    let Some(dir) = a.filter_state.clone() else {
        bail!("nothing to serve: give --filter-state DIR");
    };
    let state = ServerState::load(&dir)?;
    let limits = ServerLimits {
        max_query_items: a.max_query_items,
    };
    let filter = Arc::new(FilterService::new(state, limits));
    runtime()?.block_on(async move {
        let listener = Listener::bind(&a.listen, a.tls.files().as_ref(), a.net.limits()?).await?;
        let snap = filter.snapshot();
        println!(
            "psikit: serving the filter protocol on {}{} ({} items, epoch {}, filter {} bytes)",
            listener.local_addr()?,
            if listener.is_tls() { " with TLS" } else { "" },
            snap.state.len(),
            snap.state.version().epoch,
            snap.full_filter_bytes()
        );
        tokio::spawn(
            filter
                .clone()
                .watch(dir, Duration::from_secs(a.reload_secs.max(1))),
        );
        let services = Arc::new(Services {
            filter: Some(filter),
            ..Services::default()
        });
        service::run(listener, services, a.max_connections).await?;
        Ok(())
    })
}
