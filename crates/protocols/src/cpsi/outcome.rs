//! What a run of circuit PSI gives a party: its output, what each step
//! cost, and the check that refuses an opened result no run can give.

use std::time::Duration;

use crate::error::{Error, Violation};

/// What a party learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Its shares, one per bin of the receiver's table.
    Shares(Shares),
    /// The intersection's size (`None` at a party that does not learn it).
    Cardinality(Option<u64>),
    Sum(Option<Sums>),
    /// The intersection is smaller than the agreed minimum (the value): no
    /// sum was revealed. Both parties learn this.
    SumWithheld(u64),
    /// Whether the intersection has at least the threshold's size.
    Threshold(Option<bool>),
    /// The receiver's items outside the intersection (at the sender).
    Union(Option<Vec<Vec<u8>>>),
}

/// One party's shares: membership bits per bin, and for each of the
/// sender's value columns additive shares mod 2^64 of the sender's value
/// in bins where it matched (garbage elsewhere, to be multiplied by the
/// membership).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shares {
    pub membership: super::bits::Bits,
    /// At the receiver: the index of the item in each bin.
    pub item_of_bin: Option<Vec<Option<u32>>>,
    /// Per sender value column, one share per bin.
    pub sender_values: Vec<Vec<u64>>,
}

/// The sum application's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sums {
    pub cardinality: u64,
    /// Per sender value column, its sum over the intersection.
    pub sender_values: Vec<u64>,
    /// Per receiver value column, its sum over the intersection.
    pub receiver_values: Vec<u64>,
    /// `Σ x·y` over the intersection (sender's first column times the
    /// receiver's), if asked for.
    pub inner_product: Option<u64>,
}

/// What a party learned and what each step cost.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub output: Output,
    pub phases: Phases,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Time and traffic (both directions, as this party counted them) of each
/// step.
#[derive(Clone, Copy, Debug, Default)]
pub struct Phases {
    pub hashing: Step,
    pub opprf: Step,
    /// Equality-preserving compression (zero when off).
    pub epc: Step,
    /// Base OTs and the OTs of the AND triples.
    pub triples: Step,
    /// The equality circuit's layers.
    pub equality: Step,
    pub application: Step,
    /// Where this party's silent extensions spent their time (the OPRF's
    /// VOLE, and the random OTs of the triples and of the equality test):
    /// base correlations, trees, code, the rest.
    pub silent: psikit_ot::silent::Times,
    /// Bins `M`, tag bits `ℓ`, and the bits the equality test compares
    /// (`ℓ`, or EPC's `ℓ_c`).
    pub bins: usize,
    pub tag_bits: u32,
    pub compared_bits: u32,
}

/// One step's time and bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Step {
    pub time: Duration,
    pub bytes: u64,
}

/// Measures the steps of a run in order.
pub(super) struct Meter {
    at: std::time::Instant,
    bytes: u64,
}

impl Meter {
    pub(super) fn start(ch: &psikit_transport::Channel) -> Self {
        Self {
            at: std::time::Instant::now(),
            bytes: ch.bytes_sent() + ch.bytes_received(),
        }
    }

    /// The step since the last mark.
    pub(super) fn mark(&mut self, ch: &psikit_transport::Channel) -> Step {
        let now = Self::start(ch);
        let step = Step {
            time: now.at - self.at,
            bytes: now.bytes - self.bytes,
        };
        *self = now;
        step
    }
}

/// Refuses an opened result that no run on sets of `sender` and
/// `receiver` items can give: semi-honest security promises no integrity,
/// but a flipped byte in a share must not print an intersection larger
/// than either set (or a union that drops items) as if it were true.
pub(super) fn check_opened(output: Output, sender: u64, receiver: u64) -> Result<Output, Error> {
    let most = sender.min(receiver);
    let count = match &output {
        Output::Cardinality(Some(c)) => Some(*c),
        Output::Sum(Some(s)) => Some(s.cardinality),
        _ => None,
    };
    if let Some(c) = count.filter(|&c| c > most) {
        return Err(Violation::Impossible(format!(
            "the intersection size opened to {c}, above the smaller set's {most} items"
        ))
        .into());
    }
    if let Output::Union(Some(items)) = &output {
        if items.len() as u64 > receiver {
            return Err(Violation::Impossible(format!(
                "the union brought {} items from a set of {receiver}",
                items.len()
            ))
            .into());
        }
    }
    Ok(output)
}

/// The run's outcome, with the traffic since `start` (bytes sent and
/// received when the run began).
pub(super) fn outcome(
    ch: &psikit_transport::Channel,
    output: Output,
    phases: Phases,
    start: (u64, u64),
) -> Outcome {
    Outcome {
        output,
        phases,
        bytes_sent: ch.bytes_sent() - start.0,
        bytes_received: ch.bytes_received() - start.1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_no_run_can_give_are_refused() {
        // A flipped share byte once printed 18,446,680,302,035,142,108
        // matches for two sets of 3,000 items.
        let huge = Output::Cardinality(Some(18_446_680_302_035_142_108));
        let err = check_opened(huge, 3000, 3000).unwrap_err();
        assert!(err.to_string().contains("above the smaller set"), "{err}");
        assert!(check_opened(Output::Cardinality(Some(11)), 10, 3000).is_err());
        assert!(check_opened(Output::Cardinality(Some(10)), 10, 3000).is_ok());
        assert!(check_opened(Output::Cardinality(None), 1, 1).is_ok());
        let sums = |cardinality| {
            Output::Sum(Some(Sums {
                cardinality,
                sender_values: vec![],
                receiver_values: vec![],
                inner_product: None,
            }))
        };
        assert!(check_opened(sums(8), 7, 9).is_err());
        assert!(check_opened(sums(7), 7, 9).is_ok());
        let union = |n| Output::Union(Some(vec![vec![1u8]; n]));
        assert!(check_opened(union(6), 9, 5).is_err());
        assert!(check_opened(union(5), 9, 5).is_ok());
    }
}
