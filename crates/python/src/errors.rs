//! The exception hierarchy: `PsikitError` and one subclass per kind of
//! failure a caller handles differently. Each carries the one line the CLI
//! prints after `psikit: error:` (the error and its causes, each said once).

use psikit_protocols::{one_line, Error};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::PyErr;

create_exception!(
    psikit,
    PsikitError,
    PyException,
    "Base class of every error psikit raises."
);
create_exception!(
    psikit,
    InputError,
    PsikitError,
    "Bad input or arguments: a missing or ambiguous column, a key too long, \
     an unknown normalisation option, a state directory in use or of the wrong kind."
);
create_exception!(
    psikit,
    ProtocolError,
    PsikitError,
    "The network or the peer failed: connection refused or closed, a timeout, \
     a malformed or unexpected message, a peer running other settings or aborting."
);
create_exception!(
    psikit,
    StaleFilterError,
    ProtocolError,
    "The server's filter (or HE database) changed while the client queried; sync (or fetch the parameters) and retry."
);
create_exception!(
    psikit,
    ParametersError,
    PsikitError,
    "Protocol parameters that are malformed, insecure or unusable (HE parameters, \
     filter settings)."
);

/// The Python exception for a protocols error.
pub fn to_py(e: Error) -> PyErr {
    let msg = one_line(&e);
    if e.is_stale() {
        return StaleFilterError::new_err(msg);
    }
    match e {
        Error::Input(_) | Error::Config(_) | Error::Misuse(_) | Error::Job(_) => {
            InputError::new_err(msg)
        }
        Error::Params(_) | Error::Filter(_) | Error::He(_) => ParametersError::new_err(msg),
        Error::Transport(_)
        | Error::Decode(_)
        | Error::Oprf(_)
        | Error::Ot(_)
        | Error::Okvs(_)
        | Error::Aborted(_)
        | Error::Peer(_)
        | Error::DigestMismatch
        | Error::Unsupported(_)
        | Error::StaleFilter { .. }
        | Error::StaleDatabase
        | Error::ShardUnavailable { .. } => ProtocolError::new_err(msg),
        // A job is cancelled only by its `progress::Reporter`, which raises
        // what stopped it instead.
        Error::Io { .. }
        | Error::StateFile(_)
        | Error::Task { .. }
        | Error::Internal(_)
        | Error::Cancelled => PsikitError::new_err(msg),
    }
}

/// A bad argument found by the bindings themselves.
pub fn input(msg: impl Into<String>) -> PyErr {
    InputError::new_err(msg.into())
}

/// `Result<T, Error>` into a `PyResult<T>`.
pub trait IntoPy<T> {
    fn py_err(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}
