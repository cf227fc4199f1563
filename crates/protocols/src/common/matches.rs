//! The result vocabulary of the querying protocols.

/// One item of the querying party's input that the other party holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    /// Position of the item in the querying party's input.
    pub index: usize,
    /// Its label, for protocols and databases that carry labels.
    pub label: Option<Vec<u8>>,
}
