//! What both RR16 roles agree on: the configuration and its checks, and
//! the stage names.

use psikit_ot::{ExtConfig, Security};

use super::params::{Rr16Params, Search};

use crate::common::statistical;
use crate::error::Error;

/// The run's stages as both roles tell their `Progress`: the session (the
/// hello, coin toss, base OTs and hashing), the OT extension (one step per
/// chunk), the summary values.
pub(super) const STAGE_SESSION: &str = "base OTs";
pub(super) const STAGE_EXTENSION: &str = "OT extension";
pub(super) const STAGE_SUMMARIES: &str = "comparing summaries";

/// Protocol id of RR16's own messages.
pub const PROTOCOL_ID: u8 = super::messages::PROTOCOL_ID;

/// How to run the protocol. Both parties must agree on `malicious` and
/// `reveal_to_sender`.
#[derive(Debug, Clone)]
pub struct Rr16Config {
    /// Malicious security (KOS + cut-and-choose); `false` is the faster
    /// semi-honest variant.
    pub malicious: bool,
    /// Whether the receiver sends the intersection to the sender.
    pub reveal_to_sender: bool,
    /// Largest peer set accepted (bounds memory a peer can make us use).
    pub max_set_size: u64,
    /// Parameter search settings (security levels, chunk size).
    pub search: Search,
    /// Threads for the parallel parts; `None` uses rayon's global pool.
    pub threads: Option<usize>,
    /// How this party encodes its keys (`psikit_io::KeySpec::key_format`),
    /// compared with the peer's at the start; empty to skip the check.
    pub key_format: String,
}

impl Default for Rr16Config {
    fn default() -> Self {
        Self {
            malicious: true,
            reveal_to_sender: false,
            max_set_size: 1 << 24,
            search: Search::default(),
            threads: None,
            key_format: String::new(),
        }
    }
}

impl Rr16Config {
    pub(super) fn security(&self) -> Security {
        if self.malicious {
            Security::Malicious
        } else {
            Security::SemiHonest
        }
    }

    pub(super) fn ext_config(&self) -> Result<ExtConfig, Error> {
        match self.threads {
            None => Ok(ExtConfig::default()),
            Some(t) => ExtConfig::with_threads(t).map_err(|e| Error::Config(e.to_string())),
        }
    }

    /// σ of this run (`common::statistical`): the search's `λ`, which also
    /// sizes the summary values.
    pub(super) fn statistical_bits(&self) -> Result<u32, Error> {
        let sigma = self.search.lambda.ceil() as u32;
        statistical::check(sigma)?;
        Ok(sigma)
    }

    /// Parameters for a receiver set of `n` items in this mode.
    pub fn params_for(&self, n: u64) -> Result<Rr16Params, Error> {
        if self.malicious {
            Rr16Params::search(n.max(1), &self.search)
        } else {
            Rr16Params::semi_honest(n.max(1), &self.search)
        }
    }
}
