//! What the two-party families' tests share: random sets with their
//! plaintext truth, and both parties run by steppers with no runtime.

use std::collections::HashSet;
use std::task::Poll;

use psikit_transport::{Limits, Stepper};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::driver::{receiver_on, sender_on, TwoParty};
use crate::common::progress::NoProgress;
use crate::error::Error;

/// Distinct random items of 1 to 40 bytes: `n_s` for the sender, `n_r`
/// for the receiver, `overlap` of them shared (before deduplication);
/// returns both sets, sorted, and the receiver's truth mask computed
/// from the sets themselves (short random items collide by chance).
pub fn sets(
    seed: u64,
    n_s: usize,
    n_r: usize,
    overlap: usize,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<bool>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let item = |rng: &mut StdRng| {
        let len = rng.gen_range(1..40);
        (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
    };
    let shared: Vec<Vec<u8>> = (0..overlap).map(|_| item(&mut rng)).collect();
    let mut sender = shared.clone();
    sender.extend((overlap..n_s).map(|_| item(&mut rng)));
    let mut receiver = shared;
    receiver.extend((overlap..n_r).map(|_| item(&mut rng)));
    for set in [&mut sender, &mut receiver] {
        set.sort();
        set.dedup();
    }
    let held: HashSet<&Vec<u8>> = sender.iter().collect();
    let truth = receiver.iter().map(|y| held.contains(y)).collect();
    (sender, receiver, truth)
}

/// Both parties of `P` as steppers, their bytes carried by hand in
/// arbitrary splits: no runtime, no sockets.
pub fn step_pair<P: TwoParty>(
    sender_items: Vec<Vec<u8>>,
    receiver_items: Vec<Vec<u8>>,
    config: P::Config,
    limits: Limits,
) -> (
    Result<P::SenderOutcome, Error>,
    Result<P::ReceiverOutcome, Error>,
) {
    let sender_config = config.clone();
    let mut sender = Stepper::new(limits, |mut ch| async move {
        sender_on::<P>(&mut ch, &sender_items, &sender_config, &NoProgress).await
    });
    let mut receiver = Stepper::new(limits, |mut ch| async move {
        receiver_on::<P>(&mut ch, &receiver_items, &config, &NoProgress).await
    });
    let (mut s_out, mut r_out) = (None, None);
    while s_out.is_none() || r_out.is_none() {
        if s_out.is_none() {
            if let Poll::Ready(r) = sender.advance() {
                s_out = Some(r);
            }
        }
        receiver.push(&sender.take_outgoing());
        if r_out.is_none() {
            if let Poll::Ready(r) = receiver.advance() {
                r_out = Some(r);
            }
        }
        sender.push(&receiver.take_outgoing());
    }
    (
        s_out.expect("sender finished"),
        r_out.expect("receiver finished"),
    )
}
