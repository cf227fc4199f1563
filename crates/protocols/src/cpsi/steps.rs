//! The steps both roles run alike: the hellos, the comparison of the
//! tags (EPC, the triples, the equality circuit: steps 3 and 4 of the
//! module docs) and the aggregates on the membership shares. The roles'
//! own steps are `sender.rs` and `receiver.rs`.

use psikit_ot::SessionId;
use psikit_transport::Channel;

use super::config::{check_config, CpsiConfig, Input, UnionItems};
use super::outcome::{Meter, Output, Phases};
use super::rot::{self, Rots};
use super::vocabulary::{App, OtKind, Role};
use super::{apps, bits, cgs, epc, gmw, leaves, messages};
use crate::error::{Error, Violation};

/// The run's stages as both roles tell their `Progress`: the hashing into
/// bins, the OPPRF, the comparison (EPC, triples, the equality circuit),
/// and the application on the membership shares.
pub(super) const STAGE_HASHING: &str = "hashing";
pub(super) const STAGE_OPPRF: &str = "OPPRF";
pub(super) const STAGE_COMPARE: &str = "comparing";
pub(super) const STAGE_RESULT: &str = "computing the result";

/// How the equality shares are made (paper §3.2, Table 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Equality {
    /// GMW bit by bit: `ℓ - 1` AND gates on triples; on IKNP it sends
    /// the least, so it compares the long tags there when EPC is off.
    Gmw,
    /// CGS's 4-bit leaves as 1-out-of-16 OTs ([`leaves`]: one silent small
    /// VOLE each, or four IKNP random OTs), joined by a tree of the same
    /// OTs as four-input AND gates: on silent OT 20 correlations per bin
    /// instead of GMW's 60 at 61 bits, used at every length; on IKNP 22
    /// random OTs instead of 32 at 17 bits, used on EPC's short outputs.
    Leaves,
    /// CGS on KK13 1-out-of-16 OTs ([`cgs`], the paper's KK-CGS).
    Kk13,
}

impl Equality {
    pub(super) fn of(ot: OtKind, epc: bool) -> Self {
        match (ot, epc) {
            (OtKind::Kk13, _) => Equality::Kk13,
            (OtKind::Silent, _) | (OtKind::Iknp, true) => Equality::Leaves,
            (OtKind::Iknp, false) => Equality::Gmw,
        }
    }
}

/// What the equality step leaves for the application.
pub(super) struct Compared {
    /// This party's membership share per bin.
    pub(super) shares: bits::Bits,
    pub(super) rots: Rots,
    /// Triples left for the application (the threshold's adder).
    pub(super) triples: gmw::Triples,
}

/// The first small VOLEs of [`compare`] on silent OT, prepared while this
/// party waits on its peer ([`rot::prepare_chunks`]): the receiver's noise
/// while it waits for the hint, the sender's trees and `B` while it waits
/// for the masked table. Nothing is sent, so the messages keep their
/// order; `silent` must start nothing else before `compare`.
pub(super) fn prepare_ahead(
    cfg: &CpsiConfig,
    silent: &mut rot::Side,
    m: usize,
    ell: u32,
) -> Result<rot::Ahead, Error> {
    let params = cfg.epc.params(ell, m, cfg.statistical_bits)?;
    let bits = params.as_ref().map_or(ell, |p| p.ell_c());
    let equality = Equality::of(cfg.ot, params.is_some());
    if cfg.ot != OtKind::Silent || equality != Equality::Leaves {
        return Ok(rot::Ahead::default());
    }
    let needed = triples_needed(cfg, equality, m, bits);
    rot::prepare_chunks(silent, &leaves::small_jobs(m, bits, needed))
}

