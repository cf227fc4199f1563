//! The error every part of the parameter code returns: a parameter set that
//! breaks a rule is `Error::Params`, with a message naming the field.

use crate::error::Error;

pub(super) type Result<T> = std::result::Result<T, Error>;

pub(super) fn invalid(message: impl Into<String>) -> Error {
    Error::Params(message.into())
}
