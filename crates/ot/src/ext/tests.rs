use super::receiver::Cheat;
use super::*;
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::messages::{kind, ExtHeader, Mode, PROTOCOL_ID};
use crate::session::SessionId;
use psikit_transport::Channel;
use psikit_transport::{ErrorCode, Frame, Limits, TransportError};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn sid() -> SessionId {
    SessionId::new(b"ext-tests")
}

/// Both parties set up over an in-memory channel, the sender in its own
/// task; returns the two parties and their channels.
async fn setup_pair(
    security: Security,
    cfg: ExtConfig,
    delta: Option<u128>,
) -> (OtExtSender, Channel, OtExtReceiver, Channel) {
    let (mut cs, mut cr) = Channel::memory_pair(Limits::default());
    let scfg = cfg.clone();
    let sender = tokio::spawn(async move {
        let mut rng = rng(1);
        let s = match delta {
            Some(d) => {
                OtExtSender::setup_with_delta(&mut cs, &sid(), security, scfg, d, &mut rng).await
            }
            None => OtExtSender::setup(&mut cs, &sid(), security, scfg, &mut rng).await,
        };
        (s.unwrap(), cs)
    });
    let r = OtExtReceiver::setup(&mut cr, &sid(), security, cfg, &mut rng(2))
        .await
        .unwrap();
    let (s, cs) = sender.await.unwrap();
    (s, cs, r, cr)
}

/// One extension with the sender in its own task.
async fn extend_pair(
    mut s: OtExtSender,
    mut cs: Channel,
    r: &mut OtExtReceiver,
    cr: &mut Channel,
    choices: &ChoiceBits,
) -> (
    Result<SenderOts, OtError>,
    Result<ReceiverOts, OtError>,
    OtExtSender,
    Channel,
) {
    let n = choices.len();
    let task = tokio::spawn(async move {
        let out = s.extend(&mut cs, n).await;
        (out, s, cs)
    });
    let rout = r.extend(cr, choices).await;
    let (sout, s, cs) = task.await.unwrap();
    (sout, rout, s, cs)
}

/// Checks the COT correlation and the random-OT outputs.
fn assert_outputs(s: &SenderOts, r: &ReceiverOts, choices: &ChoiceBits) {
    assert_eq!(s.len(), choices.len());
    assert_eq!(r.len(), choices.len());
    assert_eq!(r.choices(), choices);
    let delta = s.delta();
    let sm = s.messages();
    let rm = r.messages();
    for i in 0..choices.len() {
        let b = choices.get(i);
        assert_eq!(
            s.q()[i] ^ r.t()[i],
            if b { delta } else { 0 },
            "COT row {i}"
        );
        assert_eq!(s.correlated(i)[usize::from(b)], r.t()[i]);
        assert_eq!(rm[i], sm[i][usize::from(b)], "ROT {i}");
        assert_ne!(rm[i], sm[i][usize::from(!b)], "ROT {i} other message");
        assert_eq!(rm[i], r.message(i));
        assert_eq!(sm[i], [s.message(i, false), s.message(i, true)]);
    }
    assert_eq!(
        s.messages_for(true),
        sm.iter().map(|p| p[1]).collect::<Vec<_>>()
    );
    assert_eq!(
        s.messages_for(false),
        sm.iter().map(|p| p[0]).collect::<Vec<_>>()
    );
    // Batched lookups at scattered, repeated indices, past one hash batch.
    let n = choices.len() as u32;
    let indices: Vec<u32> = (0..300u32).map(|j| (j * 7919 + j / 3) % n).collect();
    let mut batch = vec![0u128; indices.len()];
    for bit in [false, true] {
        s.messages_at(&indices, bit, &mut batch);
        for (&i, m) in indices.iter().zip(&batch) {
            assert_eq!(*m, sm[i as usize][usize::from(bit)], "sender batch {i}");
        }
    }
    r.messages_at(&indices, &mut batch);
    for (&i, m) in indices.iter().zip(&batch) {
        assert_eq!(*m, rm[i as usize], "receiver batch {i}");
    }
}

