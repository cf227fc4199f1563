//! Silent OT and VOLE between two parties: every output satisfies its
//! correlation.

use psikit_transport::{Channel, Limits};
use rand::rngs::OsRng;

use super::receiver::{CotOutput, Prepared, SmallVoleOutput, VoleOutput};
use super::sender::PreparedVole;
use super::*;
use crate::error::OtError;
use crate::ext::{ExtConfig, Security};
use crate::gf128;
use crate::session::SessionId;

/// What each party got from one extension.
enum Made {
    Cot(Zeroizing<Vec<u128>>, CotOutput),
    Vole(Zeroizing<Vec<u128>>, VoleOutput),
}

use zeroize::Zeroizing;

/// Runs one session with an extension per `(count, vole)` (`vole` the
/// VOLE's value bits, or `None` for correlated OT), returning `Δ` and the
/// outputs.
async fn session(security: Security, runs: &[(usize, Option<u32>)]) -> (u128, Vec<Made>) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"silent test");
    let owned = runs.to_vec();
    let sender = tokio::spawn(async move {
        let mut s =
            SilentSender::setup(&mut a, &sid, security, ExtConfig::default(), &mut OsRng).await?;
        let mut outs = Vec::new();
        for (count, vole) in owned {
            outs.push(match vole {
                Some(bits) => s.vole(&mut a, count, bits, &mut OsRng).await?,
                None => s.cot(&mut a, count, &mut OsRng).await?,
            });
        }
        Ok::<_, OtError>((s.delta(), outs))
    });
    let mut r = SilentReceiver::setup(&mut b, &sid, security, ExtConfig::default(), &mut OsRng)
        .await
        .expect("receiver setup");
    let mut received = Vec::new();
    for &(count, vole) in runs {
        received.push(match vole {
            Some(bits) => Err(r.vole(&mut b, count, bits, &mut OsRng).await.expect("vole")),
            None => Ok(r.cot(&mut b, count, &mut OsRng).await.expect("cot")),
        });
    }
    let (delta, sent) = sender.await.expect("sender task").expect("sender");
    let made = sent
        .into_iter()
        .zip(received)
        .map(|(s, r)| match r {
            Ok(cot) => Made::Cot(s, cot),
            Err(vole) => Made::Vole(s, vole),
        })
        .collect();
    (delta, made)
}

#[tokio::test]
async fn correlated_ots_and_voles_satisfy_their_relations() {
    check_relations(Security::SemiHonest).await;
}

#[tokio::test]
async fn malicious_extensions_satisfy_their_relations() {
    check_relations(Security::Malicious).await;
}

async fn check_relations(security: Security) {
    let runs = [
        (1, None),
        (5000, Some(128)),
        (1 << 16, None),
        (1 << 16, Some(128)),
        (70_000, Some(128)),
        // Subspace VOLE (VOLE-PSI's low-communication mode).
        (5000, Some(61)),
        (5000, Some(1)),
        // Two parts (params::parts), concatenated.
        (params::MAX_PART + 1000, None),
        (params::MAX_PART + 7, Some(128)),
    ];
    let (delta, made) = session(security, &runs).await;
    for ((count, bits), m) in runs.iter().zip(made) {
        match m {
            Made::Cot(q, r) => {
                assert_eq!(
                    (q.len(), r.t.len(), r.choices.len()),
                    (*count, *count, *count)
                );
                for i in 0..*count {
                    assert_eq!(r.t[i], q[i] ^ (r.choices.mask(i) & delta), "COT {i}");
                }
                if *count >= 5000 {
                    let ones = r.choices.count_ones();
                    assert!(
                        ones.abs_diff(count / 2) < count / 20,
                        "{ones} ones of {count}"
                    );
                }
            }
            Made::Vole(b, r) => {
                assert_eq!((b.len(), r.a.len(), r.c.len()), (*count, *count, *count));
                for i in 0..*count {
                    assert_eq!(r.a[i] ^ b[i], gf128::mul(r.c[i], delta), "VOLE {i}");
                }
                let bits = bits.expect("a VOLE");
                assert!(r.c.iter().all(|c| c >> 1 >> (bits - 1) == 0), "{bits} bits");
                // c is pseudorandom: no zeros, no repeats in a sample (of
                // its top bit, for one-bit values).
                let mut sample: Vec<u128> = r.c[..1000].to_vec();
                sample.sort_unstable();
                sample.dedup();
                match bits {
                    1 => assert_eq!(sample, [0, 1]),
                    _ => {
                        assert_eq!(sample.len(), 1000);
                        assert!(!sample.contains(&0));
                    }
                }
            }
        }
    }
}

