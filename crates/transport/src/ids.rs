//! The one table of protocol ids: the `protocol` byte of every
//! [`crate::frame::Frame`]. Each protocol family takes one id here and defines its
//! message kinds itself; a server routes frames by this byte. Ids are part
//! of the wire format: never renumber one, only add.

/// A protocol family's id on the wire.
pub type ProtocolId = u8;

/// Frames not tied to a protocol (a server refusing a connection).
pub const CONNECTION: ProtocolId = 0;
/// Unbalanced PSI from a DH OPRF with an updatable cuckoo filter.
pub const FILTER_PSI: ProtocolId = 1;
/// Unbalanced labeled PSI from homomorphic encryption (APSI design).
pub const HE_PSI: ProtocolId = 2;
/// The OT layer's own messages (base OT, OT extension), inside the
/// two-party protocols that use it.
pub const OT: ProtocolId = 3;
/// Malicious-secure PSI from OT extension and garbled Bloom filters.
pub const RR16: ProtocolId = 4;
/// Circuit PSI and its applications (Pinkas et al. framework with EPC).
pub const CIRCUIT_PSI: ProtocolId = 5;
/// Balanced PSI from silent VOLE and an OKVS (Raghuraman-Rindal 2022).
pub const VOLE_PSI: ProtocolId = 6;
/// A long two-party job's own messages (its terms, the buckets both sides
/// committed, the start of each bucket) around the runs of a balanced
/// protocol, one per bucket.
pub const JOB: ProtocolId = 7;

/// A protocol id's short name in lower case, for metric labels and
/// structured logs.
pub fn label(id: ProtocolId) -> &'static str {
    match id {
        CONNECTION => "connection",
        FILTER_PSI => "filter",
        HE_PSI => "he",
        OT => "ot",
        RR16 => "rr16",
        CIRCUIT_PSI => "cpsi",
        VOLE_PSI => "vole",
        JOB => "job",
        _ => "unknown",
    }
}

/// A human name for a protocol id, for error messages.
pub fn name(id: ProtocolId) -> &'static str {
    match id {
        CONNECTION => "connection",
        FILTER_PSI => "filter PSI",
        HE_PSI => "HE PSI",
        OT => "oblivious transfer",
        RR16 => "RR16 PSI",
        CIRCUIT_PSI => "circuit PSI",
        VOLE_PSI => "VOLE PSI",
        JOB => "bucketed job",
        _ => "unknown protocol",
    }
}
