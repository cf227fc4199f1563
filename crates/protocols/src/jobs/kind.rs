//! What a job runs on each bucket, as the hello states it and the job
//! directory records it: a balanced PSI (the matched rows) or, with the
//! `cpsi` feature, circuit PSI's cardinality, sums or threshold, whose
//! per-bucket shares are added up and opened once over the whole job.

use psikit_transport::{DecodeError, Reader, Writer};

use crate::balanced::{Protocol, Settings};
use crate::common::two_party::{mode_refusal, protocol_refusal, Mode, Refusal};
#[cfg(feature = "cpsi")]
use crate::cpsi::{self, App, CpsiConfig};
use crate::error::Error;

/// How a front end runs a job's buckets.
#[derive(Clone, Debug)]
pub enum JobProtocol {
    /// A balanced PSI (`max_peer_items` is replaced by the peer's bucket
    /// capacity).
    Balanced(Settings),
    /// Circuit PSI's cardinality, sums or threshold over the whole job,
    /// each bucket's shares, or the union (`max_set_size` is replaced by
    /// the peer's bucket capacity). Each
    /// party's input brings `value_columns` (its
    /// `psikit_io::KeySpec::value_columns`, for sums).
    #[cfg(feature = "cpsi")]
    Circuit {
        config: CpsiConfig,
        value_columns: u8,
    },
}

impl JobProtocol {
    /// The terms the hello states.
    pub(crate) fn kind(&self) -> JobKind {
        match self {
            JobProtocol::Balanced(s) => JobKind::Balanced {
                protocol: s.protocol,
                mode: Mode {
                    malicious: s.malicious,
                    low_comm: s.low_comm,
                    reveal: s.reveal,
                },
            },
            #[cfg(feature = "cpsi")]
            JobProtocol::Circuit {
                config,
                value_columns,
            } => JobKind::Circuit {
                terms: config.agreed(),
                value_columns: *value_columns,
            },
        }
    }

    /// What runs, in the flags' words (e.g. `VOLE-PSI (semi-honest)`).
    pub fn describe(&self) -> String {
        self.kind().describe()
    }

    /// This side's key encoding.
    pub(crate) fn key_format(&self) -> &str {
        match self {
            JobProtocol::Balanced(s) => &s.key_format,
            #[cfg(feature = "cpsi")]
            JobProtocol::Circuit { config, .. } => &config.key_format,
        }
    }

    /// Refuses what a job cannot run: a protocol this build lacks, or a
    /// mode it does not have.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match self {
            JobProtocol::Balanced(s) => {
                s.protocol.require_built()?;
                s.check()
            }
            #[cfg(feature = "cpsi")]
            JobProtocol::Circuit { .. } => Ok(()),
        }
    }
}

/// A job's roles are circuit PSI's: the sender holds the simple table, the
/// receiver the cuckoo table.
#[cfg(feature = "cpsi")]
impl From<crate::balanced::Role> for cpsi::Role {
    fn from(role: crate::balanced::Role) -> Self {
        match role {
            crate::balanced::Role::Sender => cpsi::Role::Sender,
            crate::balanced::Role::Receiver => cpsi::Role::Receiver,
        }
    }
}

#[cfg(feature = "cpsi")]
impl From<cpsi::Role> for crate::balanced::Role {
    fn from(role: cpsi::Role) -> Self {
        match role {
            cpsi::Role::Sender => crate::balanced::Role::Sender,
            cpsi::Role::Receiver => crate::balanced::Role::Receiver,
        }
    }
}

/// A job's protocol and its terms, as both parties must state them alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Balanced {
        protocol: Protocol,
        mode: Mode,
    },
    /// Circuit PSI with `terms`; `value_columns` is this side's own (the
    /// two sides' may differ).
    #[cfg(feature = "cpsi")]
    Circuit {
        terms: cpsi::Agreed,
        value_columns: u8,
    },
}

