//! RR16's facade: the family as a [`TwoParty`] protocol, so every front
//! end reaches it through `common::two_party` (`send` / `receive` over a
//! peer, blocking forms, sans-IO steppers).

use psikit_transport::Channel;

use super::config::Rr16Config;
use super::receiver::{run_receiver, ReceiverOutcome};
use super::sender::{run_sender, SenderOutcome};
use crate::common::two_party::TwoParty;
use crate::common::Progress;
use crate::error::Error;

/// RR16 (malicious or semi-honest) as a two-party protocol.
pub struct Rr16;

impl TwoParty for Rr16 {
    type Config = Rr16Config;
    type SenderOutcome = SenderOutcome;
    type ReceiverOutcome = ReceiverOutcome;

    async fn run_sender(
        ch: &mut Channel,
        keys: &[Vec<u8>],
        config: &Rr16Config,
        progress: &dyn Progress,
    ) -> Result<SenderOutcome, Error> {
        run_sender(ch, keys, config, progress).await
    }

    async fn run_receiver(
        ch: &mut Channel,
        keys: &[Vec<u8>],
        config: &Rr16Config,
        progress: &dyn Progress,
    ) -> Result<ReceiverOutcome, Error> {
        run_receiver(ch, keys, config, progress).await
    }
}
