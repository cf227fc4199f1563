//! The chooser end to end: refusals read in the flags' terms on both
//! sides, at the message level and over TCP.

use std::task::Poll;

use psikit_transport::Limits;

use super::*;
use crate::common::connect::{Peer, ServerAddr};
use crate::common::two_party::testing::sets;
use crate::common::NoProgress;
use crate::error::Error;

/// Both parties as steppers, bytes carried by hand; a party that ended
/// hangs up, so its peer ends too.
fn step_both(
    sender: Settings,
    receiver: Settings,
    n_s: usize,
    n_r: usize,
) -> (Result<Outcome, Error>, Result<Outcome, Error>) {
    let (s, r, _) = sets(7, n_s, n_r, n_s.min(n_r) / 2);
    let mut a = stepper(Role::Sender, s, sender, Limits::default());
    let mut b = stepper(Role::Receiver, r, receiver, Limits::default());
    let (mut a_out, mut b_out) = (None, None);
    while a_out.is_none() || b_out.is_none() {
        if a_out.is_none() {
            if let Poll::Ready(out) = a.advance() {
                a_out = Some(out);
                b.peer_closed();
            }
        }
        b.push(&a.take_outgoing());
        if b_out.is_none() {
            if let Poll::Ready(out) = b.advance() {
                b_out = Some(out);
                a.peer_closed();
            }
        }
        a.push(&b.take_outgoing());
    }
    (a_out.expect("sender ended"), b_out.expect("receiver ended"))
}

fn text(r: Result<Outcome, Error>) -> String {
    r.expect_err("refused").to_string()
}

fn built() -> impl Iterator<Item = Protocol> {
    Protocol::ALL.into_iter().filter(|p| p.built())
}

#[test]
fn the_other_balanced_psi_is_named_on_both_sides() {
    if !(Protocol::Vole.built() && Protocol::Rr16.built()) {
        return;
    }
    let (s, r) = step_both(
        Settings::new(Protocol::Rr16),
        Settings::new(Protocol::Vole),
        10,
        10,
    );
    assert_eq!(text(s), "the peer runs VOLE-PSI, this side RR16");
    assert_eq!(text(r), "the peer runs RR16, this side VOLE-PSI");
}

#[test]
fn modes_and_key_encodings_that_differ_are_named_by_their_flags() {
    for p in built() {
        let malicious = Settings {
            malicious: true,
            ..Settings::new(p)
        };
        let (s, r) = step_both(malicious, Settings::new(p), 10, 10);
        assert_eq!(
            text(s),
            "the peer runs without --malicious, this side with it"
        );
        assert_eq!(text(r), "the peer runs with --malicious, this side without");
        let reveal = Settings {
            reveal: true,
            ..Settings::new(p)
        };
        let (s, r) = step_both(Settings::new(p), reveal, 10, 10);
        assert_eq!(text(s), "the peer runs with --reveal, this side without");
        assert_eq!(text(r), "the peer runs without --reveal, this side with it");
        let keys = |f: &str| Settings {
            key_format: f.into(),
            ..Settings::new(p)
        };
        let (s, r) = step_both(keys("k;normalize=trim"), keys("k;normalize=lower"), 10, 10);
        let (s, r) = (text(s), text(r));
        assert!(
            s.starts_with("the peer encodes its keys as \"k;normalize=lower\", this side as \"k;normalize=trim\""),
            "{s}"
        );
        assert!(r.contains("--normalize"), "{r}");
    }
}

#[test]
fn an_oversized_set_is_refused_and_its_owner_told_why() {
    for p in built() {
        let small = Settings {
            max_peer_items: 20,
            ..Settings::new(p)
        };
        let (s, r) = step_both(Settings::new(p), small, 50, 10);
        assert_eq!(
            text(s),
            "the peer accepts at most 20 items; this set has 50"
        );
        assert_eq!(
            text(r),
            "the peer's set has 50 items; this side accepts at most 20 (--max-peer-items)"
        );
    }
}

/// Over TCP the refusing side closes gracefully, so its error frame
/// survives the sender's next messages (no reset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_set_is_refused_in_words_over_tcp() {
    for p in built() {
        let (s, r, _) = sets(9, 3000, 10, 5);
        let n_s = s.len();
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let listen = Peer::Listen {
            addr: "127.0.0.1:0".into(),
            tls: None,
            limits: Limits::default(),
            accept_timeout: None,
        };
        let small = Settings {
            max_peer_items: 20,
            ..Settings::new(p)
        };
        let receiver = tokio::spawn(async move {
            let listening = |addr: &str| {
                let _ = tx.send(addr.to_string());
            };
            run(&listen, Role::Receiver, &r, &small, listening, &NoProgress).await
        });
        let addr = rx.await.expect("listening");
        let connect = Peer::Connect(ServerAddr::plain(addr));
        let sent = run(
            &connect,
            Role::Sender,
            &s,
            &Settings::new(p),
            |_| {},
            &NoProgress,
        )
        .await;
        assert_eq!(
            text(sent),
            format!("the peer accepts at most 20 items; this set has {n_s}")
        );
        let received = receiver.await.expect("receiver task");
        assert!(text(received).ends_with("(--max-peer-items)"));
    }
}

#[test]
fn both_parties_agree_through_the_chooser() {
    for p in built() {
        let (s, r, truth) = sets(11, 200, 150, 60);
        let settings = Settings {
            reveal: true,
            ..Settings::new(p)
        };
        let mut a = stepper(Role::Sender, s.clone(), settings.clone(), Limits::default());
        let mut b = stepper(Role::Receiver, r, settings, Limits::default());
        let (mut a_out, mut b_out) = (None, None);
        while a_out.is_none() || b_out.is_none() {
            if a_out.is_none() {
                if let Poll::Ready(out) = a.advance() {
                    a_out = Some(out);
                }
            }
            b.push(&a.take_outgoing());
            if b_out.is_none() {
                if let Poll::Ready(out) = b.advance() {
                    b_out = Some(out);
                }
            }
            a.push(&b.take_outgoing());
        }
        let received = b_out.expect("ended").expect("receiver");
        assert_eq!(received.protocol, p);
        assert_eq!(received.matches.as_deref(), Some(&truth[..]));
        let sent = a_out.expect("ended").expect("sender");
        let revealed = sent
            .matches
            .expect("revealed")
            .iter()
            .filter(|m| **m)
            .count();
        assert_eq!(revealed, truth.iter().filter(|m| **m).count());
    }
}