async fn random_ots_work(security: Security, cfg: ExtConfig) {
    let (s, cs, mut r, mut cr) = setup_pair(security, cfg, None).await;
    // 10% ones, a count that is not a multiple of 128, then a second
    // extension on the same base OTs.
    let c1 = ChoiceBits::random_with_ones(70_001, 7_000, &mut rng(3));
    let (so, ro, s, cs) = extend_pair(s, cs, &mut r, &mut cr, &c1).await;
    assert_outputs(&so.unwrap(), &ro.unwrap(), &c1);
    let c2 = ChoiceBits::random(3_000, &mut rng(4));
    let (so, ro, s, _) = extend_pair(s, cs, &mut r, &mut cr, &c2).await;
    let (so, ro) = (so.unwrap(), ro.unwrap());
    assert_outputs(&so, &ro, &c2);
    // The second batch continues the PRG streams and tweaks.
    assert!(so.tweak(0) >= 70_001);
    assert_ne!(s.delta(), 0);
}

/// The rows buffer goes back to the instance when the outputs are dropped
/// and is reused, grown, by the next extension, which must overwrite every
/// row; outputs that outlive their instance keep working.
#[tokio::test]
async fn recycled_rows_are_rewritten() {
    let (s, cs, mut r, mut cr) = setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let c1 = ChoiceBits::random(5_000, &mut rng(5));
    let (so, ro, s, cs) = extend_pair(s, cs, &mut r, &mut cr, &c1).await;
    drop((so.unwrap(), ro.unwrap()));
    let c2 = ChoiceBits::random(9_000, &mut rng(6));
    let (so, ro, s, _) = extend_pair(s, cs, &mut r, &mut cr, &c2).await;
    let (so, ro) = (so.unwrap(), ro.unwrap());
    drop((s, r));
    assert_outputs(&so, &ro, &c2);
}

#[tokio::test]
async fn iknp_random_ots() {
    random_ots_work(Security::SemiHonest, ExtConfig::default()).await;
}

