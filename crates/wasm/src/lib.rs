//! psikit in a web page: the filter protocol's client compiled to
//! WebAssembly.
//!
//! Everything the protocol computes runs here, in the same Rust as the
//! CLI's and Python's client: the key normalisation and encoding
//! (`psikit_io`), the RFC 9497 OPRF's blinding and finalization, the
//! cuckoo filter, its deltas and their digest checks, and the query's
//! policy (sync first, refuse a server whose keys are encoded otherwise,
//! sync again and retry once when the server updated in between). The
//! page's JavaScript (`web/psikit/`) only carries bytes, over a WebSocket
//! to `psikit serve --ws-listen`, and keeps the filter in IndexedDB.
//!
//! A query is a sans-IO party ([`Query`]): push the server's bytes in,
//! take the client's bytes out, until it finishes.

mod items;
mod selftest;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

use psikit_protocols::common::{Limits, Stepper};
use psikit_protocols::filter_psi::{query_stepper, ClientQuery, FilterClient, SyncKind};
use psikit_protocols::{one_line, Error, Progress};
use wasm_bindgen::prelude::*;

pub use items::Items;
pub use selftest::{failure as self_test_failure, self_test};

/// A client of one filter server: its copy of the server's filter, kept
/// current by each query.
#[wasm_bindgen]
pub struct Client {
    /// `None` while a query has it; the query gives it back when done.
    home: Rc<RefCell<Option<FilterClient>>>,
    discarded: Option<String>,
}

#[wasm_bindgen]
impl Client {
    /// A client starting from `saved` (what [`Client::saved`] gave after
    /// an earlier query, `undefined` for a first visit). A damaged copy is
    /// set aside ([`Client::discarded`]) and the filter downloaded again.
    /// The server may make the client download and hold at most
    /// `max_filter_mib` MiB.
    #[wasm_bindgen(constructor)]
    pub fn new(saved: Option<Vec<u8>>, max_filter_mib: u32) -> Client {
        let client = FilterClient::from_saved(saved.as_deref(), u64::from(max_filter_mib) << 20);
        Client {
            discarded: client.discarded_cache().map(str::to_owned),
            home: Rc::new(RefCell::new(Some(client))),
        }
    }

    /// Why the saved filter could not be used, if it was damaged.
    #[wasm_bindgen(getter)]
    pub fn discarded(&self) -> Option<String> {
        self.discarded.clone()
    }

    /// The filter to store for the next visit (integrity-checked when
    /// loaded again); `undefined` before the first sync.
    pub fn saved(&self) -> Result<Option<Vec<u8>>, JsError> {
        let home = self.home.borrow();
        let client = home.as_ref().ok_or_else(busy)?;
        Ok(client.saved())
    }

    /// Starts a query of `items`: drive it with [`Query::advance`].
    pub fn query(&self, items: &Items) -> Result<Query, JsError> {
        let client = self.home.borrow_mut().take().ok_or_else(busy)?;
        let client = client.with_key_format(items.key_format());
        let download = Arc::new(Download::default());
        let keys = items.keys().to_vec();
        // psikit's default frame limit: a sync body comes in chunks far
        // below it.
        let limits = Limits::default();
        Ok(Query {
            stepper: Some(query_stepper(client, keys, limits, download.clone())),
            home: self.home.clone(),
            outcome: None,
            download,
        })
    }
}

fn busy() -> JsError {
    JsError::new("this client is already running a query")
}

/// How far the filter's download is: bytes received of the total (0 of
/// 0 before a download starts), for a progress bar. The query's other
/// stages (sync, query) have no total and leave it as it is.
#[derive(Default)]
struct Download {
    received: AtomicU64,
    total: AtomicU64,
}

impl Progress for Download {
    fn stage(&self, _: &str, total: Option<u64>) {
        if let Some(total) = total {
            self.received.store(0, Ordering::Relaxed);
            self.total.store(total, Ordering::Relaxed);
        }
    }

    fn advance(&self, done: u64) {
        self.received.store(done, Ordering::Relaxed);
    }
}

/// One query in flight: a sans-IO party. Send what
/// [`Query::take_outgoing`] gives to the server, push what it answers,
/// and call [`Query::advance`] until it returns `true`.
#[wasm_bindgen]
pub struct Query {
    stepper: Option<Stepper<(FilterClient, Result<ClientQuery, Error>)>>,
    home: Rc<RefCell<Option<FilterClient>>>,
    outcome: Option<Result<ClientQuery, Error>>,
    download: Arc<Download>,
}

#[wasm_bindgen]
impl Query {
    /// Bytes of the filter (or its changes) downloaded so far.
    #[wasm_bindgen(getter)]
    pub fn downloaded(&self) -> f64 {
        self.download.received.load(Ordering::Relaxed) as f64
    }

