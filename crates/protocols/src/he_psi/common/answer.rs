//! A query's answer on the wire, which both roles read or write: the
//! server sends one result package per bin bundle (its polynomials'
//! frames, in order) and then a done message with the package count; a
//! client, and the router of a sharded database (a client of every
//! shard), read the stream back. Kept apart from either role so the router
//! reads answers exactly as a client does.

use psikit_he::{Ciphertext, HeParams};
use psikit_transport::{Channel, Frame, Message};

use crate::error::{Error, Violation};
use crate::he_psi::common::messages::{DecodedResultCt, QueryDone, ResultCt};

/// The encrypted answer of one bin bundle.
pub(crate) struct ResultPackage {
    /// Bundle index the package belongs to.
    pub bundle_idx: u32,
    /// `P(y)` per slot: zero in all `f` slots of a bin means a match.
    pub matching: Ciphertext,
    /// `G_k(y)` per slot for each label fragment `k`.
    pub labels: Vec<Ciphertext>,
}

/// The frames of one result package as a server sends them: matching
/// ciphertext, then labels, with the noise-only low bits dropped.
pub(crate) fn package_frames(package: &ResultPackage) -> Result<Vec<Frame>, Error> {
    std::iter::once(&package.matching)
        .chain(&package.labels)
        .enumerate()
        .map(|(poly, ct)| Ok(ResultCt::encode(package.bundle_idx, poly as u16, ct)?.to_frame()))
        .collect()
}

/// The next part of an answer to a query, as a client or the router reads
/// it from a server.
pub(crate) enum Answer {
    /// A whole result package: its polynomials' frames, in order.
    Package(Vec<Frame>),
    /// The done message: how many packages the server says it sent, and
    /// its evaluation time.
    Done(QueryDone),
}

/// Reads the next [`Answer`]: a done message, or a result package of
/// `polys` frames; anything else is refused (`what` names the answer).
pub(crate) async fn next_answer(
    ch: &mut Channel,
    polys: usize,
    what: &'static str,
) -> Result<Answer, Error> {
    let first = ch.recv().await?;
    if first.protocol == QueryDone::PROTOCOL && first.kind == QueryDone::KIND {
        return Ok(Answer::Done(QueryDone::decode(&first.payload, ())?));
    }
    if first.protocol != ResultCt::PROTOCOL || first.kind != ResultCt::KIND {
        return Err(Violation::Unexpected(what).into());
    }
    let mut frames = Vec::with_capacity(polys);
    frames.push(first);
    for _ in 1..polys {
        frames.push(ch.recv_expect(ResultCt::PROTOCOL, ResultCt::KIND).await?);
    }
    Ok(Answer::Package(frames))
}

/// Checks a done message's package count against the packages received.
pub(crate) fn check_done(done: u32, received: u32, what: &'static str) -> Result<(), Error> {
    if done != received {
        return Err(Violation::Count {
            what,
            got: u64::from(received),
            expected: u64::from(done),
        }
        .into());
    }
    Ok(())
}

/// One result package from its frames, which must be its polynomials in
/// order for one bundle index (decoded under the client's parameters).
pub(crate) fn decode_package(frames: &[Frame], he: &HeParams) -> Result<ResultPackage, Error> {
    let mut bundle = None;
    let mut cts = Vec::with_capacity(frames.len());
    for (poly, frame) in frames.iter().enumerate() {
        // Decoded straight from the payload: see `DecodedResultCt`.
        let part = DecodedResultCt::decode(&frame.payload, he)?;
        if usize::from(part.poly) != poly || bundle.is_some_and(|b| b != part.bundle_idx) {
            return Err(Violation::OutOfOrder("result package").into());
        }
        bundle = Some(part.bundle_idx);
        cts.push(part.ct);
    }
    let mut cts = cts.into_iter();
    Ok(ResultPackage {
        bundle_idx: bundle.unwrap_or(0),
        matching: cts
            .next()
            .ok_or(Error::Peer(Violation::Invalid("empty result package")))?,
        labels: cts.collect(),
    })
}
