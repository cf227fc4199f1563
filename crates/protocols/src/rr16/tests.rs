//! RR16 end to end on in-memory channels: correctness against the
//! plaintext intersection, and cheating parties.

use std::time::Duration;

use psikit_transport::{Channel, ErrorCode, Limits, TransportError};

use super::config::*;
use super::messages::{self as msg};
use super::receiver::{receive, Behaviour};
use super::session::establish;
use super::*;
use crate::common::two_party::testing::{sets, step_pair};
use crate::common::NoProgress;
use crate::error::Error;

fn limits() -> Limits {
    Limits {
        max_frame_bytes: 16 << 20,
        read_timeout: Duration::from_secs(30),
        write_timeout: Duration::from_secs(30),
    }
}

async fn run_pair(
    sender_items: Vec<Vec<u8>>,
    receiver_items: Vec<Vec<u8>>,
    cfg: Rr16Config,
    behaviour: Behaviour,
) -> (Result<SenderOutcome, Error>, Result<ReceiverOutcome, Error>) {
    let (mut a, mut b) = Channel::memory_pair(limits());
    let cfg2 = cfg.clone();
    let sender =
        tokio::spawn(async move { run_sender(&mut a, &sender_items, &cfg2, &NoProgress).await });
    let receiver = receive(&mut b, &receiver_items, &cfg, &behaviour, &NoProgress).await;
    drop(b);
    (sender.await.expect("sender task"), receiver)
}

