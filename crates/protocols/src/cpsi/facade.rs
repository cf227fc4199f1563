//! Circuit PSI's facade: a run over a [`Peer`] (listen or connect, TLS),
//! async and blocking, over a [`Channel`] the caller opened, or as a
//! sans-IO [`Stepper`]; the roles named by their tables (a front end gets
//! its role from [`super::Choices::resolve`]). (Circuit PSI takes values
//! with its keys, so it has its own entries rather than
//! `common::two_party::TwoParty`'s.)

use psikit_ot::SessionId;
use psikit_transport::{Channel, Limits, Stepper};

use super::bits::Bits;
use super::config::UnionItems;
use super::config::{CpsiConfig, Input};
use super::gmw::Triples;
use super::outcome::{check_opened, Outcome, Output};
use super::receiver::run_receiver;
use super::rot::Rots;
use super::sender::run_sender;
use super::steps::{adder_triples, open_aggregate, Finish};
pub use super::vocabulary::Role;
use crate::common::connect::{block_on, Peer};
use crate::common::{two_party, NoProgress, Progress};
use crate::error::Error;

/// Runs `role` with `input` against the peer. A listening party calls
/// `listening` with its address before it waits; `progress` is told the
/// run's stages (the wait for the peer, then the protocol's phases).
pub async fn run(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    let mut ch = two_party::open(peer, listening, progress).await?;
    run_on(&mut ch, role, input, config, progress).await
}

/// [`run`], blocking.
pub fn run_blocking(
    peer: &Peer,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    listening: impl FnOnce(&str),
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    block_on(run(peer, role, input, config, listening, progress))?
}

/// Runs `role` on a channel the caller opened (the benchmark's worker
/// processes, tests), telling `progress` the protocol's phases.
pub async fn run_on(
    ch: &mut Channel,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    progress: &dyn Progress,
) -> Result<Outcome, Error> {
    Ok(
        run_finishing(ch, role, input, config, progress, Finish::Open, None)
            .await?
            .0,
    )
}

async fn run_finishing(
    ch: &mut Channel,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    progress: &dyn Progress,
    finish: Finish,
    union: Option<UnionItems<'_>>,
) -> Result<(Outcome, Option<Vec<u64>>), Error> {
    match role {
        Role::Sender => run_sender(ch, input, config, progress, finish).await,
        Role::Receiver => run_receiver(ch, input, config, progress, finish, union).await,
    }
}

/// One bucket of a job running the union: the provider (the receiver)
/// reveals `union`'s payloads (its items' encoded keys; its padding never
/// opens) in slots of `union`'s width, the learner (the sender) gets the
/// payloads outside the intersection. `union` is the provider's.
pub(crate) async fn union_on(
    ch: &mut Channel,
    role: Role,
    input: Input<'_>,
    union: UnionItems<'_>,
    config: &CpsiConfig,
) -> Result<Option<Vec<Vec<u8>>>, Error> {
    let union = (role == Role::Receiver).then_some(union);
    let (outcome, _) =
        run_finishing(ch, role, input, config, &NoProgress, Finish::Open, union).await?;
    match outcome.output {
        Output::Union(learned) => Ok(learned),
        _ => Err(Error::Internal("the union's output")),
    }
}

/// One bucket of a job: `role`'s run up to its additive shares (mod 2^64)
/// of the application's values, opening nothing: the count (cardinality,
/// threshold), or the count, each value column's sum and the inner
/// product (sum). Added up over the buckets, they go to [`open_shares_on`].
pub(crate) async fn shares_on(
    ch: &mut Channel,
    role: Role,
    input: Input<'_>,
    config: &CpsiConfig,
    progress: &dyn Progress,
) -> Result<Vec<u64>, Error> {
    let (_, shares) = run_finishing(ch, role, input, config, progress, Finish::Defer, None).await?;
    shares.ok_or(Error::Internal("an aggregate's shares"))
}

/// The end of a job: opens the application's result from `shares`, this
/// party's [`shares_on`] added up over every bucket, once. A threshold or
/// a minimum intersection first runs its adder on AND triples from fresh
/// IKNP OTs (`sid` names this opening); `max_count` is a public bound on
/// the count, `columns` the sender's and the receiver's value columns,
/// `sizes` both parties' item counts (an opened count above the smaller
/// is refused).
pub(crate) async fn open_shares_on(
    ch: &mut Channel,
    role: Role,
    shares: &[u64],
    config: &CpsiConfig,
    sid: &SessionId,
    columns: (usize, usize),
    (max_count, sizes): (u64, (u64, u64)),
) -> Result<Output, Error> {
    let leader = role == Role::Sender;
    let needed = adder_triples(config, max_count);
    let mut triples = match needed {
        0 => Triples::from_shares(Bits::default(), Bits::default(), Bits::default()),
        n => {
            let mut rots = Rots::iknp(ch, sid, leader, &config.ext_config()?).await?;
            Triples::generate(&mut rots, ch, n).await?
        }
    };
    let output = open_aggregate(ch, &mut triples, shares, role, config, columns, max_count).await?;
    check_opened(output, sizes.0, sizes.1)
}

/// `role`'s run as a sans-IO state machine: push the peer's bytes in, take
/// ours out, [`Stepper::advance`] until `Ready` (see
/// `crate::balanced::stepper`).
pub fn stepper(
    role: Role,
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u64>>,
    config: CpsiConfig,
    limits: Limits,
) -> Stepper<Result<Outcome, Error>> {
    Stepper::new(limits, move |mut ch| async move {
        let input = Input {
            keys: &keys,
            values: &values,
        };
        run_on(&mut ch, role, input, &config, &NoProgress).await
    })
}
