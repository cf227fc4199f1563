//! Network settings from Python keyword arguments: transport limits, TLS
//! files, a server's address and a two-party peer (as the CLI's
//! `NetArgs`, `ClientTlsArgs`, `ServerTlsArgs` and `--listen/--connect`).

use std::path::PathBuf;
use std::time::Duration;

use psikit_protocols::common::connect::{ClientTlsFiles, Peer, ServerAddr, ServerTlsFiles};
use psikit_protocols::common::Limits;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

/// `timeout` (seconds to wait for a message) and `max_message_mib` (the
/// largest single message accepted), the CLI's defaults being 60 and 16.
pub fn limits(timeout: f64, max_message_mib: u32) -> PyResult<Limits> {
    let t = seconds(timeout, "timeout")?;
    let bytes = max_message_mib
        .checked_mul(1 << 20)
        .ok_or_else(|| errors::input("max_message_mib is too large"))?;
    Ok(Limits {
        max_frame_bytes: bytes,
        read_timeout: t,
        write_timeout: t,
    })
}

/// A positive, finite number of seconds given as the argument `name`.
pub fn seconds(value: f64, name: &str) -> PyResult<Duration> {
    match value.is_finite() && value > 0.0 && value < 1e12 {
        true => Ok(Duration::from_secs_f64(value)),
        false => Err(errors::input(format!(
            "{name} must be a positive number of seconds"
        ))),
    }
}

/// A client's TLS settings from a `tls` dict: `ca` (enables TLS),
/// `server_name`, `client_cert` and `client_key`.
pub fn client_tls(tls: Option<&Bound<'_, PyDict>>) -> PyResult<Option<ClientTlsFiles>> {
    let Some(tls) = tls else { return Ok(None) };
    let get = |name: &str| -> PyResult<Option<PathBuf>> {
        match tls.get_item(name)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let ca = get("ca")?.ok_or_else(|| errors::input("tls needs 'ca' (the server's CA, PEM)"))?;
    let server_name = match tls.get_item("server_name")? {
        Some(v) if !v.is_none() => Some(v.extract::<String>()?),
        _ => None,
    };
    let client_cert = match (get("client_cert")?, get("client_key")?) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => {
            return Err(errors::input(
                "tls: give both 'client_cert' and 'client_key', or neither",
            ))
        }
    };
    Ok(Some(ClientTlsFiles {
        server_ca: ca,
        server_name,
        client_cert,
    }))
}

/// A server's TLS settings from a `tls` dict: `cert`, `key` and optional
/// `client_ca` (mutual TLS).
pub fn server_tls(tls: Option<&Bound<'_, PyDict>>) -> PyResult<Option<ServerTlsFiles>> {
    let Some(tls) = tls else { return Ok(None) };
    let get = |name: &str| -> PyResult<Option<PathBuf>> {
        match tls.get_item(name)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let (Some(cert), Some(key)) = (get("cert")?, get("key")?) else {
        return Err(errors::input(
            "a listening party's tls needs 'cert' and 'key' (PEM files)",
        ));
    };
    Ok(Some(ServerTlsFiles {
        cert_chain: cert,
        private_key: key,
        client_ca: get("client_ca")?,
    }))
}

pub fn server(
    addr: String,
    tls: Option<&Bound<'_, PyDict>>,
    limits: Limits,
) -> PyResult<ServerAddr> {
    Ok(ServerAddr {
        addr,
        tls: client_tls(tls)?,
        limits,
    })
}

/// `listen` or `connect`, exactly one.
pub fn peer(
    listen: Option<String>,
    connect: Option<String>,
    accept_timeout: Option<f64>,
    tls: Option<&Bound<'_, PyDict>>,
    limits: Limits,
) -> PyResult<Peer> {
    match (listen, connect) {
        (Some(addr), None) => {
            let accept_timeout = match accept_timeout {
                Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
                Some(_) => {
                    return Err(errors::input(
                        "accept_timeout must be a positive number of seconds",
                    ))
                }
                None => None,
            };
            Ok(Peer::Listen {
                addr,
                tls: server_tls(tls)?,
                limits,
                accept_timeout,
            })
        }
        (None, Some(addr)) => {
            if accept_timeout.is_some() {
                return Err(errors::input("accept_timeout goes with listen="));
            }
            Ok(Peer::Connect(server(addr, tls, limits)?))
        }
        _ => Err(errors::input(
            "give exactly one of listen=ADDR or connect=ADDR",
        )),
    }
}

/// The listening callback of a two-party run: `on_listening(addr)` in
/// Python, its exception reported as unraisable (the run goes on).
pub fn announce(on_listening: &Option<Py<PyAny>>) -> impl Fn(&str) + '_ {
    move |addr: &str| {
        if let Some(cb) = on_listening {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (addr,)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}
