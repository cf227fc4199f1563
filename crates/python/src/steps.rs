//! The message level: one party of a protocol as a sans-IO state machine
//! (`psikit_transport::Stepper`), bytes in and bytes out, for callers that
//! carry the messages over their own transport (see `psikit.psi.Party`,
//! `psikit.he.Query` and `psikit.filter.Query`; the server's side is
//! `Server.respond`). No sockets, no runtime, no timeouts: waiting is the
//! caller's business.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use psikit_protocols::balanced;
use psikit_protocols::common::Stepper;
use psikit_protocols::filter_psi;
use psikit_protocols::he_psi::facade as he_facade;
use psikit_protocols::{Error, NoProgress};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{self, to_py, IntoPy};
use crate::input::{Output, Source};
use crate::psi::role_of;
use crate::{filter, he, net, psi};

/// Builds a finished party's Python result; the work without the GIL is
/// done before.
pub(crate) type Finish = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyDict>> + Send>;

/// One call into the party: the peer's bytes (and whether it hung up) in;
/// this party's bytes out, and its end once reached.
pub(crate) type Drive =
    Box<dyn FnMut(&[u8], bool) -> (Vec<u8>, Option<Result<Finish, Error>>) + Send>;

/// Drives `stepper`; its outcome goes through `finish` (without the GIL)
/// once it ends.
pub(crate) fn drive<T: 'static>(
    mut stepper: Stepper<Result<T, Error>>,
    finish: impl FnOnce(T) -> Result<Finish, Error> + Send + 'static,
) -> Drive {
    let mut finish = Some(finish);
    Box::new(move |bytes: &[u8], closed: bool| {
        stepper.push(bytes);
        if closed {
            stepper.peer_closed();
        }
        if stepper.is_finished() {
            return (Vec::new(), None);
        }
        let end = match stepper.advance() {
            Poll::Ready(out) => finish.take().map(|f| out.and_then(f)),
            Poll::Pending => None,
        };
        (stepper.take_outgoing(), end)
    })
}

/// The result dict of a balanced PSI party: `{"output": ...}`, `None` for
/// a sender without reveal.
fn psi_output(output: Option<Output>) -> Finish {
    Box::new(move |py| {
        let d = PyDict::new(py);
        d.set_item("output", output.map(|o| o.into_py(py)).transpose()?)?;
        Ok(d.unbind())
    })
}

/// One party at the message level, made by [`psi_party`],
/// [`he_query_party`], [`filter_query_party`] or `cpsi::cpsi_party`: the
/// one message-level API of every family.
#[pyclass(module = "psikit._native")]
pub struct Party {
    drive: Mutex<Drive>,
    /// The party's result once it ended, or its error as the Python
    /// exception, kept so `result()` can be called again.
    end: Mutex<Option<PyResult<Py<PyDict>>>>,
}

impl Party {
    pub(crate) fn new(drive: Drive) -> Self {
        Self {
            drive: Mutex::new(drive),
            end: Mutex::new(None),
        }
    }
}

#[pymethods]
impl Party {
    /// Pushes the peer's bytes (empty to start), runs the party as far as
    /// it can go, and returns the bytes to deliver to the peer.
    #[pyo3(signature = (incoming=None, peer_closed=false))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        incoming: Option<&[u8]>,
        peer_closed: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let incoming = incoming.unwrap_or_default().to_vec();
        let (out, end) = py
            .detach(|| match self.drive.lock() {
                Ok(mut drive) => Ok(drive(&incoming, peer_closed)),
                Err(_) => Err(Error::Internal("an earlier step of this party panicked")),
            })
            .py_err()?;
        if let Some(end) = end {
            let kept = end.map_err(to_py).and_then(|finish| finish(py));
            if let Ok(mut slot) = self.end.lock() {
                *slot = Some(kept);
            }
        }
        Ok(PyBytes::new(py, &out))
    }

    /// Whether the party has finished (successfully or not).
    #[getter]
    fn done(&self) -> bool {
        self.end.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// The finished party's result dict; raises the party's error if it
    /// failed.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let slot = self
            .end
            .lock()
            .map_err(|_| to_py(Error::Internal("a step of this party panicked")))?;
        match &*slot {
            None => Err(errors::input("the party has not finished: keep stepping")),
            Some(Err(e)) => Err(e.clone_ref(py)),
            Some(Ok(d)) => Ok(d.bind(py).clone()),
        }
    }
}

