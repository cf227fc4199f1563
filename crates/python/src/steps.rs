//! Message level of the two-party PSIs: one party as a sans-IO state
//! machine (`common::two_party::{sender,receiver}_stepper`), bytes in and
//! bytes out, for callers that carry the messages over their own transport
//! (see `psikit.psi.Party`). No sockets, no runtime, no timeouts: waiting
//! is the caller's business.

use std::sync::{Arc, Mutex};
use std::task::Poll;

use psikit_protocols::common::connect::Limits;
use psikit_protocols::common::two_party;
use psikit_protocols::rr16::{facade::Rr16, Rr16Config};
use psikit_protocols::vole_psi::{facade::VolePsi, VoleConfig};
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{self, to_py, IntoPy};
use crate::input::{Loaded, Output, Source};
use crate::net;
use crate::psi::{sender_output, Outcomes};

/// What a party's run gives: its output (the receiver always, the sender
/// with reveal), or why it failed.
type Finished = Result<Option<Output>, Error>;

/// A finished party as kept for `result()`: the error already as the
/// Python exception, so it can be raised again.
type Kept = Result<Option<Output>, PyErr>;

/// One call into the party: the peer's bytes (and whether it hung up) in;
/// this party's bytes out, and its end once reached.
type Drive = Box<dyn FnMut(&[u8], bool) -> (Vec<u8>, Option<Finished>) + Send>;

/// The party of `P` in `role`, driven by a closure that owns its stepper.
fn drive<P: Outcomes>(
    loaded: Arc<Loaded>,
    config: P::Config,
    sending: bool,
    csv: bool,
    limits: Limits,
) -> Drive {
    let keys = loaded.keys.clone();
    if sending {
        let mut st = two_party::sender_stepper::<P>(keys, config, limits);
        Box::new(move |bytes: &[u8], closed: bool| {
            st.push(bytes);
            if closed {
                st.peer_closed();
            }
            if st.is_finished() {
                return (Vec::new(), None);
            }
            let end = match st.advance() {
                Poll::Ready(out) => Some(out.map(|o| sender_output::<P>(&loaded, &o, csv))),
                Poll::Pending => None,
            };
            (st.take_outgoing(), end)
        })
    } else {
        let mut st = two_party::receiver_stepper::<P>(keys, config, limits);
        Box::new(move |bytes: &[u8], closed: bool| {
            st.push(bytes);
            if closed {
                st.peer_closed();
            }
            if st.is_finished() {
                return (Vec::new(), None);
            }
            let end = match st.advance() {
                Poll::Ready(out) => {
                    Some(out.map(|o| Some(loaded.output_matches(P::matches(&o), csv))))
                }
                Poll::Pending => None,
            };
            (st.take_outgoing(), end)
        })
    }
}

/// One party of a balanced PSI at the message level (see
/// `psikit.psi.Party`).
#[pyclass(module = "psikit._native", name = "PsiParty")]
pub struct PsiParty {
    drive: Mutex<Drive>,
    end: Mutex<Option<Kept>>,
}

#[pymethods]
impl PsiParty {
    #[new]
    #[pyo3(signature = (role, source, protocol="vole", malicious=false, reveal=false,
        max_peer_items=1<<24, max_message_mib=16))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        role: &str,
        source: &Source,
        protocol: &str,
        malicious: bool,
        reveal: bool,
        max_peer_items: u64,
        max_message_mib: u32,
    ) -> PyResult<Self> {
        let sending = match role {
            "send" => true,
            "receive" => false,
            other => {
                return Err(errors::input(format!(
                    "role must be \"send\" or \"receive\", got {other:?}"
                )))
            }
        };
        let limits = net::limits(60.0, max_message_mib)?;
        let key_format = source.spec().key_format();
        let csv = source.is_csv();
        let loaded = Arc::new(py.detach(|| source.load()).py_err()?);
        let drive = match protocol {
            "vole" => drive::<VolePsi>(
                loaded,
                VoleConfig {
                    malicious,
                    reveal_to_sender: reveal,
                    max_set_size: max_peer_items,
                    key_format,
                    ..VoleConfig::default()
                },
                sending,
                csv,
                limits,
            ),
            "rr16" => drive::<Rr16>(
                loaded,
                Rr16Config {
                    malicious,
                    reveal_to_sender: reveal,
                    max_set_size: max_peer_items,
                    key_format,
                    ..Rr16Config::default()
                },
                sending,
                csv,
                limits,
            ),
            other => {
                return Err(errors::input(format!(
                    "protocol must be \"vole\" or \"rr16\", got {other:?}"
                )))
            }
        };
        Ok(Self {
            drive: Mutex::new(drive),
            end: Mutex::new(None),
        })
    }

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
            if let Ok(mut slot) = self.end.lock() {
                *slot = Some(end.map_err(to_py));
            }
        }
        Ok(PyBytes::new(py, &out))
    }

    /// Whether the party has finished (successfully or not).
    #[getter]
    fn done(&self) -> bool {
        self.end.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// The finished party's result: a dict with `output` (`None` for a
    /// sender without reveal); raises the party's error if it failed.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let slot = self
            .end
            .lock()
            .map_err(|_| to_py(Error::Internal("a step of this party panicked")))?;
        match &*slot {
            None => Err(errors::input("the party has not finished: keep stepping")),
            Some(Err(e)) => Err(e.clone_ref(py)),
            Some(Ok(output)) => {
                let d = PyDict::new(py);
                d.set_item("output", output.clone().map(|o| o.into_py(py)).transpose()?)?;
                Ok(d)
            }
        }
    }
}
