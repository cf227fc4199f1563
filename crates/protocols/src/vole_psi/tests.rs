//! VOLE-PSI end to end on in-memory channels, against the plaintext
//! intersection.

use psikit_transport::{Channel, ErrorCode, Limits, TransportError};

use super::config::*;
use super::facade::VolePsi;
use super::*;
use crate::common::two_party::{
    self,
    testing::{sets, step_pair},
};
use crate::common::NoProgress;
use crate::error::Error;
use psikit_ot::ExtConfig;

async fn run_pair(
    sender_items: Vec<Vec<u8>>,
    receiver_items: Vec<Vec<u8>>,
    cfg: VoleConfig,
) -> (Result<SenderOutcome, Error>, Result<ReceiverOutcome, Error>) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let cfg2 = cfg.clone();
    let sender =
        tokio::spawn(async move { run_sender(&mut a, &sender_items, &cfg2, &NoProgress).await });
    let receiver = run_receiver(&mut b, &receiver_items, &cfg, &NoProgress).await;
    drop(b);
    (sender.await.expect("sender task"), receiver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_the_plaintext_intersection() {
    check_against_plaintext(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malicious_mode_matches_the_plaintext_intersection() {
    check_against_plaintext(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_communication_mode_matches_the_plaintext_intersection() {
    check_config(VoleConfig {
        low_comm: true,
        ..VoleConfig::default()
    })
    .await;
}

async fn check_against_plaintext(malicious: bool) {
    check_config(VoleConfig {
        malicious,
        ..VoleConfig::default()
    })
    .await;
}

async fn check_config(cfg: VoleConfig) {
    for (i, (n_s, n_r, overlap)) in [
        (1, 1, 1),
        (0, 10, 0),
        (10, 0, 0),
        (40, 25, 10),
        (300, 200, 150),
        (64, 64, 64),
        (5000, 3000, 1234),
    ]
    .into_iter()
    .enumerate()
    {
        let (s, r, truth) = sets(i as u64, n_s, n_r, overlap);
        let (s_out, r_out) = run_pair(s, r, cfg.clone()).await;
        let s_out = s_out.expect("sender");
        let r_out = r_out.expect("receiver");
        assert_eq!(r_out.matches, truth, "sizes {n_s} {n_r} {overlap}");
        assert!(s_out.revealed.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_learns_the_intersection_only_when_revealed() {
    let (s, r, truth) = sets(9, 500, 400, 123);
    let cfg = VoleConfig {
        reveal_to_sender: true,
        ..VoleConfig::default()
    };
    let (s_out, r_out) = run_pair(s.clone(), r.clone(), cfg).await;
    assert_eq!(r_out.expect("receiver").matches, truth);
    let mut revealed: Vec<&Vec<u8>> = s_out
        .expect("sender")
        .revealed
        .expect("revealed")
        .iter()
        .map(|&i| &s[i])
        .collect();
    revealed.sort();
    let shared: Vec<&Vec<u8>> = r
        .iter()
        .zip(&truth)
        .filter(|(_, t)| **t)
        .map(|(x, _)| x)
        .collect();
    assert_eq!(revealed, shared);
}

#[tokio::test]
async fn mismatched_security_settings_are_refused_by_both() {
    let (s, r, _) = sets(3, 10, 10, 5);
    let malicious = VoleConfig {
        malicious: true,
        ..VoleConfig::default()
    };
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sender = tokio::spawn(async move { run_sender(&mut a, &s, &malicious, &NoProgress).await });
    let receiver = run_receiver(&mut b, &r, &VoleConfig::default(), &NoProgress).await;
    for err in [receiver.err(), sender.await.expect("task").err()] {
        let text = err.expect("refused").to_string();
        assert!(text.contains("malicious"), "{text}");
    }
}

/// A malicious-mode sender that runs everything honestly but opens its
/// offset commitment with another value: the receiver aborts, names the
/// reason, and tells the sender.
#[tokio::test]
async fn a_sender_that_opens_another_offset_is_caught() {
    use psikit_ot::silent::SilentSender;
    use psikit_structures::okvs::OkvsParams;
    let (_, r, _) = sets(8, 300, 300, 100);
    let cfg = VoleConfig {
        malicious: true,
        ..VoleConfig::default()
    };
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let cheater_cfg = cfg.clone();
    let cheater = tokio::spawn(async move {
        let n_r = two_party::hello::<{ messages::PROTOCOL_ID }>(&mut a, &cheater_cfg.terms(300))
            .await
            .expect("hello");
        a.send_msg(&messages::Commitment(oprf::commit(1)))
            .await
            .expect("commit");
        let messages::OkvsSeed(seed) = a.recv_msg(()).await.expect("seed");
        let params = OkvsParams::new(n_r as usize).expect("params");
        let m = params.table_len();
        let sid = session_id(&seed, 300, n_r);
        let mut vole = SilentSender::setup(
            &mut a,
            &sid,
            cheater_cfg.security(),
            ExtConfig::default(),
            &mut rand::rngs::OsRng,
        )
        .await
        .expect("setup");
        vole.vole(&mut a, m, 128, &mut rand::rngs::OsRng)
            .await
            .expect("vole");
        let _: messages::ReceiverOffset = a.recv_msg(()).await.expect("offset");
        for _ in messages::frames(&params, 128) {
            a.recv_expect(messages::PROTOCOL_ID, messages::KIND_MASKED)
                .await
                .expect("table");
        }
        a.send_msg(&messages::SenderOffset(2u128.to_le_bytes()))
            .await
            .expect("opening");
        a.recv().await
    });
    let err = run_receiver(&mut b, &r, &cfg, &NoProgress)
        .await
        .expect_err("caught");
    assert!(
        matches!(&err, Error::Aborted(why) if why.contains("commitment")),
        "{err}"
    );
    drop(b);
    let told = cheater.await.expect("task").expect_err("error frame");
    assert!(told.to_string().contains("commitment"), "{told}");
}

#[tokio::test]
async fn mismatched_reveal_settings_are_refused_by_both() {
    let (s, r, _) = sets(3, 10, 10, 5);
    let reveal = VoleConfig {
        reveal_to_sender: true,
        ..VoleConfig::default()
    };
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sender = tokio::spawn(async move { run_sender(&mut a, &s, &reveal, &NoProgress).await });
    let receiver = run_receiver(&mut b, &r, &VoleConfig::default(), &NoProgress).await;
    for err in [receiver.err(), sender.await.expect("task").err()] {
        let text = err.expect("refused").to_string();
        assert!(text.contains("--reveal"), "{text}");
    }
}

#[tokio::test]
async fn an_oversized_peer_set_is_refused_before_any_work() {
    let (s, r, _) = sets(4, 50, 10, 5);
    let small = VoleConfig {
        max_set_size: 20,
        ..VoleConfig::default()
    };
    let (_, r_out) = run_pair(s, r, small).await;
    let text = r_out.expect_err("refused").to_string();
    assert!(text.contains("--max-peer-items"), "{text}");
}

#[tokio::test]
async fn a_receiver_that_stops_after_its_seed_is_an_error_not_a_panic() {
    let (s, _, _) = sets(5, 100, 100, 0);
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sender =
        tokio::spawn(
            async move { run_sender(&mut a, &s, &VoleConfig::default(), &NoProgress).await },
        );
    let cfg = VoleConfig::default();
    two_party::hello::<{ messages::PROTOCOL_ID }>(&mut b, &cfg.terms(100))
        .await
        .expect("hello");
    b.send_msg(&messages::OkvsSeed([1; 16]))
        .await
        .expect("seed");
    b.send_error(
        messages::PROTOCOL_ID,
        &psikit_transport::ErrorMessage::new(ErrorCode::Aborted, "stopping"),
    )
    .await;
    drop(b);
    let err = sender.await.expect("task").expect_err("sender fails");
    assert!(
        matches!(
            &err,
            Error::Ot(_) | Error::Transport(TransportError::Peer(_) | TransportError::Closed)
        ),
        "{err}"
    );
}

/// Both parties as sans-IO state machines, bytes carried by hand, no
/// runtime: the same core as over TCP.
#[test]
fn stepped_parties_match_plaintext_without_a_runtime() {
    for malicious in [false, true] {
        let (s, r, truth) = sets(12, 700, 600, 321);
        let cfg = VoleConfig {
            malicious,
            ..VoleConfig::default()
        };
        let (s_out, r_out) = step_pair::<VolePsi>(s, r, cfg, Limits::default());
        assert_eq!(
            r_out.expect("receiver").matches,
            truth,
            "malicious {malicious}"
        );
        assert!(s_out.expect("sender").revealed.is_none());
    }
}

#[tokio::test]
async fn differently_encoded_keys_are_refused_with_both_formats_named() {
    let (s, r, _) = sets(6, 10, 10, 5);
    let format = |f: &str| VoleConfig {
        key_format: f.into(),
        ..VoleConfig::default()
    };
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let cfg = format("psikit-key-v1;columns=1;normalize=trim,lower");
    let sender = tokio::spawn(async move { run_sender(&mut a, &s, &cfg, &NoProgress).await });
    let receiver = run_receiver(
        &mut b,
        &r,
        &format("psikit-key-v1;columns=1;normalize=trim"),
        &NoProgress,
    )
    .await;
    for err in [receiver.err(), sender.await.expect("task").err()] {
        let text = err.expect("refused").to_string();
        assert!(
            text.contains("normalize=trim,lower") && text.contains("--normalize"),
            "{text}"
        );
    }
}

/// A receiver that runs the VOLE honestly, then sends a masked table of
/// the wrong size (a frame too long, or none before it hangs up): the
/// sender refuses it with a clear error, without a panic or a wait.
#[tokio::test]
async fn a_masked_table_of_the_wrong_size_is_refused() {
    use psikit_ot::silent::SilentReceiver;
    use psikit_ot::{ExtConfig, SessionId};
    use psikit_structures::okvs::OkvsParams;
    for oversized in [true, false] {
        let (s, _, _) = sets(7, 200, 200, 0);
        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let sender = tokio::spawn(async move {
            run_sender(&mut a, &s, &VoleConfig::default(), &NoProgress).await
        });
        let (n_r, seed) = (150u64, [3u8; 16]);
        let security = psikit_ot::Security::SemiHonest;
        let n_s = two_party::hello::<{ messages::PROTOCOL_ID }>(
            &mut b,
            &VoleConfig::default().terms(n_r),
        )
        .await
        .expect("hello");
        b.send_msg(&messages::OkvsSeed(seed)).await.expect("seed");
        let m = OkvsParams::new(n_r as usize).expect("params").table_len();
        let sid = SessionId::new(&[&seed[..], &n_s.to_be_bytes(), &n_r.to_be_bytes()].concat());
        let mut vole = SilentReceiver::setup(
            &mut b,
            &sid,
            security,
            ExtConfig::default(),
            &mut rand::rngs::OsRng,
        )
        .await
        .expect("setup");
        vole.vole(&mut b, m, 128, &mut rand::rngs::OsRng)
            .await
            .expect("vole");
        // One bin, so one frame: an entry too long, or none at all.
        if oversized {
            let table = vec![0u8; m * 16 + 16];
            b.send_payload(messages::PROTOCOL_ID, messages::KIND_MASKED, &table)
                .await
                .expect("frame");
        }
        drop(b);
        let err = sender.await.expect("task").expect_err("refused");
        match oversized {
            true => assert!(err.to_string().contains("masked OKVS table"), "{err}"),
            false => assert!(
                matches!(
                    err,
                    Error::Transport(TransportError::Closed | TransportError::Io(_))
                ),
                "{err}"
            ),
        }
    }
}

/// A job's buckets run at σ = 40 + log2 B: the summaries grow by those
/// bits (so B buckets' false matches add up to 2^-40), the result stays
/// exact, a σ below 40 is refused, and parties on different σ fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistical_security_sets_the_summary_length() {
    let (s, r, truth) = sets(31, 3000, 2000, 999);
    let at = |sigma| VoleConfig {
        statistical_bits: sigma,
        ..VoleConfig::default()
    };
    let mut sent = Vec::new();
    for sigma in [40, 56] {
        let (s_out, r_out) = run_pair(s.clone(), r.clone(), at(sigma)).await;
        assert_eq!(r_out.expect("receiver").matches, truth, "σ {sigma}");
        sent.push(s_out.expect("sender").bytes_sent);
    }
    // 16 more bits a value (the VOLE's own bytes move a little with the
    // OKVS's length).
    assert!(sent[1] > sent[0] + 3000, "{sent:?}");
    let (_, r_out) = run_pair(s.clone(), r.clone(), at(39)).await;
    assert!(matches!(r_out, Err(Error::Config(_))), "{r_out:?}");
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sender = tokio::spawn(async move { run_sender(&mut a, &s, &at(40), &NoProgress).await });
    let receiver = run_receiver(&mut b, &r, &at(56), &NoProgress).await;
    drop(b);
    assert!(receiver.is_err() && sender.await.expect("task").is_err());
}
