//! `psikit.Server`: the long-running server of `psikit serve` (the service
//! layer's `Router` with a `FilterService` and/or an `HeService`) on a
//! background runtime, one port for every state given, and the same
//! router at the message level (`respond`: request bytes in, answer bytes
//! out), with or without a port. Updates written to the state directories
//! are picked up live, as by `psikit serve`; `ws_listen=` adds its
//! WebSocket listener for web pages (`--ws-listen`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use psikit_protocols::common::connect::{runtime, AllowedOrigins, Listener, ServerAddr};
use psikit_protocols::common::Limits;
use psikit_protocols::service::{QueryBudget, Router, ServerLimits};
use psikit_protocols::serving::{HeRouting, Serving};
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{self, IntoPy};
use crate::net;

/// The runtime and the accept loop (or, without a port, the reload
/// watcher) of a serving server.
struct Running {
    runtime: tokio::runtime::Runtime,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Stops accepting, ends the connections' tasks and the reload watcher,
    /// and waits (briefly) for the runtime's threads.
    fn stop(self) {
        self.task.abort();
        self.runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

/// A psikit server on one port (see `psikit.Server`).
#[pyclass(module = "psikit._native")]
pub struct Server {
    /// `None` when serving only through `respond`.
    addr: Option<String>,
    /// The WebSocket listener's `host:port`, if any.
    ws_addr: Option<String>,
    router: Arc<Router>,
    limits: Limits,
    services: Vec<(String, String)>,
    running: Mutex<Option<Running>>,
}

#[pymethods]
impl Server {
    #[new]
    #[pyo3(signature = (listen=Some("127.0.0.1:0"), filter_state=None, he_state=None, he_cache=true,
        he_router=None, he_shards=Vec::new(), he_shards_tls=None,
        max_connections=None, max_query_items=None, he_concurrent_queries=None,
        reload_secs=2.0, timeout=60.0, max_message_mib=16, tls=None, query_budget=None,
        query_budget_window=86400.0, ws_listen=None, ws_allow_origin=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        listen: Option<&str>,
        filter_state: Option<PathBuf>,
        he_state: Option<PathBuf>,
        he_cache: bool,
        he_router: Option<PathBuf>,
        he_shards: Vec<String>,
        he_shards_tls: Option<&Bound<'_, PyDict>>,
        max_connections: Option<usize>,
        max_query_items: Option<u32>,
        he_concurrent_queries: Option<usize>,
        reload_secs: f64,
        timeout: f64,
        max_message_mib: u32,
        tls: Option<&Bound<'_, PyDict>>,
        query_budget: Option<u64>,
        query_budget_window: f64,
        ws_listen: Option<String>,
        ws_allow_origin: Vec<String>,
    ) -> PyResult<Self> {
        if !(reload_secs.is_finite() && reload_secs > 0.0) {
            return Err(errors::input(
                "reload_secs must be a positive number of seconds",
            ));
        }
        let defaults = ServerLimits::default();
        let limits = ServerLimits {
            max_connections: max_connections.unwrap_or(defaults.max_connections),
            max_query_items: max_query_items.unwrap_or(defaults.max_query_items),
            max_concurrent_queries: he_concurrent_queries
                .unwrap_or(defaults.max_concurrent_queries)
                .max(1),
            reload_every: Duration::from_secs_f64(reload_secs),
            query_budget: match query_budget {
                None => None,
                Some(_) if !(query_budget_window.is_finite() && query_budget_window >= 1.0) => {
                    return Err(errors::input(
                        "query_budget_window must be at least one second",
                    ));
                }
                Some(items) => Some(QueryBudget {
                    items,
                    window: Duration::from_secs_f64(query_budget_window),
                }),
            },
        };
        let net_limits = net::limits(timeout, max_message_mib)?;
        let tls = net::server_tls(tls)?;
        let shards_tls = net::client_tls(he_shards_tls)?;
        let listen = listen.map(str::to_owned);
        let origins =
            AllowedOrigins::parse(&ws_allow_origin).map_err(|e| errors::input(e.to_string()))?;
        let (addrs, services, router, running) = py
            .detach(|| -> Result<_, Error> {
                if he_router.is_none() && !he_shards.is_empty() {
                    return Err(Error::Config("he_shards= goes with he_router=DIR".into()));
                }
                let he_router = he_router.map(|dir| HeRouting {
                    dir,
                    shards: (he_shards.iter())
                        .map(|addr| ServerAddr {
                            addr: addr.clone(),
                            tls: shards_tls.clone(),
                            limits: net_limits,
                        })
                        .collect(),
                    trace: None,
                });
                let router = Router::serving(&Serving {
                    filter_state,
                    he_state,
                    he_cache,
                    he_router,
                    limits,
                })?;
                if router.services().is_empty() {
                    return Err(Error::Config(
                        "nothing to serve: give filter_state=DIR and/or he_state=DIR (or \
                         he_router=DIR with he_shards=[...])"
                            .into(),
                    ));
                }
                let services = router
                    .services()
                    .iter()
                    .map(|s| (s.name().to_string(), s.describe()))
                    .collect();
                let router = Arc::new(router);
                let runtime = runtime()?;
                let bind = |addr: &Option<String>| -> Result<Option<Listener>, Error> {
                    let Some(addr) = addr else { return Ok(None) };
                    let bound = Listener::bind(addr, tls.as_ref(), net_limits);
                    Ok(Some(runtime.block_on(bound)?))
                };
                let tcp = bind(&listen)?;
                let ws = bind(&ws_listen)?.map(|l| l.websocket(origins));
                let addr_of = |l: &Option<Listener>| -> Result<Option<String>, Error> {
                    Ok(match l {
                        Some(l) => Some(l.local_addr()?.to_string()),
                        None => None,
                    })
                };
                let addrs = (addr_of(&tcp)?, addr_of(&ws)?);
                let listeners: Vec<Listener> = tcp.into_iter().chain(ws).collect();
                let task = match listeners.is_empty() {
                    false => runtime.spawn(router.clone().run(listeners)),
                    true => {
                        let watch = router.clone().watch();
                        runtime.spawn(async move {
                            watch.await;
                            Ok(())
                        })
                    }
                };
                Ok((addrs, services, router, Running { runtime, task }))
            })
            .py_err()?;
        let (addr, ws_addr) = addrs;
        Ok(Server {
            addr,
            ws_addr,
            router,
            limits: net_limits,
            services,
            running: Mutex::new(Some(running)),
        })
    }

    /// Answers a client's request bytes (one or more whole requests, as a
    /// message-level client's `step` returned them) and returns the bytes
    /// to give back to it. A bad request is answered with the error the
    /// client's next `step` raises. Each call stands alone, like a fresh
    /// connection; query budgets apply only to clients on the port.
    fn respond<'py>(&self, py: Python<'py>, request: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let handle = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.runtime.handle().clone()))
            .ok_or_else(|| errors::input("the server is closed"))?;
        let answer = py.detach(|| handle.block_on(self.router.respond(request, self.limits)));
        Ok(PyBytes::new(py, &answer))
    }

    /// The `host:port` the server listens on (the port chosen when
    /// listening on port 0); `None` when it serves only through `respond`.
    #[getter]
    fn addr(&self) -> Option<String> {
        self.addr.clone()
    }

    /// The WebSocket listener's `host:port` (`ws_listen=`), for web pages.
    #[getter]
    fn ws_addr(&self) -> Option<String> {
        self.ws_addr.clone()
    }

    /// `(name, description)` of each service served.
    #[getter]
    fn services(&self) -> Vec<(String, String)> {
        self.services.clone()
    }

    /// Whether the server still serves.
    #[getter]
    fn running(&self) -> bool {
        self.running.lock().map(|r| r.is_some()).unwrap_or(false)
    }

    /// Stops serving: no new connections, open ones are closed. Idempotent.
    fn close(&self, py: Python<'_>) {
        let running = self.running.lock().ok().and_then(|mut r| r.take());
        if let Some(running) = running {
            py.detach(|| running.stop());
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.services.iter().map(|(n, _)| n.as_str()).collect();
        format!(
            "Server(addr={:?}, services={:?}, running={})",
            self.addr,
            names,
            self.running()
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(running) = self.running.get_mut().ok().and_then(Option::take) {
            running.stop();
        }
    }
}
