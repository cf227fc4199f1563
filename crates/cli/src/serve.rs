//! `psikit serve`: the long-running server, for the filter protocol, the HE
//! protocol, or both on one port.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use psikit_protocols::common::connect::{runtime, AllowedOrigins, Listener};
#[cfg(feature = "he")]
use psikit_protocols::common::connect::{ClientTlsFiles, ServerAddr};
#[cfg(feature = "he")]
use psikit_protocols::he_psi::shard::QueryTrace;
use psikit_protocols::service::admin::AdminListener;
use psikit_protocols::service::{QueryBudget, Router, ServerLimits};
#[cfg(feature = "he")]
use psikit_protocols::serving::HeRouting;
use psikit_protocols::serving::Serving;

use crate::args::{NetArgs, ServerTlsArgs};

/// `psikit serve`'s flags; every one is also a key of its `--config` file
/// (see `config.rs`), and `--check` prints them resolved as JSON.
#[derive(Args, serde::Serialize)]
pub struct ServeArgs {
    /// Read flags from this TOML file: each key a flag's name
    /// (`filter-state = "/srv/filter"`, `he-no-cache = true`); flags on the
    /// command line override it. Unknown keys are refused.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Check the settings and open every state, print the settings as
    /// JSON and what would be served, then exit without serving.
    #[arg(long)]
    #[serde(skip)]
    pub check: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: String,
    /// Also serve on this address over WebSocket (`ws://`, or `wss://`
    /// with --tls-cert/--tls-key), for web pages (the browser client):
    /// the same services, limits and budgets as --listen.
    #[arg(long)]
    pub ws_listen: Option<String>,
    /// A web page origin allowed to use --ws-listen
    /// (`https://contacts.example.org`); repeat for several, or `*` for
    /// any page. Without one no page may connect (clients that are not
    /// browsers send no origin and may).
    #[arg(long, requires = "ws_listen")]
    pub ws_allow_origin: Vec<String>,
    /// Serve the filter protocol from this state directory (made by
    /// `psikit filter setup`). Updates written there are picked up live.
    #[cfg(feature = "filter")]
    #[arg(long)]
    pub filter_state: Option<PathBuf>,
    /// Serve the HE protocol from this state directory (made by `psikit he
    /// db build`). Updates written there are picked up live.
    #[cfg(feature = "he")]
    #[arg(long)]
    pub he_state: Option<PathBuf>,
    /// Serve a sharded HE database as its router: the `router` directory
    /// `psikit he db build --shards N` made (the OPRF key and the
    /// manifest). Every query goes to every shard (--he-shard); clients see
    /// one database. Manifest updates are picked up live.
    #[cfg(feature = "he")]
    #[arg(long, conflicts_with = "he_state", requires = "he_shard")]
    pub he_router: Option<PathBuf>,
    /// A shard's server (`host:port` of `psikit serve --he-state
    /// DIR/shard-I`), once per shard, in shard order. Shards see only
    /// ciphertexts under the client's key, never the OPRF key; reach them
    /// over TLS with --he-shard-tls-ca.
    #[cfg(feature = "he")]
    #[arg(long, requires = "he_router")]
    pub he_shard: Vec<String>,
    /// Reach the shards over TLS, trusting shard certificates issued by
    /// this CA (PEM); the shards serve with --tls-cert/--tls-key.
    #[cfg(feature = "he")]
    #[arg(long, requires = "he_router")]
    pub he_shard_tls_ca: Option<PathBuf>,
    /// The router's certificate (PEM), for shards that require mutual TLS
    /// (--tls-client-ca).
    #[cfg(feature = "he")]
    #[arg(long, requires_all = ["he_shard_tls_ca", "he_shard_tls_key"])]
    pub he_shard_tls_cert: Option<PathBuf>,
    /// The router's private key (PEM) for --he-shard-tls-cert.
    #[cfg(feature = "he")]
    #[arg(long, requires = "he_shard_tls_cert")]
    pub he_shard_tls_key: Option<PathBuf>,
    /// Print one line per answered query to stderr, `psikit: query trace`
    /// and a JSON object: the query bytes sent to each shard, each shard's
    /// first and last result package, done time, packages and bytes, the
    /// gathering, in milliseconds from the query's arrival. Sizes and times
    /// only, never set contents: for finding where a sharded query's time
    /// goes.
    #[cfg(feature = "he")]
    #[arg(long, requires = "he_router")]
    pub trace_queries: bool,
    /// Do not keep the HE database's query-ready plaintexts in memory: less
    /// memory, slower queries.
    #[cfg(feature = "he")]
    #[arg(long)]
    pub he_no_cache: bool,
    /// HE queries evaluated at once (each uses every core); others wait.
    #[arg(long, default_value_t = ServerLimits::default().max_concurrent_queries)]
    pub he_concurrent_queries: usize,
    /// Most items a client may send in one query request.
    #[arg(long, default_value_t = ServerLimits::default().max_query_items)]
    pub max_query_items: u32,
    /// Most concurrent client connections.
    #[arg(long, default_value_t = ServerLimits::default().max_connections)]
    pub max_connections: usize,
    /// Seconds between checks for an updated state.
    #[arg(long, default_value_t = 2)]
    pub reload_secs: u64,
    /// Most items (OPRF evaluations) one client IP address may query per
    /// --query-budget-window-secs, against dictionary attacks; further
    /// requests are refused with the time until they fit. Default: no
    /// limit.
    #[arg(long)]
    pub query_budget: Option<u64>,
    /// The window of --query-budget (it refills continuously over it).
    #[arg(long, default_value_t = 86_400, requires = "query_budget")]
    pub query_budget_window_secs: u64,
    /// Serve /healthz, /readyz and /metrics (Prometheus) over plain HTTP
    /// on this address (a loopback or private one; off by default).
    #[arg(long)]
    pub admin_listen: Option<String>,
    /// On SIGTERM or SIGINT, stop accepting and give the requests under
    /// way this long to finish before closing them (a second signal
    /// exits at once).
    #[arg(long, default_value_t = 30)]
    pub shutdown_grace_secs: u64,
    /// How log events are written to stderr: text for people, json for
    /// log collectors (one object per line).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Which log events are written: a level (error, warn, info, debug,
    /// trace) or a filter such as `psikit::request=warn,info`. Default:
    /// RUST_LOG, else info.
    #[arg(long)]
    pub log_level: Option<String>,
    #[command(flatten)]
    pub tls: ServerTlsArgs,
    #[command(flatten)]
    pub net: NetArgs,
}