    /// The download's size once it started (0 before, and when the filter
    /// was up to date).
    #[wasm_bindgen(getter, js_name = downloadTotal)]
    pub fn download_total(&self) -> f64 {
        self.download.total.load(Ordering::Relaxed) as f64
    }

    /// Bytes the server sent, in order, split anyhow.
    pub fn push(&mut self, bytes: &[u8]) {
        if let Some(s) = self.stepper.as_mut() {
            s.push(bytes);
        }
    }

    /// The server closed the connection.
    #[wasm_bindgen(js_name = peerClosed)]
    pub fn peer_closed(&mut self) {
        if let Some(s) = self.stepper.as_mut() {
            s.peer_closed();
        }
    }

    /// The bytes to send to the server now.
    #[wasm_bindgen(js_name = takeOutgoing)]
    pub fn take_outgoing(&mut self) -> Vec<u8> {
        self.stepper
            .as_mut()
            .map(Stepper::take_outgoing)
            .unwrap_or_default()
    }

    /// Runs the client until it waits for the server (`false`) or is done
    /// (`true`: read [`Query::result`]). The client goes back to its
    /// [`Client`] when done, its filter synced, also after an error.
    pub fn advance(&mut self) -> bool {
        let Some(stepper) = self.stepper.as_mut() else {
            return true;
        };
        match stepper.advance() {
            Poll::Pending => false,
            Poll::Ready((client, outcome)) => {
                *self.home.borrow_mut() = Some(client);
                self.outcome = Some(outcome);
                self.stepper = None;
                true
            }
        }
    }

    /// What the query found; an error with the reason in one line (the
    /// server's own message when it refused the query).
    pub fn result(&mut self) -> Result<QueryResult, JsError> {
        match self.outcome.take() {
            None => Err(JsError::new("the query has not finished")),
            Some(Err(e)) => Err(JsError::new(&one_line(&e))),
            Some(Ok(done)) => Ok(QueryResult { done }),
        }
    }
}

/// A finished query.
#[wasm_bindgen]
pub struct QueryResult {
    done: ClientQuery,
}

#[wasm_bindgen]
impl QueryResult {
    /// For each item, 1 if the server holds it (up to the filter's false
    /// positive rate, 2^-30 per item by default), else 0.
    pub fn matches(&self) -> Vec<u8> {
        (self.done.outcome.matches.iter())
            .map(|&m| u8::from(m))
            .collect()
    }

    /// How the last sync brought the filter up to date: `"full"`,
    /// `"delta"` or `"up-to-date"`.
    #[wasm_bindgen(getter, js_name = syncKind)]
    pub fn sync_kind(&self) -> String {
        let kind = self.done.syncs.last().map(|s| s.kind);
        match kind {
            Some(SyncKind::Full) => "full",
            Some(SyncKind::Delta) => "delta",
            Some(SyncKind::UpToDate) | None => "up-to-date",
        }
        .to_owned()
    }

    /// Whether a sync changed the filter (store [`Client::saved`] again).
    #[wasm_bindgen(getter, js_name = filterChanged)]
    pub fn filter_changed(&self) -> bool {
        (self.done.syncs.iter()).any(|s| s.kind != SyncKind::UpToDate)
    }

    /// The filter's epoch after the query's syncs.
    #[wasm_bindgen(getter)]
    pub fn epoch(&self) -> f64 {
        self.done.syncs.last().map_or(0.0, |s| s.epoch as f64)
    }

    /// Bytes of filter data (full filter or delta) the syncs downloaded.
    #[wasm_bindgen(getter, js_name = filterBytes)]
    pub fn filter_bytes(&self) -> f64 {
        self.done.syncs.iter().map(|s| s.body_bytes as f64).sum()
    }

    /// Bytes the query's requests sent and received (the syncs apart).
    #[wasm_bindgen(getter, js_name = queryBytesSent)]
    pub fn query_bytes_sent(&self) -> f64 {
        self.done.outcome.bytes_sent as f64
    }

    #[wasm_bindgen(getter, js_name = queryBytesReceived)]
    pub fn query_bytes_received(&self) -> f64 {
        self.done.outcome.bytes_received as f64
    }

    /// Milliseconds spent blinding and finalizing (the client's own OPRF
    /// work), and waiting for the server's answers.
    #[wasm_bindgen(getter, js_name = blindMs)]
    pub fn blind_ms(&self) -> f64 {
        self.done.outcome.blind_time.as_secs_f64() * 1e3
    }

    #[wasm_bindgen(getter, js_name = finalizeMs)]
    pub fn finalize_ms(&self) -> f64 {
        self.done.outcome.finalize_time.as_secs_f64() * 1e3
    }

    #[wasm_bindgen(getter, js_name = roundTripMs)]
    pub fn round_trip_ms(&self) -> f64 {
        self.done.outcome.round_trip_time.as_secs_f64() * 1e3
    }
}