/// A malicious VOLE whose sender corrupts block `block` of its first
/// trees message. Returns whether the receiver's base choice `choice`
/// (the bit deciding whether it reads that block) was set, and what the
/// receiver got.
async fn tampered_vole(
    block: usize,
    choice: usize,
) -> (
    bool,
    Result<(u128, Zeroizing<Vec<u128>>, VoleOutput), OtError>,
) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"silent cheat test");
    let count = 5000;
    let sender = tokio::spawn(async move {
        let security = Security::Malicious;
        let mut s =
            SilentSender::setup(&mut a, &sid, security, ExtConfig::default(), &mut OsRng).await?;
        s.tamper = Some(block);
        let out = s.vole(&mut a, count, 128, &mut OsRng).await?;
        Ok::<_, OtError>((s.delta(), out))
    });
    let security = Security::Malicious;
    let mut r = SilentReceiver::setup(&mut b, &sid, security, ExtConfig::default(), &mut OsRng)
        .await
        .expect("receiver setup");
    let pending = r
        .start_vole(&mut b, count, 128, &mut OsRng)
        .await
        .expect("start");
    let chose = pending.choice(choice);
    let got = pending.finish(&mut b).await;
    drop(b);
    let sent = sender.await.expect("sender task");
    (chose, got.and_then(|v| sent.map(|(d, s)| (d, s, v))))
}

#[tokio::test]
async fn a_corrupted_correction_block_is_always_caught() {
    let depth = SilentParams::for_count(5000, Noise::FIELD)
        .expect("shape")
        .depth;
    // Tree 0's correction block sets the punctured leaf: always read.
    let (_, got) = tampered_vole(2 * depth, 0).await;
    assert!(matches!(got, Err(OtError::SilentCheck)), "{:?}", got.err());
}

#[tokio::test]
async fn a_corrupted_level_sum_is_caught_exactly_when_it_is_read() {
    // Block 0 is tree 0's masked left sum at the top level; the receiver
    // reads it iff its choice bit 0 is 0 (it opens side `¬α_0`). Passing
    // otherwise is the selective failure the check allows.
    for _ in 0..4 {
        let (chose, got) = tampered_vole(0, 0).await;
        match (chose, got) {
            (false, Err(OtError::SilentCheck)) => {}
            (true, Ok((delta, b, r))) => {
                for i in 0..b.len() {
                    assert_eq!(r.a[i] ^ b[i], gf128::mul(r.c[i], delta), "VOLE {i}");
                }
            }
            (chose, got) => panic!("choice {chose}: {:?}", got.err()),
        }
    }
}

#[test]
fn compact_keeps_the_outputs_and_releases_the_spare_room() {
    let mut out = Zeroizing::new(Vec::with_capacity(1 << 12));
    out.extend((0..1000u128).map(|i| i * 3));
    compact(&mut out);
    assert_eq!(out.capacity(), 1000);
    assert!(out.iter().enumerate().all(|(i, &x)| x == 3 * i as u128));
}

#[tokio::test]
async fn extensions_say_where_their_time_went() {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"silent times test");
    let sender = tokio::spawn(async move {
        let cfg = ExtConfig::default();
        let mut s =
            SilentSender::setup(&mut a, &sid, Security::SemiHonest, cfg, &mut OsRng).await?;
        s.vole(&mut a, 1 << 16, 128, &mut OsRng).await?;
        Ok::<_, OtError>(s.last_times())
    });
    let cfg = ExtConfig::default();
    let mut r = SilentReceiver::setup(&mut b, &sid, Security::SemiHonest, cfg, &mut OsRng)
        .await
        .expect("receiver setup");
    let got = r
        .vole(&mut b, 1 << 16, 128, &mut OsRng)
        .await
        .expect("vole");
    let sent = sender.await.expect("sender task").expect("sender");
    for times in [sent, got.times] {
        let zero = std::time::Duration::ZERO;
        assert!(times.base > zero && times.trees > zero && times.code > zero);
    }
}