/// Steps 3 and 4 at either party (the sender leads): EPC of the `ell`-bit
/// tags when on, then the AND triples and the equality circuit. `silent`
/// is the OPRF's silent session, reused for the forward random OTs, with
/// the small VOLEs `prepared` on it ([`prepare_ahead`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn compare(
    ch: &mut Channel,
    cfg: &CpsiConfig,
    sid: &SessionId,
    tags: Vec<u128>,
    ell: u32,
    silent: rot::Side,
    prepared: rot::Ahead,
    meter: &mut Meter,
    phases: &mut Phases,
) -> Result<Compared, Error> {
    let leader = matches!(silent, rot::Side::SilentSender(_));
    let m = tags.len();
    let params = cfg.epc.params(ell, m, cfg.statistical_bits)?;
    let equality = Equality::of(cfg.ot, params.is_some());
    let (compared, bits) = match params {
        Some(params) => {
            let r = match leader {
                true => epc::driver::send(ch, &params, &tags).await?,
                false => epc::driver::receive(ch, &params, &tags).await?,
            };
            (r.into_iter().map(u128::from).collect(), params.ell_c())
        }
        None => (tags, ell),
    };
    phases.compared_bits = bits;
    phases.epc = meter.mark(ch);

    let ext = cfg.ext_config()?;
    let mut rots = Rots::new(ch, sid, cfg.ot, leader, &ext, silent).await?;
    rots.use_prepared(prepared);
    let needed = triples_needed(cfg, equality, m, bits);
    let (shares, triples) = match equality {
        Equality::Kk13 => {
            let triples = gmw::Triples::generate(&mut rots, ch, needed).await?;
            let mut cgs = cgs::Cgs::setup(ch, &mut rots, sid, &ext).await?;
            let mut and = cgs.triples(ch, cgs::triples_needed(m, bits)).await?;
            phases.triples = meter.mark(ch);
            (cgs.equal(ch, &mut and, &compared, bits).await?, triples)
        }
        Equality::Leaves => {
            let (triples, keys) = leaves::prepare(ch, &mut rots, m, bits, needed).await?;
            phases.triples = meter.mark(ch);
            let shares = leaves::equal(ch, &keys, &compared, bits).await?;
            (shares, triples)
        }
        Equality::Gmw => {
            let mut triples = gmw::Triples::generate(&mut rots, ch, needed).await?;
            phases.triples = meter.mark(ch);
            (
                gmw::equal(ch, &mut triples, &compared, bits, leader).await?,
                triples,
            )
        }
    };
    phases.equality = meter.mark(ch);
    phases.silent += rots.times();
    Ok(Compared {
        shares,
        rots,
        triples,
    })
}

/// GMW triples from random OTs a run uses: the equality circuit (not with
/// KK13: the CGS equality makes its own), and the adder of a threshold or
/// of a sum's minimum intersection.
pub(super) fn triples_needed(cfg: &CpsiConfig, equality: Equality, m: usize, ell: u32) -> usize {
    adder_triples(cfg, m as u64)
        + match equality {
            Equality::Kk13 => 0,
            Equality::Leaves => 0,
            Equality::Gmw => gmw::equality_cost(m, ell),
        }
}

/// Whether a run opens its application's result, or stops at this
/// party's shares of it: a bucket of a job, whose shares are added up over
/// the buckets and opened once ([`open_aggregate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Finish {
    Open,
    Defer,
}

/// The aggregates both roles run alike: the cardinality, the sums (on
/// this party's `weights`, [`apps::sum_shares`]) and the threshold test,
/// opened ([`Finish::Open`]: the output and no shares) or not
/// ([`Finish::Defer`]: this party's shares, the output says nothing was
/// learned).
#[allow(clippy::too_many_arguments)]
pub(super) async fn aggregate(
    ch: &mut Channel,
    c: &mut Compared,
    me: Role,
    cfg: &CpsiConfig,
    weights: &[&[u64]],
    columns: (usize, usize),
    finish: Finish,
) -> Result<(Output, Option<Vec<u64>>), Error> {
    let shares = match cfg.app {
        App::Cardinality | App::Threshold(_) => {
            vec![apps::count(ch, &mut c.rots, &c.shares, me).await?]
        }
        App::Sum => {
            let bits = cfg.product_bits;
            apps::sum_shares(ch, &mut c.rots, &c.shares, me, weights, columns, bits).await?
        }
        App::Shares | App::Union => return Err(Error::Internal("not an aggregate")),
    };
    match finish {
        Finish::Defer => Ok((unopened(cfg.app), Some(shares))),
        Finish::Open => {
            let bins = c.shares.len() as u64;
            let output =
                open_aggregate(ch, &mut c.triples, &shares, me, cfg, columns, bins).await?;
            Ok((output, None))
        }
    }
}

/// What a party learned from a run that opened nothing.
fn unopened(app: App) -> Output {
    match app {
        App::Sum => Output::Sum(None),
        App::Threshold(_) => Output::Threshold(None),
        _ => Output::Cardinality(None),
    }
}