/// The format of `psikit serve`'s log events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl ServeArgs {
    fn limits(&self) -> ServerLimits {
        ServerLimits {
            max_connections: self.max_connections,
            max_query_items: self.max_query_items,
            max_concurrent_queries: self.he_concurrent_queries.max(1),
            reload_every: Duration::from_secs(self.reload_secs.max(1)),
            query_budget: self.query_budget.map(|items| QueryBudget {
                items,
                window: Duration::from_secs(self.query_budget_window_secs.max(1)),
            }),
        }
    }

    /// A router with a service for every state directory given.
    fn router(&self) -> Result<Router> {
        let serving = Serving {
            #[cfg(feature = "filter")]
            filter_state: self.filter_state.clone(),
            #[cfg(feature = "he")]
            he_state: self.he_state.clone(),
            #[cfg(feature = "he")]
            he_cache: !self.he_no_cache,
            #[cfg(feature = "he")]
            he_router: self.he_routing()?,
            limits: self.limits(),
        };
        let router = Router::serving(&serving)?;
        if router.services().is_empty() {
            bail!("nothing to serve: give --filter-state DIR and/or --he-state DIR (or --he-router DIR)");
        }
        Ok(router)
    }

    /// The sharded HE database's router and its shards, from the flags.
    #[cfg(feature = "he")]
    fn he_routing(&self) -> Result<Option<HeRouting>> {
        let Some(dir) = &self.he_router else {
            return Ok(None);
        };
        let net = self.net.limits()?;
        let tls = self.he_shard_tls_ca.clone().map(|ca| ClientTlsFiles {
            server_ca: ca,
            server_name: None,
            client_cert: self
                .he_shard_tls_cert
                .clone()
                .zip(self.he_shard_tls_key.clone()),
        });
        let shards = (self.he_shard.iter())
            .map(|addr| ServerAddr {
                addr: addr.clone(),
                tls: tls.clone(),
                limits: net,
            })
            .collect();
        let mut routing = HeRouting {
            dir: dir.clone(),
            shards,
            trace: None,
        };
        if self.trace_queries {
            routing.trace = Some(Arc::new(|trace: &QueryTrace| {
                eprintln!("psikit: query trace {}", trace.to_json())
            }));
        }
        Ok(Some(routing))
    }

    /// The TCP listener, and the WebSocket one if asked for.
    async fn listeners(&self) -> Result<Vec<Listener>> {
        let (tls, limits) = (self.tls.files(), self.net.limits()?);
        let mut listeners = vec![Listener::bind(&self.listen, tls.as_ref(), limits).await?];
        if let Some(addr) = &self.ws_listen {
            let origins = AllowedOrigins::parse(&self.ws_allow_origin)?;
            listeners.push(
                Listener::bind(addr, tls.as_ref(), limits)
                    .await?
                    .websocket(origins),
            );
        }
        Ok(listeners)
    }
}