impl JobKind {
    /// `protocol id | terms`: a balanced protocol's id and its mode, or
    /// circuit PSI's id, its terms and this side's value columns.
    pub(crate) fn write(&self, w: &mut Writer) {
        match self {
            JobKind::Balanced { protocol, mode } => {
                w.u8(protocol.id());
                mode.write(w);
            }
            #[cfg(feature = "cpsi")]
            JobKind::Circuit {
                terms,
                value_columns,
            } => {
                w.u8(psikit_transport::ids::CIRCUIT_PSI);
                terms.write(w);
                w.u8(*value_columns);
            }
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let id = r.u8("protocol")?;
        if let Some(protocol) = Protocol::of_id(id) {
            let mode = Mode::read(r)?;
            return Ok(JobKind::Balanced { protocol, mode });
        }
        match id {
            #[cfg(feature = "cpsi")]
            psikit_transport::ids::CIRCUIT_PSI => {
                let terms = cpsi::Agreed::read(r)?;
                let value_columns = r.u8("value columns")?;
                if usize::from(value_columns) > cpsi::MAX_VALUE_COLUMNS {
                    return Err(DecodeError::invalid("value columns", value_columns));
                }
                Ok(JobKind::Circuit {
                    terms,
                    value_columns,
                })
            }
            other => Err(DecodeError::invalid("protocol", other)),
        }
    }

    /// The value columns this side brings (circuit PSI's sums).
    pub(crate) fn value_columns(&self) -> u8 {
        match self {
            JobKind::Balanced { .. } => 0,
            #[cfg(feature = "cpsi")]
            JobKind::Circuit { value_columns, .. } => *value_columns,
        }
    }

    /// The protocol and its terms in the flags' words.
    pub(crate) fn describe(&self) -> String {
        match self {
            JobKind::Balanced { protocol, mode } => format!(
                "{} ({}{}{})",
                protocol.name(),
                if mode.malicious {
                    "malicious"
                } else {
                    "semi-honest"
                },
                if mode.low_comm { ", --low-comm" } else { "" },
                if mode.reveal { ", --reveal" } else { "" }
            ),
            #[cfg(feature = "cpsi")]
            JobKind::Circuit {
                terms: t,
                value_columns,
            } => {
                let mut s = format!("circuit PSI {}", t.app.name());
                if let App::Threshold(n) = t.app {
                    s += &format!(" --threshold {n}");
                }
                s += &format!(" (--ot {} --epc {} --reveal-to {}", t.ot, t.epc, t.reveal);
                if t.min_intersection > 0 {
                    s += &format!(" --min-intersection {}", t.min_intersection);
                }
                if t.product_bits > 0 {
                    s += &format!(" --inner-product --product-bits {}", t.product_bits);
                }
                s + &format!(", {value_columns} value column(s))")
            }
        }
    }
}

/// The refusal of a peer whose job differs from ours, in both sides'
/// terms; none when both run the same protocol on the same terms.
pub(crate) fn kind_refusal(theirs: &JobKind, ours: &JobKind) -> Option<Refusal> {
    match (theirs, ours) {
        (
            JobKind::Balanced {
                protocol: p,
                mode: m,
            },
            JobKind::Balanced {
                protocol: q,
                mode: n,
            },
        ) => protocol_refusal(*p, *q).or_else(|| mode_refusal(*m, *n)),
        #[cfg(feature = "cpsi")]
        (JobKind::Circuit { terms: a, .. }, JobKind::Circuit { terms: b, .. }) => {
            let (here, there) = (b.differences(a), a.differences(b));
            (!here.is_empty()).then(|| Refusal {
                here: here.join("; "),
                there: there.join("; "),
            })
        }
        #[cfg(feature = "cpsi")]
        _ => Some(Refusal {
            here: format!(
                "the peer runs {}, this side {}",
                theirs.describe(),
                ours.describe()
            ),
            there: format!(
                "the peer runs {}, this side {}",
                ours.describe(),
                theirs.describe()
            ),
        }),
    }
}
