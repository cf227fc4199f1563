//! `psikit serve`: the long-running server, for the filter protocol, the HE
//! protocol, or both on one port.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use psikit_protocols::filter_psi::{FilterService, ServerLimits, ServerState};
use psikit_protocols::he_psi::{HeLimits, HeService, HeState};
use psikit_protocols::service::{self, Services};
use psikit_transport::net::Listener;

use crate::args::{runtime, NetArgs, ServerTlsArgs};
use crate::report;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: String,
    /// Serve the filter protocol from this state directory (made by
    /// `psikit filter setup`). Updates written there are picked up live.
    #[arg(long)]
    pub filter_state: Option<PathBuf>,
    /// Serve the HE protocol from this state directory (made by `psikit he
    /// db build`). Updates written there are picked up live.
    #[arg(long)]
    pub he_state: Option<PathBuf>,
    /// Do not keep the HE database's query-ready plaintexts in memory: less
    /// memory, slower queries.
    #[arg(long)]
    pub he_no_cache: bool,
    /// HE queries evaluated at once (each uses every core); others wait.
    #[arg(long, default_value_t = HeLimits::default().max_concurrent_queries)]
    pub he_concurrent_queries: usize,
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
    if a.filter_state.is_none() && a.he_state.is_none() {
        bail!("nothing to serve: give --filter-state DIR and/or --he-state DIR");
    }
    let filter = match &a.filter_state {
        Some(dir) => Some(Arc::new(FilterService::new(
            ServerState::load(dir)?,
            ServerLimits {
                max_query_items: a.max_query_items,
            },
        ))),
        None => None,
    };
    let he = match &a.he_state {
        Some(dir) => Some(Arc::new(HeService::new(
            HeState::load(dir, !a.he_no_cache)?,
            HeLimits {
                max_query_items: a.max_query_items,
                max_concurrent_queries: a.he_concurrent_queries.max(1),
            },
        ))),
        None => None,
    };
    runtime()?.block_on(async move {
        let listener = Listener::bind(&a.listen, a.tls.files().as_ref(), a.net.limits()?).await?;
        let at = format!(
            "{}{}",
            listener.local_addr()?,
            if listener.is_tls() { " with TLS" } else { "" }
        );
        let every = Duration::from_secs(a.reload_secs.max(1));
        if let (Some(filter), Some(dir)) = (&filter, &a.filter_state) {
            announce_filter(filter, &at);
            tokio::spawn(filter.clone().watch(dir.clone(), every));
        }
        if let (Some(he), Some(dir)) = (&he, &a.he_state) {
            announce_he(he, &at);
            tokio::spawn(he.clone().watch(dir.clone(), every, !a.he_no_cache));
        }
        let services = Arc::new(Services { filter, he });
        service::run(listener, services, a.max_connections).await?;
        Ok(())
    })
}

fn announce_filter(filter: &FilterService, at: &str) {
    let snap = filter.snapshot();
    println!(
        "psikit: serving the filter protocol on {at} ({} items, epoch {}, filter {} bytes)",
        snap.state.len(),
        snap.state.version().epoch,
        snap.full_filter_bytes()
    );
}

fn announce_he(he: &HeService, at: &str) {
    let snap = he.snapshot();
    let db = snap.db();
    let mem = db.memory();
    println!(
        "psikit: serving the HE protocol on {at} ({} items, {} bin bundles, labels up to {} \
         bytes, {} in memory)",
        db.len(),
        mem.bundles,
        db.shape().max_label_bytes,
        report::bytes((mem.data_bytes + mem.cache_bytes) as u64)
    );
}
