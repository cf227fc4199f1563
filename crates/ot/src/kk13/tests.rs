use super::code::*;
use super::*;
use crate::choice::ChoiceBits;
use crate::error::OtError;
use crate::ext::{ExtConfig, OtExtReceiver, OtExtSender, Security};
use crate::messages::{kind, ExtHeader, Mode, PROTOCOL_ID};
use crate::session::SessionId;
use psikit_transport::{Channel, Frame, Limits};
use rand::rngs::StdRng;
use rand::SeedableRng;
use sha2::{Digest, Sha256};

#[test]
fn walsh_hadamard_distance_is_128() {
    let t = code_table();
    assert_eq!(t[0], [0, 0]);
    for a in 0..256 {
        for b in (a + 1)..256 {
            let d = (t[a][0] ^ t[b][0]).count_ones() + (t[a][1] ^ t[b][1]).count_ones();
            assert_eq!(d, 128, "{a} vs {b}");
        }
    }
}

#[test]
fn secret_codewords_are_the_table_s() {
    let t = code_table();
    for w in 0..=255u8 {
        assert_eq!(secret_codeword(w), t[usize::from(w)], "choice {w}");
    }
}

/// Asserts the KK13 correlation and the random-OT outputs.
fn assert_kk13(s: &Kk13SenderOts, r: &Kk13ReceiverOts, choices: &[u8]) {
    let n = s.n_choices();
    let all = s.messages();
    let rm = r.messages();
    let code = code_table();
    for (i, w) in choices.iter().enumerate() {
        let w = usize::from(*w);
        assert_eq!(r.choice(i), w);
        let (q, t, c, sm) = (s.q(i), r.t(i), code[w], s.s());
        assert_eq!(
            [q[0] ^ t[0], q[1] ^ t[1]],
            [c[0] & sm[0], c[1] & sm[1]],
            "row {i}"
        );
        assert_eq!(rm[i], r.message(i));
        for j in 0..n {
            assert_eq!(all[i * n + j], s.message(i, j));
            if j == w {
                assert_eq!(rm[i], all[i * n + j], "OT {i}");
            } else {
                assert_ne!(rm[i], all[i * n + j], "OT {i}, message {j}");
            }
        }
    }
}

/// The batched messages equal the single ones, over any range.
fn assert_batches(s: &Kk13SenderOts) {
    let n = s.n_choices();
    for (first, count, k) in [
        (0, s.len(), n),
        (3, 5.min(s.len() - 3), 1),
        (1, 7, 3.min(n)),
    ] {
        let mut out = vec![0u128; count * k];
        s.messages_into(first, k, &mut out);
        for (at, m) in out.iter().enumerate() {
            assert_eq!(*m, s.message(first + at / k, at % k), "{first} {count} {k}");
        }
    }
}

#[test]
fn the_hash_is_sha256_of_prefix_tweak_and_input() {
    let sid = SessionId::new(b"kk13 hash");
    let h = Kk13Hash::new(&sid, 16);
    let x = [u128::MAX / 3, 0x0123_4567_89ab_cdef];
    let mut prefix = [0u8; 64];
    prefix[..22].copy_from_slice(b"psikit-ot/kk13/hash/v1");
    prefix[24..56].copy_from_slice(&sid.0);
    prefix[56..58].copy_from_slice(&16u16.to_be_bytes());
    let mut d = Sha256::new();
    d.update(prefix);
    d.update(77u64.to_be_bytes());
    d.update(x[0].to_le_bytes());
    d.update(x[1].to_le_bytes());
    let want = u128::from_le_bytes(d.finalize()[..16].try_into().expect("16"));
    assert_eq!(h.hash(77, &x), want);
}

async fn run(n_choices: usize, count: usize, cfg: ExtConfig) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"kk13");
    let scfg = cfg.clone();
    let sender = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(1);
        let mut s = Kk13Sender::setup(&mut a, &sid, n_choices, scfg, &mut rng)
            .await
            .unwrap();
        let o1 = s.extend(&mut a, count).await.unwrap();
        let o2 = s.extend(&mut a, 300).await.unwrap();
        (o1, o2)
    });
    let mut rng = StdRng::seed_from_u64(2);
    let mut r = Kk13Receiver::setup(&mut b, &sid, n_choices, cfg, &mut rng)
        .await
        .unwrap();
    let c1 = random_choices(count, n_choices, &mut rng);
    let c2 = random_choices(300, n_choices, &mut rng);
    let r1 = r.extend(&mut b, &c1).await.unwrap();
    let r2 = r.extend(&mut b, &c2).await.unwrap();
    let (s1, s2) = sender.await.unwrap();
    assert_batches(&s2);
    assert_kk13(&s1, &r1, &c1);
    assert_kk13(&s2, &r2, &c2);
}

