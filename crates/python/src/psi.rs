//! The balanced two-party PSIs through `common::two_party` (VOLE-PSI and
//! RR16 facades), as `psikit psi send|receive` runs them.

use psikit_protocols::common::connect::Peer;
use psikit_protocols::common::two_party::{self, TwoParty};
use psikit_protocols::memory;
use psikit_protocols::rr16::{facade::Rr16, Rr16Config};
use psikit_protocols::vole_psi::{facade::VolePsi, VoleConfig};
use psikit_protocols::Error;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{self, IntoPy};
use crate::input::{Loaded, Output, Source};
use crate::progress::Reporter;
use crate::{interrupt, net};

/// What a party learns from each family's outcomes.
pub trait Outcomes: TwoParty {
    fn revealed(out: &Self::SenderOutcome) -> Option<&[usize]>;
    fn matches(out: &Self::ReceiverOutcome) -> &[bool];
    fn sender_traffic(out: &Self::SenderOutcome) -> (u64, u64);
    fn receiver_traffic(out: &Self::ReceiverOutcome) -> (u64, u64);
}

impl Outcomes for VolePsi {
    fn revealed(out: &Self::SenderOutcome) -> Option<&[usize]> {
        out.revealed.as_deref()
    }
    fn matches(out: &Self::ReceiverOutcome) -> &[bool] {
        &out.matches
    }
    fn sender_traffic(out: &Self::SenderOutcome) -> (u64, u64) {
        (out.bytes_sent, out.bytes_received)
    }
    fn receiver_traffic(out: &Self::ReceiverOutcome) -> (u64, u64) {
        (out.bytes_sent, out.bytes_received)
    }
}

impl Outcomes for Rr16 {
    fn revealed(out: &Self::SenderOutcome) -> Option<&[usize]> {
        out.revealed.as_deref()
    }
    fn matches(out: &Self::ReceiverOutcome) -> &[bool] {
        &out.matches
    }
    fn sender_traffic(out: &Self::SenderOutcome) -> (u64, u64) {
        (out.bytes_sent, out.bytes_received)
    }
    fn receiver_traffic(out: &Self::ReceiverOutcome) -> (u64, u64) {
        (out.bytes_sent, out.bytes_received)
    }
}

/// One party's run: its output (the receiver always, the sender when the
/// intersection is revealed to it) and its traffic.
struct Run {
    output: Option<Output>,
    sent: u64,
    received: u64,
}

async fn run<P: Outcomes>(
    loaded: &Loaded,
    peer: &Peer,
    config: &P::Config,
    sending: bool,
    with_fields: bool,
    listening: impl FnOnce(&str) + Send,
    progress: &Reporter,
) -> Result<Run, Error> {
    if sending {
        let out = two_party::send::<P>(peer, &loaded.keys, config, listening, progress).await?;
        let (sent, received) = P::sender_traffic(&out);
        let output = sender_output::<P>(loaded, &out, with_fields);
        Ok(Run {
            output,
            sent,
            received,
        })
    } else {
        let out = two_party::receive::<P>(peer, &loaded.keys, config, listening, progress).await?;
        let (sent, received) = P::receiver_traffic(&out);
        Ok(Run {
            output: Some(loaded.output_matches(P::matches(&out), with_fields)),
            sent,
            received,
        })
    }
}

/// The sender's rows the receiver reported, when the run revealed them.
pub fn sender_output<P: Outcomes>(
    loaded: &Loaded,
    out: &P::SenderOutcome,
    with_fields: bool,
) -> Option<Output> {
    P::revealed(out).map(|revealed| {
        let mut matches = vec![false; loaded.keys.len()];
        for &i in revealed {
            if let Some(m) = matches.get_mut(i) {
                *m = true;
            }
        }
        loaded.output_matches(&matches, with_fields)
    })
}

/// Runs one party of a balanced PSI (see `psikit.psi.send` / `receive`),
/// telling `progress` its stages. Returns a dict with `output` (`None` for
/// a sender without reveal).
#[pyfunction]
#[pyo3(signature = (role, source, protocol="vole", listen=None, connect=None, malicious=false,
    reveal=false, max_peer_items=1<<24, accept_timeout=None, timeout=60.0, max_message_mib=16,
    tls=None, on_listening=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn psi_run<'py>(
    py: Python<'py>,
    role: &str,
    source: &Source,
    protocol: &str,
    listen: Option<String>,
    connect: Option<String>,
    malicious: bool,
    reveal: bool,
    max_peer_items: u64,
    accept_timeout: Option<f64>,
    timeout: f64,
    max_message_mib: u32,
    tls: Option<&Bound<'py, PyDict>>,
    on_listening: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let sending = sending(role)?;
    let limits = net::limits(timeout, max_message_mib)?;
    let peer = net::peer(listen, connect, accept_timeout, tls, limits)?;
    // One big job: freed memory is reused while it runs, as the CLI's
    // one-shot commands reuse it (declared before the data, so the data's
    // big vectors are freed before the allocator's settings come back).
    let _reuse = memory::reuse_freed_memory_during();
    let key_format = source.spec().key_format();
    let with_fields = source.is_csv();
    let reporter = Reporter::new(progress);
    let reporter = &reporter;
    let listening = |addr: &str| {
        if let Some(cb) = &on_listening {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (addr,)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    };
    let done = match protocol {
        "vole" => {
            let config = VoleConfig {
                malicious,
                reveal_to_sender: reveal,
                max_set_size: max_peer_items,
                key_format,
                ..VoleConfig::default()
            };
            let loaded = py.detach(|| source.load()).py_err()?;
            let party = run::<VolePsi>(
                &loaded,
                &peer,
                &config,
                sending,
                with_fields,
                listening,
                reporter,
            );
            interrupt::run_reporting(py, reporter, party)
        }
        "rr16" => {
            let config = Rr16Config {
                malicious,
                reveal_to_sender: reveal,
                max_set_size: max_peer_items,
                key_format,
                ..Rr16Config::default()
            };
            let loaded = py.detach(|| source.load()).py_err()?;
            let party = run::<Rr16>(
                &loaded,
                &peer,
                &config,
                sending,
                with_fields,
                listening,
                reporter,
            );
            interrupt::run_reporting(py, reporter, party)
        }
        other => {
            return Err(errors::input(format!(
                "protocol must be \"vole\" or \"rr16\", got {other:?}"
            )))
        }
    }?;
    let d = PyDict::new(py);
    d.set_item("output", done.output.map(|o| o.into_py(py)).transpose()?)?;
    d.set_item("bytes_sent", done.sent)?;
    d.set_item("bytes_received", done.received)?;
    Ok(d)
}

/// Whether `role` is the sender's (`"send"`) or the receiver's
/// (`"receive"`).
pub fn sending(role: &str) -> PyResult<bool> {
    match role {
        "send" => Ok(true),
        "receive" => Ok(false),
        other => Err(errors::input(format!(
            "role must be \"send\" or \"receive\", got {other:?}"
        ))),
    }
}