/// Where a listener serves, as announced: `ADDR`, `ADDR with TLS`,
/// `ws://ADDR` or `wss://ADDR`.
fn describe(listener: &Listener) -> Result<String> {
    let addr = listener.local_addr()?;
    Ok(match (listener.is_websocket(), listener.is_tls()) {
        (false, false) => addr.to_string(),
        (false, true) => format!("{addr} with TLS"),
        (true, false) => format!("ws://{addr}"),
        (true, true) => format!("wss://{addr}"),
    })
}

pub fn run(a: ServeArgs) -> Result<()> {
    init_logs(a.log_format, a.log_level.as_deref())?;
    let router = Arc::new(a.router()?);
    if a.check {
        let services: Vec<_> = (router.services().iter())
            .map(|s| serde_json::json!({"name": s.name(), "state": s.describe()}))
            .collect();
        let checked = serde_json::json!({"settings": &a, "services": services});
        println!("{}", serde_json::to_string_pretty(&checked)?);
        return Ok(());
    }
    runtime()?.block_on(async move {
        let listeners = a.listeners().await?;
        let at = (listeners.iter())
            .map(describe)
            .collect::<Result<Vec<_>>>()?
            .join(" and ");
        let admin = match &a.admin_listen {
            Some(addr) => Some(AdminListener::bind(addr).await?),
            None => None,
        };
        // Announced on stdout, where scripts read the address; a closed
        // stdout must not stop the server, so write errors are ignored.
        let mut out = std::io::stdout();
        for service in router.services() {
            let _ = writeln!(
                out,
                "psikit: serving {} on {at} ({})",
                service.name(),
                service.describe()
            );
        }
        if let Some(admin) = admin {
            let _ = writeln!(out, "psikit: admin on http://{}", admin.local_addr()?);
            tokio::spawn(admin.serve(router.clone()));
        }
        let _ = out.flush();
        let grace = Duration::from_secs(a.shutdown_grace_secs);
        let drained = router.run_until(listeners, first_signal(), grace).await?;
        if drained.cut_short > 0 {
            bail!(
                "shut down with {} request(s) cut short after the {}-second grace period",
                drained.cut_short,
                a.shutdown_grace_secs
            );
        }
        tracing::info!("drained; exiting");
        Ok(())
    })
}

/// Log events to stderr in `format`, filtered by `level` (else RUST_LOG,
/// else info).
fn init_logs(format: LogFormat, level: Option<&str>) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::try_new(level)?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    // Colours only on a terminal: escape codes in a log file are noise,
    // and a log line must not carry control characters.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let set = match format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
    set.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// Completes at the first SIGTERM or SIGINT; a second one exits the
/// process at once (status 128 + the signal's number).
async fn first_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (first, heard) = tokio::sync::oneshot::channel::<()>();
    let streams = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    let (Ok(mut term), Ok(mut int)) = streams else {
        tracing::warn!("cannot listen for signals; stop the server with SIGKILL");
        return std::future::pending().await;
    };
    tokio::spawn(async move {
        let mut first = Some(first);
        loop {
            let code = tokio::select! {
                _ = term.recv() => 143,
                _ = int.recv() => 130,
            };
            match first.take() {
                Some(tell) => {
                    tracing::info!("signal received: draining (a second one exits at once)");
                    let _ = tell.send(());
                }
                None => {
                    tracing::warn!("second signal: exiting at once");
                    std::process::exit(code);
                }
            }
        }
    });
    let _ = heard.await;
}