#[tokio::test]
async fn kos_random_ots() {
    random_ots_work(Security::Malicious, ExtConfig::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_thread_pools_small_frames_and_extend_random() {
    let mut cfg = ExtConfig::with_threads(1).unwrap();
    cfg.frame_rows = 1024; // many frames, the last one partial
    random_ots_work(Security::Malicious, cfg.clone()).await;
    random_ots_work(Security::SemiHonest, cfg.clone()).await;
    extend_random_work(Security::Malicious, cfg.clone()).await;
    extend_random_work(Security::SemiHonest, cfg).await;
}

/// `extend_random` on one side interoperates with `extend` on the other,
/// and gives the same messages as lazy hashing.
async fn extend_random_work(security: Security, cfg: ExtConfig) {
    let (mut s, mut cs, mut r, mut cr) = setup_pair(security, cfg, None).await;
    let choices = ChoiceBits::random_with_ones(5_000, 500, &mut rng(21));
    let n = choices.len();
    let task = tokio::spawn(async move {
        let random = s.extend_random(&mut cs, n).await.unwrap();
        let lazy = s.extend(&mut cs, n).await.unwrap();
        (random, lazy)
    });
    let lazy = r.extend(&mut cr, &choices).await.unwrap();
    let random = r.extend_random(&mut cr, &choices).await.unwrap();
    let (s_random, s_lazy) = task.await.unwrap();
    assert_eq!(random.choices(), &choices);
    assert_eq!((s_random.len(), random.len()), (n, n));
    for i in 0..n {
        let b = choices.get(i);
        assert_eq!(s_random.message(i, b), lazy.message(i));
        assert_ne!(s_random.message(i, !b), lazy.message(i));
        assert_eq!(s_random.messages_for(b)[i], lazy.message(i));
        assert_eq!(s_lazy.message(i, b), random.message(i));
        assert_eq!(random.messages()[i], random.message(i));
    }
}

#[tokio::test]
async fn chosen_delta_and_all_ones_or_zeros() {
    let delta = 0x0123_4567_89ab_cdef_0011_2233_4455_6677 | 1;
    let (s, cs, mut r, mut cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), Some(delta)).await;
    assert_eq!(s.delta(), delta);
    let ones = ChoiceBits::from_bools(&[true; 300]);
    let (so, ro, s, cs) = extend_pair(s, cs, &mut r, &mut cr, &ones).await;
    assert_outputs(&so.unwrap(), &ro.unwrap(), &ones);
    let zeros = ChoiceBits::zeros(5);
    let (so, ro, _, _) = extend_pair(s, cs, &mut r, &mut cr, &zeros).await;
    assert_outputs(&so.unwrap(), &ro.unwrap(), &zeros);
}

/// Runs a KOS extension whose receiver cheats as `cheat` says; returns the
/// sender's and receiver's results.
async fn cheating_run(
    delta: Option<u128>,
    cheat: Cheat,
) -> (
    Result<SenderOts, OtError>,
    Result<ReceiverOts, OtError>,
    u128,
) {
    let (s, cs, mut r, mut cr) = setup_pair(Security::Malicious, ExtConfig::default(), delta).await;
    let d = s.delta();
    r.cheat = Some(cheat);
    let choices = ChoiceBits::random(10_000, &mut rng(8));
    let (so, ro, _, _) = extend_pair(s, cs, &mut r, &mut cr, &choices).await;
    (so, ro, d)
}

fn assert_caught(so: Result<SenderOts, OtError>, ro: Result<ReceiverOts, OtError>) {
    assert!(matches!(so, Err(OtError::ConsistencyCheck)), "{so:?}");
    match ro {
        Err(OtError::Transport(TransportError::Peer(m))) => assert_eq!(m.code, ErrorCode::Aborted),
        other => panic!("receiver should see the abort, got {other:?}"),
    }
}

#[tokio::test]
async fn kos_catches_inconsistent_columns() {
    // Column j uses choice vector r with bit (37 * j) flipped: the matrix is
    // consistent with no single r. Each cheated column passes with
    // probability 1/2, all 128 with probability 2^-128.
    let flips = (0..128).map(|j| (j, (37 * j) % 10_000)).collect();
    for compensate in [false, true] {
        let (so, ro, _) = cheating_run(
            None,
            Cheat {
                flips: Flips::clone(&flips),
                compensate,
            },
        )
        .await;
        assert_caught(so, ro);
    }
    // A receiver using a completely different random choice vector in half
    // of the columns.
    let mut other = rng(99);
    let flips = (0..128)
        .step_by(2)
        .flat_map(|j| {
            let bits: Vec<usize> = (0..10_000).filter(|_| other.gen::<bool>()).collect();
            bits.into_iter().map(move |i| (j, i))
        })
        .collect();
    let (so, ro, _) = cheating_run(
        None,
        Cheat {
            flips,
            compensate: false,
        },
    )
    .await;
    assert_caught(so, ro);
}

type Flips = Vec<(usize, usize)>;

#[tokio::test]
async fn kos_check_leaks_only_a_guessed_bit() {
    // The inherent KOS leakage: cheating in one column passes exactly when
    // the cheater's guess of that bit of Δ is right (uncompensated flips
    // pass iff Δ_j = 0, compensated ones iff Δ_j = 1), and is caught otherwise.
    let delta: u128 = 0b10; // Δ_0 = 0, Δ_1 = 1
    for (col, compensate, passes) in [
        (0, false, true),
        (1, false, false),
        (0, true, false),
        (1, true, true),
    ] {
        let cheat = Cheat {
            flips: vec![(col, 4242)],
            compensate,
        };
        let (so, ro, _) = cheating_run(Some(delta), cheat).await;
        if passes {
            assert!(so.is_ok() && ro.is_ok());
        } else {
            assert_caught(so, ro);
        }
    }
}

#[tokio::test]
async fn malformed_messages_are_errors() {
    // Wrong-sized matrix frame.
    let (mut s, mut cs, _r, mut cr) =
        setup_pair(Security::SemiHonest, ExtConfig::default(), None).await;
    let task = tokio::spawn(async move { (s.extend(&mut cs, 1000).await, s, cs) });
    let h = ExtHeader {
        mode: Mode::Iknp,
        param: 0,
        first_row: 0,
        n: 1000,
        frame_rows: 1024,
    };
    cr.send(&h.to_frame()).await.unwrap();
    cr.send(&Frame::new(PROTOCOL_ID, kind::EXT_MATRIX, vec![0; 100]))
        .await
        .unwrap();
    let (out, mut s, mut cs) = task.await.unwrap();
    assert!(matches!(out, Err(OtError::Malformed(_))), "{out:?}");
    assert!(matches!(cr.recv().await, Err(TransportError::Peer(_))));
    // The failed instance refuses further use.
    assert!(matches!(
        s.extend(&mut cs, 10).await,
        Err(OtError::Poisoned)
    ));

    // Header disagreeing on the count, the mode, the row, or the frame size.
    for h in [
        ExtHeader { n: 999, ..h },
        ExtHeader {
            mode: Mode::Kos,
            ..h
        },
        ExtHeader { param: 4, ..h },
        ExtHeader {
            first_row: 128,
            ..h
        },
        ExtHeader {
            frame_rows: 1000,
            ..h
        },
        ExtHeader {
            frame_rows: 1 << 30,
            ..h
        },
    ] {
        let (mut s, mut cs, _r, mut cr) =
            setup_pair(Security::SemiHonest, ExtConfig::default(), None).await;
        let task = tokio::spawn(async move { s.extend(&mut cs, 1000).await });
        cr.send(&h.to_frame()).await.unwrap();
        let out = task.await.unwrap();
        assert!(
            matches!(out, Err(OtError::Mismatch(_) | OtError::Malformed(_))),
            "{h:?}: {out:?}"
        );
    }

    // Truncated header.
    let (mut s, mut cs, _r, mut cr) =
        setup_pair(Security::SemiHonest, ExtConfig::default(), None).await;
    let task = tokio::spawn(async move { s.extend(&mut cs, 1000).await });
    cr.send(&Frame::new(PROTOCOL_ID, kind::EXT_HEADER, vec![1, 0, 0]))
        .await
        .unwrap();
    assert!(matches!(task.await.unwrap(), Err(OtError::Malformed(_))));

    // A short KOS seed and a short KOS check answer.
    let (_s, mut cs, mut r, mut cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let task = tokio::spawn(async move {
        let choices = ChoiceBits::random(200, &mut rng(5));
        r.extend(&mut cr, &choices).await
    });
    let _header = cs.recv_expect(PROTOCOL_ID, kind::EXT_HEADER).await.unwrap();
    let _matrix = cs.recv_expect(PROTOCOL_ID, kind::EXT_MATRIX).await.unwrap();
    cs.send(&Frame::new(PROTOCOL_ID, kind::KOS_SEED, vec![7; 15]))
        .await
        .unwrap();
    assert!(matches!(task.await.unwrap(), Err(OtError::Malformed(_))));

    let (mut s, mut cs, _r, mut cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let task = tokio::spawn(async move { s.extend(&mut cs, 100).await });
    let h = ExtHeader {
        mode: Mode::Kos,
        param: 0,
        first_row: 0,
        n: 100,
        frame_rows: 1024,
    };
    cr.send(&h.to_frame()).await.unwrap();
    cr.send(&Frame::new(
        PROTOCOL_ID,
        kind::EXT_MATRIX,
        vec![0; 256 * 16],
    ))
    .await
    .unwrap();
    let _seed = cr.recv_expect(PROTOCOL_ID, kind::KOS_SEED).await.unwrap();
    cr.send(&Frame::new(PROTOCOL_ID, kind::KOS_CHECK, vec![0; 128 * 16]))
        .await
        .unwrap();
    assert!(matches!(task.await.unwrap(), Err(OtError::Malformed(_))));
}

#[tokio::test]
async fn bootstrap_from_extension_outputs() {
    // 128 random OTs from one extension seed a second, independent
    // extension in the same direction without public-key operations.
    let (s, cs, mut r, mut cr) = setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let choices = ChoiceBits::random(128, &mut rng(11));
    let (so, ro, _, _) = extend_pair(s, cs, &mut r, &mut cr, &choices).await;
    let (so, ro) = (so.unwrap(), ro.unwrap());
    // The extension receiver becomes the new sender (it holds one key per OT).
    let sid2 = sid().derive("second");
    let s2 = OtExtSender::from_base_ots(
        &ro.to_base_receiver(0..128),
        &sid2,
        Security::SemiHonest,
        ExtConfig::default(),
        &mut rng(12),
    )
    .unwrap();
    let mut r2 = OtExtReceiver::from_base_ots(
        &so.to_base_sender(0..128),
        &sid2,
        Security::SemiHonest,
        ExtConfig::default(),
        &mut rng(13),
    )
    .unwrap();
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let c2 = ChoiceBits::random(1000, &mut rng(14));
    let mut s2 = s2;
    let task = tokio::spawn(async move { s2.extend(&mut a, 1000).await });
    let ro2 = r2.extend(&mut b, &c2).await.unwrap();
    let so2 = task.await.unwrap().unwrap();
    assert_outputs(&so2, &ro2, &c2);
    assert!(OtExtSender::from_base_ots(
        &ro.to_base_receiver(0..100),
        &sid2,
        Security::SemiHonest,
        ExtConfig::default(),
        &mut rng(1)
    )
    .is_err());
}

/// The extension driven step by hand, as RR16 does: in an unconfirmed
/// extension the sender sends a frame of its own between the seed and the
/// check, which the receiver reads after its check. Outputs are right in
/// both modes, across extensions and for an empty one, and `extend`
/// (confirmed) on one side interoperates with confirmed steps on the
/// other.
#[tokio::test]
async fn steps_with_the_callers_frame_between_seed_and_check() {
    let challenge = Frame::new(9, 1, b"challenge".to_vec());
    for security in [Security::SemiHonest, Security::Malicious] {
        let (mut s, mut cs, mut r, mut cr) = setup_pair(security, ExtConfig::default(), None).await;
        let sizes = [3000, 70_001, 0, 5];
        let f = challenge.clone();
        let task = tokio::spawn(async move {
            let mut outs = Vec::new();
            for n in sizes {
                let matrix = s.receive_matrix(&mut cs, n, Confirm::No).await.unwrap();
                let seeded = matrix.send_seed(&mut cs).await.unwrap();
                cs.send(&f).await.unwrap();
                outs.push(seeded.finish(&mut cs).await.unwrap());
            }
            // Confirmed steps against the receiver's `extend`.
            let matrix = s.receive_matrix(&mut cs, 1000, Confirm::Yes).await;
            let seeded = matrix.unwrap().send_seed(&mut cs).await.unwrap();
            outs.push(seeded.finish(&mut cs).await.unwrap());
            (outs, s, cs)
        });
        let mut choices = Vec::new();
        let mut routs = Vec::new();
        for (k, n) in sizes.into_iter().enumerate() {
            let c = ChoiceBits::random(n, &mut rng(30 + k as u64));
            let matrix = r.send_matrix(&mut cr, &c, Confirm::No).await.unwrap();
            routs.push(matrix.answer_check(&mut cr).await.unwrap());
            assert_eq!(cr.recv_expect(9, 1).await.unwrap(), challenge);
            choices.push(c);
        }
        let c = ChoiceBits::random(1000, &mut rng(40));
        routs.push(r.extend(&mut cr, &c).await.unwrap());
        choices.push(c);
        let (outs, s, cs) = task.await.unwrap();
        for ((so, ro), c) in outs.iter().zip(&routs).zip(&choices) {
            match c.is_empty() {
                true => assert!(so.is_empty() && ro.is_empty()),
                false => assert_outputs(so, ro, c),
            }
        }

        // The sender runs the confirmed flow, the receiver the unconfirmed
        // one: KOS refuses the header, IKNP (no check) has one flow.
        let task = tokio::spawn(async move {
            let (mut s, mut cs) = (s, cs);
            s.extend(&mut cs, 3000).await
        });
        let c = ChoiceBits::random(3000, &mut rng(41));
        let ro = match r.send_matrix(&mut cr, &c, Confirm::No).await {
            Ok(matrix) => matrix.answer_check(&mut cr).await,
            Err(e) => Err(e),
        };
        let so = task.await.unwrap();
        if security == Security::Malicious {
            assert!(matches!(so, Err(OtError::Mismatch(_))), "{so:?}");
            assert!(ro.is_err());
        } else {
            assert!(so.is_ok() && ro.is_ok());
        }
    }
}

/// Passes `count` frames from `from` to `to`, flipping a bit of the payload
/// of each if `tamper`; returns their (protocol, kind).
async fn relay(from: &mut Channel, to: &mut Channel, count: usize, tamper: bool) -> Vec<(u8, u8)> {
    let mut seen = Vec::new();
    for _ in 0..count {
        let mut frame = from.recv().await.unwrap();
        if tamper {
            frame.payload[5] ^= 0x10;
        }
        to.send(&frame).await.unwrap();
        seen.push((frame.protocol, frame.kind));
    }
    seen
}

/// The messages of an unconfirmed KOS extension driven by steps, in wire
/// order, with the sender's own frame right after the seed.
#[tokio::test]
async fn unconfirmed_steps_wire_order() {
    let (mut s, _cs, mut r, _cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let (mut cs, mut to_s) = Channel::memory_pair(Limits::default());
    let (mut to_r, mut cr) = Channel::memory_pair(Limits::default());
    let sender = tokio::spawn(async move {
        let matrix = s.receive_matrix(&mut cs, 100_000, Confirm::No).await;
        let seeded = matrix.unwrap().send_seed(&mut cs).await.unwrap();
        cs.send(&Frame::new(9, 1, Vec::new())).await.unwrap();
        seeded.finish(&mut cs).await.unwrap();
    });
    let relayed = tokio::spawn(async move {
        let mut seen = relay(&mut to_r, &mut to_s, 3, false).await; // header, 2 frames
        seen.append(&mut relay(&mut to_s, &mut to_r, 2, false).await);
        seen.append(&mut relay(&mut to_r, &mut to_s, 1, false).await);
        seen
    });
    let choices = ChoiceBits::random(100_000, &mut rng(7));
    let matrix = r.send_matrix(&mut cr, &choices, Confirm::No).await;
    matrix.unwrap().answer_check(&mut cr).await.unwrap();
    assert_eq!(cr.recv().await.unwrap().kind, 1);
    sender.await.unwrap();
    let ot = |k| (PROTOCOL_ID, k);
    assert_eq!(
        relayed.await.unwrap(),
        [
            ot(kind::EXT_HEADER),
            ot(kind::EXT_MATRIX),
            ot(kind::EXT_MATRIX),
            ot(kind::KOS_SEED),
            (9, 1),
            ot(kind::KOS_CHECK)
        ]
    );
}

/// A failed KOS check, from a matrix inconsistent with one choice vector or
/// from a check answer tampered with on the way, is caught by `finish`,
/// reported to the receiver (at its next read, in an unconfirmed
/// extension), and leaves the sender unusable.
#[tokio::test]
async fn failed_check_is_caught_by_finish_and_poisons_the_sender() {
    // Tampered matrix.
    let (mut s, mut cs, mut r, mut cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    r.cheat = Some(Cheat {
        flips: (0..128).map(|j| (j, 37 * j)).collect(),
        compensate: false,
    });
    let task = tokio::spawn(async move {
        let matrix = s.receive_matrix(&mut cs, 10_000, Confirm::No).await;
        let seeded = matrix.unwrap().send_seed(&mut cs).await.unwrap();
        let out = seeded.finish(&mut cs).await;
        (out, s, cs)
    });
    let choices = ChoiceBits::random(10_000, &mut rng(6));
    let matrix = r.send_matrix(&mut cr, &choices, Confirm::No).await;
    assert!(matrix.unwrap().answer_check(&mut cr).await.is_ok());
    let (out, mut s, mut cs) = task.await.unwrap();
    assert!(matches!(out, Err(OtError::ConsistencyCheck)), "{out:?}");
    match cr.recv().await {
        Err(TransportError::Peer(m)) => assert_eq!(m.code, ErrorCode::Aborted),
        other => panic!("receiver should see the abort, got {other:?}"),
    }
    assert!(matches!(
        s.receive_matrix(&mut cs, 10, Confirm::No).await,
        Err(OtError::Poisoned)
    ));
    assert!(matches!(
        s.extend(&mut cs, 10).await,
        Err(OtError::Poisoned)
    ));

    // Tampered check: the parties talk through a relay that flips a bit of
    // the receiver's answer.
    let (mut s, _cs, mut r, _cr) =
        setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let (mut cs, mut to_s) = Channel::memory_pair(Limits::default());
    let (mut to_r, mut cr) = Channel::memory_pair(Limits::default());
    let sender = tokio::spawn(async move {
        let matrix = s.receive_matrix(&mut cs, 1000, Confirm::Yes).await;
        let seeded = matrix.unwrap().send_seed(&mut cs).await.unwrap();
        let out = seeded.finish(&mut cs).await;
        (out, s, cs)
    });
    // The relay does not pass the sender's error frame on, and closes the
    // link after the check.
    tokio::spawn(async move {
        relay(&mut to_r, &mut to_s, 2, false).await; // header, matrix
        relay(&mut to_s, &mut to_r, 1, false).await; // seed
        relay(&mut to_r, &mut to_s, 1, true).await; // check
    });
    let choices = ChoiceBits::random(1000, &mut rng(7));
    let receiver = async {
        let matrix = r.send_matrix(&mut cr, &choices, Confirm::Yes).await;
        matrix.unwrap().answer_check(&mut cr).await
    };
    let (sender, received) = tokio::join!(sender, receiver);
    let (out, mut s, mut cs) = sender.unwrap();
    assert!(matches!(out, Err(OtError::ConsistencyCheck)), "{out:?}");
    // The receiver, waiting for the confirmation, sees the link close.
    assert!(received.is_err());
    assert!(matches!(
        s.extend(&mut cs, 10).await,
        Err(OtError::Poisoned)
    ));
}

/// An extension dropped between its steps leaves the instance unusable on
/// either side.
#[tokio::test]
async fn dropped_steps_poison() {
    for security in [Security::SemiHonest, Security::Malicious] {
        let (mut s, mut cs, mut r, mut cr) = setup_pair(security, ExtConfig::default(), None).await;
        let task = tokio::spawn(async move {
            let matrix = s.receive_matrix(&mut cs, 1000, Confirm::No).await;
            drop(matrix.unwrap());
            let out = s.receive_matrix(&mut cs, 1000, Confirm::No).await.err();
            assert!(matches!(out, Some(OtError::Poisoned)), "{out:?}");
            assert!(matches!(
                s.extend_random(&mut cs, 10).await,
                Err(OtError::Poisoned)
            ));
        });
        let choices = ChoiceBits::random(1000, &mut rng(8));
        let matrix = r.send_matrix(&mut cr, &choices, Confirm::No).await;
        drop(matrix.unwrap());
        let out = r.send_matrix(&mut cr, &choices, Confirm::No).await.err();
        assert!(matches!(out, Some(OtError::Poisoned)), "{out:?}");
        assert!(matches!(
            r.extend(&mut cr, &choices).await,
            Err(OtError::Poisoned)
        ));
        task.await.unwrap();

        // Dropped after the seed (the receiver's check then meets a closed
        // link), and even an empty extension, which sends nothing.
        let (mut s, mut cs, mut r, mut cr) = setup_pair(security, ExtConfig::default(), None).await;
        let task = tokio::spawn(async move {
            let matrix = s.receive_matrix(&mut cs, 1000, Confirm::No).await;
            drop(matrix.unwrap().send_seed(&mut cs).await.unwrap());
            assert!(matches!(
                s.extend(&mut cs, 1000).await,
                Err(OtError::Poisoned)
            ));
        });
        let matrix = r.send_matrix(&mut cr, &choices, Confirm::No).await;
        let _ = matrix.unwrap().answer_check(&mut cr).await;
        task.await.unwrap();
        let (mut s, mut cs, mut r, mut cr) = setup_pair(security, ExtConfig::default(), None).await;
        drop(s.receive_matrix(&mut cs, 0, Confirm::No).await.unwrap());
        assert!(matches!(s.extend(&mut cs, 0).await, Err(OtError::Poisoned)));
        drop(
            r.send_matrix(&mut cr, &ChoiceBits::default(), Confirm::Yes)
                .await
                .unwrap(),
        );
        assert!(matches!(
            r.extend_random(&mut cr, &ChoiceBits::default()).await,
            Err(OtError::Poisoned)
        ));
    }
}

#[tokio::test]
async fn malicious_random_ots_hash_each_row_under_its_own_index() {
    // The silent malicious generator keys its GGM levels with these
    // messages. A malicious KOS receiver can make two rows collide up to
    // Δ (q_j = q_i ⊕ Δ); under the untweaked hash H(q) it would then get
    // both messages of OT i (m_{i,1} = H(q_i ⊕ Δ) = m_{j,0}), open both
    // sums of a tree level, rebuild the punctured leaf and so recover Δ.
    // The index tweak makes m_{i,1} and m_{j,0} unrelated.
    let (s, cs, mut r, mut cr) = setup_pair(Security::Malicious, ExtConfig::default(), None).await;
    let choices = ChoiceBits::random(300, &mut rng(5));
    let (sout, rout, _, _) = extend_pair(s, cs, &mut r, &mut cr, &choices).await;
    let (sout, _) = (sout.unwrap(), rout.unwrap());
    let (m0, m1) = (sout.messages_for(false), sout.messages_for(true));
    for i in 0..choices.len() {
        let [q0, q1] = sout.correlated(i);
        let tweak = u128::from(sout.tweak(i));
        assert_eq!(m0[i], crate::aes_hash::tccr(tweak, q0));
        assert_eq!(m1[i], crate::aes_hash::tccr(tweak, q1));
    }
    // Equal inputs at two indices hash apart.
    let q = sout.correlated(0)[1];
    assert_ne!(
        crate::aes_hash::tccr(u128::from(sout.tweak(0)), q),
        crate::aes_hash::tccr(u128::from(sout.tweak(1)), q)
    );
}