fn small_chunks(malicious: bool) -> Rr16Config {
    Rr16Config {
        malicious,
        // Small chunks so that the tests exercise several of them.
        search: Search {
            max_chunk_ots: 1 << 16,
            ..Search::default()
        },
        ..Rr16Config::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malicious_mode_matches_plaintext_intersection() {
    for (i, (n_s, n_r, overlap)) in [
        (1, 1, 1),
        (0, 10, 0),
        (10, 0, 0),
        (40, 25, 10),
        (200, 300, 150),
        (64, 64, 64),
    ]
    .into_iter()
    .enumerate()
    {
        let (s, r, truth) = sets(i as u64, n_s, n_r, overlap);
        let (so, ro) = run_pair(s, r, small_chunks(true), Behaviour::default()).await;
        let ro = ro.unwrap();
        so.unwrap();
        assert_eq!(ro.matches, truth, "sizes {n_s}/{n_r}/{overlap}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_chunks_and_reveal_to_sender() {
    let (s, r, truth) = sets(10, 300, 500, 120);
    let cfg = Rr16Config {
        reveal_to_sender: true,
        ..small_chunks(true)
    };
    let (so, ro) = run_pair(s.clone(), r.clone(), cfg, Behaviour::default()).await;
    let (so, ro) = (so.unwrap(), ro.unwrap());
    assert!(ro.params.chunks > 1, "{:?}", ro.params);
    assert_eq!(ro.matches, truth);
    let expected: Vec<usize> = (0..s.len()).filter(|&i| r.contains(&s[i])).collect();
    assert_eq!(so.revealed, Some(expected));
    assert_eq!(so.bytes_sent, ro.bytes_received);
    assert_eq!(so.bytes_received, ro.bytes_sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_honest_mode_matches_plaintext_intersection() {
    for (i, (n_s, n_r, overlap)) in [(1, 1, 0), (100, 700, 50), (500, 500, 500)]
        .into_iter()
        .enumerate()
    {
        let (s, r, truth) = sets(20 + i as u64, n_s, n_r, overlap);
        let (so, ro) = run_pair(s, r, small_chunks(false), Behaviour::default()).await;
        so.unwrap();
        assert_eq!(ro.unwrap().matches, truth);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_modes_are_refused() {
    let (mut a, mut b) = Channel::memory_pair(limits());
    let sender = tokio::spawn(async move {
        run_sender(&mut a, &[b"x".to_vec()], &small_chunks(true), &NoProgress).await
    });
    let err = run_receiver(&mut b, &[b"x".to_vec()], &small_chunks(false), &NoProgress)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--malicious"), "{err}");
    drop(b);
    assert!(sender.await.unwrap().is_err());
}

/// Runs a cheating receiver; the sender must abort with `why`, and the
/// receiver must hear about it.
async fn sender_catches(behaviour: Behaviour, why: &str) {
    let (s, r, _) = sets(30, 100, 100, 50);
    let (so, ro) = run_pair(s, r, small_chunks(true), behaviour).await;
    match so {
        Err(Error::Aborted(text)) => assert!(text.contains(why), "{text}"),
        other => panic!("sender did not abort: {other:?}"),
    }
    match ro {
        Err(Error::Transport(TransportError::Peer(m))) => assert_eq!(m.code, ErrorCode::Aborted),
        other => panic!("receiver was not told: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_with_too_many_ones_is_caught() {
    // Twice the honest ones: about twice the honest number gets opened.
    let p = small_chunks(true).params_for(100).unwrap();
    sender_catches(
        Behaviour {
            extra_ones: p.ones_per_chunk,
            ..Behaviour::default()
        },
        "choice bit 1",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_lying_in_the_cut_and_choose_is_caught() {
    sender_catches(
        Behaviour {
            claim_all_zero: true,
            ..Behaviour::default()
        },
        "proof of its choice bits",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receiver_with_a_bad_permutation_is_caught() {
    sender_catches(
        Behaviour {
            repeat_in_permutation: true,
            ..Behaviour::default()
        },
        "not an injection",
    )
    .await;
}

/// A sender that follows the protocol until the summary values, then sends
/// `summaries` instead.
async fn malformed_summaries(summaries: Vec<u8>) -> Error {
    let (mut a, mut b) = Channel::memory_pair(limits());
    let cfg = small_chunks(false);
    let cfg2 = cfg.clone();
    let sender = tokio::spawn(async move {
        let session = establish(&mut a, &cfg2, 3, true).await?;
        let mut ot = psikit_ot::OtExtSender::setup(
            &mut a,
            &session.sid,
            psikit_ot::Security::SemiHonest,
            psikit_ot::ExtConfig::default(),
            &mut rand::rngs::OsRng,
        )
        .await?;
        for _ in 0..session.params.chunks {
            ot.extend(&mut a, session.params.ots_per_chunk as usize)
                .await?;
        }
        a.send_chunked(PROTOCOL_ID, msg::KIND_SUMMARIES, &summaries)
            .await?;
        // Keep the channel open until the receiver has judged the message.
        let _ = a.recv_or_eof().await;
        Ok::<_, Error>(())
    });
    let err = run_receiver(&mut b, &[b"a".to_vec(), b"b".to_vec()], &cfg, &NoProgress)
        .await
        .unwrap_err();
    drop(b);
    let _ = sender.await;
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_summary_values_are_errors_not_panics() {
    // 7 bytes cut the count short, and four values exceed the announced
    // set size of 3.
    let err = malformed_summaries(vec![0u8; 7]).await;
    assert!(err.to_string().contains("summary"), "{err}");
    let mut four = vec![0u8; 24];
    four[0] = 4;
    let err = malformed_summaries(four).await;
    assert!(
        err.to_string().contains("above the limit") || err.to_string().contains("transfer"),
        "{err}"
    );
}

/// Both parties as sans-IO state machines, their bytes carried by hand
/// between them, with no runtime and no sockets: the same core as over TCP.
#[test]
fn stepped_parties_match_plaintext_without_a_runtime() {
    for malicious in [true, false] {
        let (s_items, r_items, truth) = sets(11, 300, 200, 120);
        let cfg = Rr16Config {
            reveal_to_sender: true,
            ..small_chunks(malicious)
        };
        let (s_out, r_out) =
            step_pair::<facade::Rr16>(s_items.clone(), r_items.clone(), cfg, limits());
        let r = r_out.expect("receiver");
        assert_eq!(r.matches, truth, "malicious = {malicious}");
        let shared: Vec<&Vec<u8>> = r_items
            .iter()
            .zip(&truth)
            .filter(|(_, t)| **t)
            .map(|(x, _)| x)
            .collect();
        let s = s_out.expect("sender");
        let mut revealed: Vec<&Vec<u8>> = s
            .revealed
            .expect("revealed")
            .iter()
            .map(|&i| &s_items[i])
            .collect();
        revealed.sort();
        assert_eq!(revealed, shared, "malicious = {malicious}");
    }
}

/// A job's buckets run at σ = 40 + log2 B, RR16's `λ`: the cut-and-choose
/// then opens more OTs, the summaries grow, the result stays exact, and
/// a `λ` below 40 is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistical_security_raises_the_cut_and_choose() {
    let (s, r, truth) = sets(12, 200, 300, 150);
    let at = |lambda| Rr16Config {
        search: Search {
            lambda,
            ..small_chunks(true).search
        },
        ..small_chunks(true)
    };
    let mut ots = Vec::new();
    for lambda in [40.0, 48.0] {
        let (so, ro) = run_pair(s.clone(), r.clone(), at(lambda), Behaviour::default()).await;
        so.expect("sender");
        let ro = ro.expect("receiver");
        assert_eq!(ro.matches, truth, "λ {lambda}");
        ots.push(ro.params.n_ot);
    }
    assert!(ots[1] > ots[0], "{ots:?}");
    let (_, ro) = run_pair(s, r, at(39.0), Behaviour::default()).await;
    assert!(matches!(ro, Err(Error::Config(_))), "{ro:?}");
}