/// Opens the application's result from this party's `shares` (as
/// [`aggregate`] makes them, or their sums over a job's buckets), the
/// count being at most `max_count` (public): the threshold test and the
/// minimum intersection use `triples` for their adder.
pub(super) async fn open_aggregate(
    ch: &mut Channel,
    triples: &mut gmw::Triples,
    shares: &[u64],
    me: Role,
    cfg: &CpsiConfig,
    columns: (usize, usize),
    max_count: u64,
) -> Result<Output, Error> {
    let count = *shares.first().ok_or(Error::Internal("shares of a count"))?;
    match cfg.app {
        App::Cardinality => Ok(Output::Cardinality(
            apps::open_one(ch, count, me, cfg.reveal).await?,
        )),
        App::Sum => {
            let agreed = cfg.agreed();
            apps::open_sums(ch, triples, shares, me, columns, &agreed, max_count).await
        }
        App::Threshold(t) => {
            let max = max_count.max(t);
            let bit = apps::at_least(ch, triples, count, t, max, me == Role::Sender).await?;
            let open = apps::open_one(ch, u64::from(bit), me, cfg.reveal).await?;
            // Each party's share is a bit as a number: the sum is 0, 1 or
            // 2, and its low bit is their XOR.
            match open {
                Some(b) if b > 2 => Err(Violation::Impossible(format!(
                    "the threshold test opened to {b}, not the sum of two bits"
                ))
                .into()),
                open => Ok(Output::Threshold(open.map(|b| b & 1 == 1))),
            }
        }
        App::Shares | App::Union => Err(Error::Internal("not an aggregate")),
    }
}

/// AND triples the adder of [`open_aggregate`] takes on a count of at most
/// `max_count`: for a threshold, or for sums with a minimum intersection.
pub(super) fn adder_triples(cfg: &CpsiConfig, max_count: u64) -> usize {
    let bound = match cfg.app {
        App::Threshold(t) => Some(t),
        App::Sum if cfg.min_intersection > 0 => Some(cfg.min_intersection),
        _ => None,
    };
    bound.map_or(0, |t| {
        gmw::adder_cost(apps::threshold_bits(max_count.max(t)))
    })
}

/// The session id of a run: both seeds and both set sizes.
pub(super) fn session_id(
    seeds: &messages::Seeds,
    sender_size: u64,
    receiver_size: u64,
) -> SessionId {
    SessionId::new(
        &[
            &b"psikit circuit psi v1"[..],
            &seeds.hashing.to_le_bytes(),
            &seeds.okvs,
            &sender_size.to_be_bytes(),
            &receiver_size.to_be_bytes(),
        ]
        .concat(),
    )
}

/// Exchanges hellos and checks the peer's: same run, acceptable size, the
/// same key encoding. Returns the peer's hello. The union states its
/// slot width: the longest key, or a job's `union` width.
pub(super) async fn hello(
    ch: &mut Channel,
    cfg: &CpsiConfig,
    input: &Input<'_>,
    union: Option<UnionItems<'_>>,
) -> Result<messages::Hello, Error> {
    check_config(cfg, input)?;
    let longest = match union {
        Some(u) => u.width,
        None => input.keys.iter().map(Vec::len).max().unwrap_or(0),
    };
    let max_item_len = match cfg.app {
        App::Union => u16::try_from(longest)
            .ok()
            .filter(|&l| l <= messages::MAX_UNION_ITEM)
            .ok_or_else(|| {
                Error::Config(format!(
                    "the union carries keys of up to {} bytes, not {longest}",
                    messages::MAX_UNION_ITEM
                ))
            })?,
        _ => 0,
    };
    ch.send_msg(&messages::Hello {
        agreed: cfg.agreed(),
        set_size: input.keys.len() as u64,
        value_columns: input.values.len() as u8,
        max_item_len,
        key_format: cfg.key_format.clone(),
    })
    .await?;
    let peer: messages::Hello = ch.recv_msg(()).await?;
    let differences = cfg.agreed().differences(&peer.agreed);
    if !differences.is_empty() {
        return Err(Violation::Settings(differences.join("; ")).into());
    }
    crate::common::two_party::check_peer(
        &cfg.key_format,
        &peer.key_format,
        peer.set_size,
        cfg.max_set_size,
    )?;
    if cfg.product_bits > 0 && peer.value_columns == 0 {
        return Err(Error::Config(
            "the inner product needs a value column at each party; the peer gave none".into(),
        ));
    }
    Ok(peer)
}