/// Small VOLEs (values of `bits` bits kept as bytes) in one session: the
/// sender's `b` and `Δ`, the receiver's outputs.
/// The runs' small VOLEs at both roles; with `ahead`, the receiver
/// prepares the first three runs' noise before it starts the first
/// ([`SilentReceiver::prepare_small_vole`]) and starts the rest as usual,
/// and a semi-honest sender its first runs of one part
/// ([`SilentSender::prepare_vole`]).
async fn small_voles(
    security: Security,
    runs: &[(usize, u32)],
    ahead: bool,
) -> (u128, Vec<(Zeroizing<Vec<u128>>, SmallVoleOutput)>) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"silent small vole test");
    let owned = runs.to_vec();
    let sender = tokio::spawn(async move {
        let mut s =
            SilentSender::setup(&mut a, &sid, security, ExtConfig::default(), &mut OsRng).await?;
        // A semi-honest sender prepares its leading one-part runs.
        let prepared: Vec<PreparedVole> = match ahead && security == Security::SemiHonest {
            true => owned
                .iter()
                .take_while(|&&(count, _)| params::parts(count).len() == 1)
                .map(|&(count, bits)| s.prepare_vole(count, bits, &mut OsRng))
                .collect::<Result<_, _>>()?,
            false => Vec::new(),
        };
        let mut prepared = prepared.into_iter();
        let mut outs = Vec::new();
        for (count, bits) in owned {
            outs.push(match prepared.next() {
                Some(p) => {
                    assert_eq!((p.count(), p.bits()), (count, bits));
                    s.finish_prepared(&mut a, p).await?
                }
                None => s.vole(&mut a, count, bits, &mut OsRng).await?,
            });
        }
        Ok::<_, OtError>((s.delta(), outs))
    });
    let mut r = SilentReceiver::setup(&mut b, &sid, security, ExtConfig::default(), &mut OsRng)
        .await
        .expect("receiver setup");
    let prepared: Vec<Prepared> = match ahead {
        true => runs
            .iter()
            .take(3)
            .map(|&(count, bits)| r.prepare_small_vole(count, bits, &mut OsRng))
            .collect::<Result<_, _>>()
            .expect("prepare"),
        false => Vec::new(),
    };
    let mut prepared = prepared.into_iter();
    let mut received = Vec::new();
    for &(count, bits) in runs {
        let pending = match prepared.next() {
            Some(p) => {
                assert_eq!((p.count(), p.bits()), (count, bits));
                r.start_prepared(&mut b, p).await
            }
            None => r.start_small_vole(&mut b, count, bits, &mut OsRng).await,
        }
        .expect("start");
        received.push(pending.finish_small_vole(&mut b).await.expect("small vole"));
    }
    let (delta, sent) = sender.await.expect("sender task").expect("sender");
    (delta, sent.into_iter().zip(received).collect())
}

#[tokio::test]
async fn small_voles_satisfy_their_relation_with_every_value_used() {
    for (security, ahead) in [
        (Security::SemiHonest, false),
        (Security::Malicious, false),
        (Security::SemiHonest, true),
        (Security::Malicious, true),
    ] {
        let runs = [(5000, 2), (5000, 4), (params::MAX_PART + 3, 4), (40_000, 8)];
        let (delta, made) = small_voles(security, &runs, ahead).await;
        for ((count, bits), (b, r)) in runs.iter().zip(made) {
            assert_eq!((b.len(), r.a.len(), r.c.len()), (*count, *count, *count));
            let mut seen = vec![0usize; 256];
            for i in 0..*count {
                let c = u128::from(r.c[i]);
                assert_eq!(r.a[i] ^ b[i], gf128::mul(c, delta), "VOLE {i}");
                seen[usize::from(r.c[i])] += 1;
            }
            // Every value of `bits` bits, about equally often, none wider.
            let values = 1usize << bits;
            let expected = count / values;
            assert!(seen[values..].iter().all(|&n| n == 0), "{bits} bits");
            assert!(
                seen[..values]
                    .iter()
                    .all(|&n| n.abs_diff(expected) < expected / 2),
                "{bits} bits: {:?}",
                &seen[..values]
            );
        }
    }
}

#[tokio::test]
async fn small_voles_take_one_to_eight_bits() {
    let (mut x, mut y) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"small vole refusals");
    let setup = tokio::spawn(async move {
        let cfg = ExtConfig::default();
        SilentSender::setup(&mut x, &sid, Security::SemiHonest, cfg, &mut OsRng).await
    });
    let cfg = ExtConfig::default();
    let mut r = SilentReceiver::setup(&mut y, &sid, Security::SemiHonest, cfg, &mut OsRng)
        .await
        .expect("receiver setup");
    setup.await.expect("sender task").expect("sender setup");
    for bits in [0, 9, 128] {
        let got = r.start_small_vole(&mut y, 100, bits, &mut OsRng).await;
        assert!(
            matches!(got, Err(OtError::InvalidArgument(_))),
            "{bits} bits"
        );
    }
}

#[tokio::test]
async fn only_semi_honest_extensions_of_one_part_are_prepared_ahead() {
    for (security, count, ok) in [
        (Security::SemiHonest, params::MAX_PART, true),
        (Security::SemiHonest, params::MAX_PART + 1, false),
        (Security::Malicious, 1000, false),
    ] {
        let (mut x, mut y) = Channel::memory_pair(Limits::default());
        let sid = SessionId::new(b"prepared refusals");
        let receiver = tokio::spawn(async move {
            let cfg = ExtConfig::default();
            SilentReceiver::setup(&mut y, &sid, security, cfg, &mut OsRng).await
        });
        let cfg = ExtConfig::default();
        let mut s = SilentSender::setup(&mut x, &sid, security, cfg, &mut OsRng)
            .await
            .expect("sender setup");
        receiver
            .await
            .expect("receiver task")
            .expect("receiver setup");
        let got = s.prepare_vole(count, 4, &mut OsRng);
        match ok {
            true => assert_eq!(got.expect("prepared").count(), count),
            false => assert!(matches!(got, Err(OtError::InvalidArgument(_)))),
        }
    }
}