/// One party of a balanced PSI (see `psikit.psi.Party`); its result is
/// `{"output": ...}`, `None` for a sender without reveal.
#[pyfunction]
#[pyo3(signature = (role, source, protocol="vole", malicious=false, reveal=false,
    max_peer_items=1<<24, max_message_mib=16, low_comm=false))]
#[allow(clippy::too_many_arguments)]
pub fn psi_party(
    py: Python<'_>,
    role: &str,
    source: &Source,
    protocol: &str,
    malicious: bool,
    reveal: bool,
    max_peer_items: u64,
    max_message_mib: u32,
    low_comm: bool,
) -> PyResult<Party> {
    let role = role_of(role)?;
    let limits = net::limits(60.0, max_message_mib)?;
    let key_format = source.spec().key_format();
    let mode = (malicious, low_comm);
    let settings = psi::settings(protocol, mode, reveal, max_peer_items, key_format)?;
    let csv = source.is_csv();
    let loaded = py.detach(|| source.load()).py_err()?;
    let stepper = balanced::stepper(role, loaded.keys.clone(), settings, limits);
    let drive = drive(stepper, move |out| {
        Ok(psi_output(psi::party_output(&loaded, &out, csv)))
    });
    Ok(Party::new(drive))
}

/// A query of an HE server (see `psikit.he.Query`); its result is the
/// dict `he_query` returns.
#[pyfunction]
#[pyo3(signature = (source, pad_to=None, label_names=Vec::new(), max_message_mib=16))]
pub fn he_query_party(
    py: Python<'_>,
    source: &Source,
    pad_to: Option<usize>,
    label_names: Vec<String>,
    max_message_mib: u32,
) -> PyResult<Party> {
    let limits = net::limits(60.0, max_message_mib)?;
    let options = he_facade::QueryOptions {
        pad_to,
        key_format: source.spec().key_format(),
    };
    let csv = source.is_csv();
    let loaded = py.detach(|| source.load()).py_err()?;
    let stepper = he_facade::query_stepper(loaded.keys.clone(), options, limits);
    Ok(Party::new(drive(stepper, move |session| {
        let (output, names) = he::query_output(&session, &loaded, csv, &label_names)?;
        Ok(Box::new(move |py: Python<'_>| {
            Ok(he::query_dict(py, output, names, &session)?.unbind())
        }))
    })))
}

/// A query of a filter server (see `psikit.filter.Query`), its filter kept
/// in `cache` when given; its result is the dict `filter_query` returns.
#[pyfunction]
#[pyo3(signature = (source, cache=None, max_filter_mib=4096, max_message_mib=16))]
pub fn filter_query_party(
    py: Python<'_>,
    source: &Source,
    cache: Option<PathBuf>,
    max_filter_mib: u64,
    max_message_mib: u32,
) -> PyResult<Party> {
    let limits = net::limits(60.0, max_message_mib)?;
    let client = filter::client(py, cache, None, max_filter_mib)?;
    let discarded = client.discarded_cache().map(str::to_owned);
    let csv = source.is_csv();
    let loaded = py.detach(|| source.load()).py_err()?;
    let stepper =
        filter_psi::query_stepper(client, loaded.keys.clone(), limits, Arc::new(NoProgress))
            .map(|(_, r)| r);
    Ok(Party::new(drive(stepper, move |done| {
        let output = loaded.output_matches(&done.outcome.matches, csv);
        Ok(Box::new(move |py: Python<'_>| {
            Ok(filter::query_dict(py, output, &done, discarded)?.unbind())
        }))
    })))
}