#[tokio::test]
async fn kk13_correlation_for_several_n() {
    for n in [2, 4, 16, 256] {
        run(n, 2_000, ExtConfig::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kk13_one_thread_small_frames() {
    let mut cfg = ExtConfig::with_threads(1).unwrap();
    cfg.frame_rows = 1024;
    run(16, 5_000, cfg).await;
}

#[tokio::test]
async fn kk13_bootstrapped_from_1_of_2_extension_and_checks_arguments() {
    // The 1-out-of-2 *receiver* becomes the KK13 *sender*.
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"kk13-boot");
    let t = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(3);
        let mut s = OtExtSender::setup(
            &mut a,
            &sid,
            Security::Malicious,
            ExtConfig::default(),
            &mut rng,
        )
        .await
        .unwrap();
        let ots = s.extend(&mut a, 256).await.unwrap();
        let mut kr =
            Kk13Receiver::from_base_ots(&ots.to_base_sender(0..256), &sid, 4, ExtConfig::default())
                .unwrap();
        let choices = vec![3, 0, 1, 2, 2];
        let out = kr.extend(&mut a, &choices).await.unwrap();
        assert!(kr.extend(&mut a, &[4]).await.is_err());
        (out, choices)
    });
    let mut rng = StdRng::seed_from_u64(4);
    let mut r = OtExtReceiver::setup(
        &mut b,
        &sid,
        Security::Malicious,
        ExtConfig::default(),
        &mut rng,
    )
    .await
    .unwrap();
    let ots = r
        .extend(&mut b, &ChoiceBits::random(256, &mut rng))
        .await
        .unwrap();
    let mut ks =
        Kk13Sender::from_base_ots(&ots.to_base_receiver(0..256), &sid, 4, ExtConfig::default())
            .unwrap();
    let s_out = ks.extend(&mut b, 5).await.unwrap();
    let (r_out, choices) = t.await.unwrap();
    assert_kk13(&s_out, &r_out, &choices);
    assert!(Kk13Sender::from_base_ots(
        &ots.to_base_receiver(0..128),
        &sid,
        4,
        ExtConfig::default()
    )
    .is_err());
    assert!(Kk13Sender::from_base_ots(
        &ots.to_base_receiver(0..256),
        &sid,
        257,
        ExtConfig::default()
    )
    .is_err());
}

#[tokio::test]
async fn kk13_rejects_wrong_n_and_short_frames() {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"kk13-bad");
    let t = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(5);
        let mut s = Kk13Sender::setup(&mut a, &sid, 16, ExtConfig::default(), &mut rng)
            .await
            .unwrap();
        s.extend(&mut a, 10).await
    });
    let mut rng = StdRng::seed_from_u64(6);
    let mut r = Kk13Receiver::setup(&mut b, &sid, 8, ExtConfig::default(), &mut rng)
        .await
        .unwrap();
    let _ = r.extend(&mut b, &[1; 10]).await;
    assert!(matches!(t.await.unwrap(), Err(OtError::Mismatch(_))));

    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let t = tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(5);
        let mut s = Kk13Sender::setup(&mut a, &sid, 16, ExtConfig::default(), &mut rng)
            .await
            .unwrap();
        s.extend(&mut a, 10).await
    });
    let _r = Kk13Receiver::setup(&mut b, &sid, 16, ExtConfig::default(), &mut rng)
        .await
        .unwrap();
    let h = ExtHeader {
        mode: Mode::Kk13,
        param: 16,
        first_row: 0,
        n: 10,
        frame_rows: 1024,
    };
    b.send(&h.to_frame()).await.unwrap();
    b.send(&Frame::new(
        PROTOCOL_ID,
        kind::EXT_MATRIX,
        vec![0; 128 * 16],
    ))
    .await
    .unwrap();
    assert!(matches!(t.await.unwrap(), Err(OtError::Malformed(_))));
}
