//! Circuit PSI end to end on in-memory channels, against the plaintext
//! computation.

use std::collections::HashMap;

use psikit_transport::{Channel, Limits};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::common::two_party::testing::sets;

struct Party {
    keys: Vec<Vec<u8>>,
    values: Option<Vec<u64>>,
}

async fn run_pair(sender: Party, receiver: Party, cfg: CpsiConfig) -> (Outcome, Outcome) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let cfg2 = cfg.clone();
    let task = tokio::spawn(async move {
        let input = Input {
            keys: &sender.keys,
            values: sender.values.as_deref(),
        };
        run_sender(&mut a, input, &cfg2).await
    });
    let input = Input {
        keys: &receiver.keys,
        values: receiver.values.as_deref(),
    };
    let r = run_receiver(&mut b, input, &cfg).await.expect("receiver");
    drop(b);
    (task.await.expect("sender task").expect("sender"), r)
}

fn values(n: usize, seed: u64, max: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(0..=max)).collect()
}

/// Size triples (sender, receiver, overlap) covering unequal sizes, empty
/// sets and intersections, and full overlap.
const SIZES: [(usize, usize, usize); 6] = [
    (0, 10, 0),
    (10, 0, 0),
    (50, 30, 0),
    (64, 64, 64),
    (300, 500, 120),
    (3000, 2000, 999),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_recombine_to_membership() {
    let modes = [
        (OtKind::Silent, Epc::Auto),
        (OtKind::Iknp, Epc::Auto),
        (OtKind::Silent, Epc::Off),
        (OtKind::Iknp, Epc::Bits(22)),
    ];
    for (ot, epc) in modes {
        for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
            let (s, r, truth) = sets(40 + i as u64, n_s, n_r, overlap);
            let sv = values(s.len(), i as u64, u64::MAX);
            let by_key: HashMap<&Vec<u8>, u64> = s.iter().zip(&sv).map(|(k, v)| (k, *v)).collect();
            let mut cfg = CpsiConfig::new(App::Shares);
            cfg.ot = ot;
            cfg.epc = epc;
            let (so, ro) = run_pair(
                Party {
                    keys: s.clone(),
                    values: Some(sv.clone()),
                },
                Party {
                    keys: r.clone(),
                    values: None,
                },
                cfg,
            )
            .await;
            let (Output::Shares(ss), Output::Shares(rs)) = (so.output, ro.output) else {
                panic!("shares expected");
            };
            let item_of_bin = rs.item_of_bin.expect("receiver's bins");
            let (sw, rw) = (ss.sender_values.expect("w"), rs.sender_values.expect("z"));
            let mut seen = 0;
            for (bin, item) in item_of_bin.iter().enumerate() {
                let member = ss.membership.get(bin) ^ rs.membership.get(bin);
                match item {
                    Some(i) => {
                        let i = *i as usize;
                        assert_eq!(
                            member, truth[i],
                            "{ot:?} {epc:?} sizes {n_s} {n_r} item {i}"
                        );
                        if member {
                            let v = sw[bin].wrapping_add(rw[bin]);
                            assert_eq!(v, by_key[&r[i]], "value of item {i}");
                        }
                        seen += 1;
                    }
                    None => assert!(!member, "empty bin {bin} is no member"),
                }
            }
            assert_eq!(seen, r.len());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_match_the_plaintext() {
    for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
        let (s, r, truth) = sets(80 + i as u64, n_s, n_r, overlap);
        let cardinality = truth.iter().filter(|&&t| t).count() as u64;
        // Values near 2^64 so that sums wrap.
        let sv = values(s.len(), 1 + i as u64, u64::MAX);
        let rv = values(r.len(), 2 + i as u64, u64::MAX);
        let by_key: HashMap<&Vec<u8>, u64> = s.iter().zip(&sv).map(|(k, v)| (k, *v)).collect();
        let sender_sum = r
            .iter()
            .filter_map(|k| by_key.get(k))
            .fold(0u64, |a, v| a.wrapping_add(*v));
        let receiver_sum = r
            .iter()
            .zip(&rv)
            .zip(&truth)
            .filter(|(_, t)| **t)
            .fold(0u64, |a, ((_, v), _)| a.wrapping_add(*v));

        let party = |keys: &Vec<Vec<u8>>, v: Option<&Vec<u64>>| Party {
            keys: keys.clone(),
            values: v.cloned(),
        };
        let mut cfg = CpsiConfig::new(App::Cardinality);
        cfg.both_learn = true;
        let (so, ro) = run_pair(party(&s, None), party(&r, None), cfg).await;
        assert_eq!(ro.output, Output::Cardinality(Some(cardinality)));
        assert_eq!(so.output, Output::Cardinality(Some(cardinality)));

        let cfg = CpsiConfig::new(App::Sum);
        let (so, ro) = run_pair(party(&s, Some(&sv)), party(&r, Some(&rv)), cfg).await;
        assert_eq!(so.output, Output::Sum(None));
        assert_eq!(
            ro.output,
            Output::Sum(Some(Sums {
                cardinality,
                sender_values: Some(sender_sum),
                receiver_values: Some(receiver_sum),
            }))
        );

        for t in [0, cardinality, cardinality + 1, 3 * cardinality + 7] {
            let cfg = CpsiConfig::new(App::Threshold(t));
            let (_, ro) = run_pair(party(&s, None), party(&r, None), cfg).await;
            assert_eq!(
                ro.output,
                Output::Threshold(Some(cardinality >= t)),
                "t {t}"
            );
        }

        let cfg = CpsiConfig::new(App::Union);
        let (so, _) = run_pair(party(&s, None), party(&r, None), cfg).await;
        let Output::Union(Some(mut extra)) = so.output else {
            panic!("the sender learns the union");
        };
        extra.sort();
        let want: Vec<Vec<u8>> = r
            .iter()
            .zip(&truth)
            .filter(|(_, t)| !**t)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(extra, want, "sizes {n_s} {n_r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_that_disagree_are_refused() {
    let (s, r, _) = sets(7, 20, 20, 5);
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let task = tokio::spawn(async move {
        let cfg = CpsiConfig::new(App::Cardinality);
        let input = Input {
            keys: &s,
            values: None,
        };
        run_sender(&mut a, input, &cfg).await
    });
    let cfg = CpsiConfig::new(App::Threshold(3));
    let input = Input {
        keys: &r,
        values: None,
    };
    let err = run_receiver(&mut b, input, &cfg)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("the peer runs"), "{err}");
    drop(b);
    assert!(task.await.expect("task").is_err());
}

/// A peer's hello for `cfg` with `n` items.
fn hello_of(cfg: &CpsiConfig, n: u64) -> messages::Hello {
    messages::Hello {
        agreed: cfg.agreed(),
        set_size: n,
        has_values: false,
        max_item_len: 0,
        key_format: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_or_sends_garbage_gets_an_error() {
    let (s, r, _) = sets(9, 100, 100, 10);
    let cfg = CpsiConfig::new(App::Cardinality);
    // A sender that says hello and hangs up.
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let peer = hello_of(&cfg, 100);
    let fake = tokio::spawn(async move {
        a.send_msg(&peer).await.expect("hello");
        let _: messages::Hello = a.recv_msg(()).await.expect("their hello");
        drop(a);
    });
    let input = Input {
        keys: &r,
        values: None,
    };
    let err = run_receiver(&mut b, input, &cfg)
        .await
        .expect_err("stopped");
    fake.await.expect("fake");
    assert!(!err.to_string().is_empty());

    // A receiver whose masked OKVS table is cut short.
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let peer = hello_of(&cfg, 100);
    let fake = tokio::spawn(async move {
        b.send_msg(&peer).await.expect("hello");
        let _: messages::Hello = b.recv_msg(()).await.expect("their hello");
        let seeds = messages::Seeds {
            hashing: 1,
            okvs: [2; 16],
        };
        b.send_msg(&seeds).await.expect("seeds");
        // Where the silent VOLE's base OTs belong: a short chunked transfer.
        let _ = messages::send(&mut b, messages::KIND_MASKED, &[7; 33]).await;
        b
    });
    let input = Input {
        keys: &s,
        values: None,
    };
    let err = run_sender(&mut a, input, &cfg).await.expect_err("garbage");
    drop(fake.await.expect("fake"));
    assert!(!err.to_string().is_empty(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_input_is_refused_before_the_run() {
    let keys: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec()];
    let (mut a, _b) = Channel::memory_pair(Limits::default());
    let cfg = CpsiConfig::new(App::Threshold(1 << 50));
    let input = Input {
        keys: &keys,
        values: None,
    };
    let err = run_sender(&mut a, input, &cfg)
        .await
        .expect_err("threshold");
    assert!(err.to_string().contains("threshold"), "{err}");
    let cfg = CpsiConfig::new(App::Sum);
    let input = Input {
        keys: &keys,
        values: Some(&[1]),
    };
    let err = run_sender(&mut a, input, &cfg).await.expect_err("values");
    assert!(err.to_string().contains("1 values for 2 keys"), "{err}");
    let long = vec![vec![b'x'; 2000]];
    let cfg = CpsiConfig::new(App::Union);
    let input = Input {
        keys: &long,
        values: None,
    };
    let err = run_receiver(&mut a, input, &cfg)
        .await
        .expect_err("long key");
    assert!(err.to_string().contains("up to 1024 bytes"), "{err}");
}

#[test]
fn both_roles_run_as_steppers_without_a_runtime() {
    use std::task::Poll;
    let (s, r, truth) = sets(11, 300, 200, 77);
    let cfg = CpsiConfig::new(App::Cardinality);
    let limits = Limits::default();
    let mut sender = facade::stepper(facade::Role::Sender, s, None, cfg.clone(), limits);
    let mut receiver = facade::stepper(facade::Role::Receiver, r, None, cfg, limits);
    let (mut s_out, mut r_out) = (None, None);
    while s_out.is_none() || r_out.is_none() {
        if s_out.is_none() {
            if let Poll::Ready(out) = sender.advance() {
                s_out = Some(out);
            }
        }
        receiver.push(&sender.take_outgoing());
        if r_out.is_none() {
            if let Poll::Ready(out) = receiver.advance() {
                r_out = Some(out);
            }
        }
        sender.push(&receiver.take_outgoing());
    }
    let want = truth.iter().filter(|&&t| t).count() as u64;
    let r_out = r_out.and_then(Result::ok).expect("receiver");
    assert_eq!(r_out.output, Output::Cardinality(Some(want)));
    assert!(s_out.is_some_and(|o| o.is_ok()));
}

/// Checks the parties' shares against the plaintext: membership per bin of
/// the receiver's items (and no member in empty bins), the sender's value
/// in member bins.
fn check_shares(
    so: Outcome,
    ro: Outcome,
    s: &[Vec<u8>],
    sv: &[u64],
    r: &[Vec<u8>],
    truth: &[bool],
) {
    let (Output::Shares(ss), Output::Shares(rs)) = (so.output, ro.output) else {
        panic!("shares expected");
    };
    let by_key: HashMap<&Vec<u8>, u64> = s.iter().zip(sv).map(|(k, v)| (k, *v)).collect();
    let item_of_bin = rs.item_of_bin.expect("receiver's bins");
    let (sw, rw) = (ss.sender_values.expect("w"), rs.sender_values.expect("z"));
    let mut seen = 0;
    for (bin, item) in item_of_bin.iter().enumerate() {
        let member = ss.membership.get(bin) ^ rs.membership.get(bin);
        match item {
            Some(i) => {
                let i = *i as usize;
                assert_eq!(member, truth[i], "item {i}");
                if member {
                    assert_eq!(sw[bin].wrapping_add(rw[bin]), by_key[&r[i]], "value {i}");
                }
                seen += 1;
            }
            None => assert!(!member, "empty bin {bin} is no member"),
        }
    }
    assert_eq!(seen, r.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kk13_shares_recombine_to_membership() {
    // EPC's 16 bits, the tags' ℓ bits, and 22 bits (a 2-bit last block).
    for epc in [Epc::Auto, Epc::Off, Epc::Bits(22)] {
        for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
            let (s, r, truth) = sets(140 + i as u64, n_s, n_r, overlap);
            let sv = values(s.len(), 7 + i as u64, u64::MAX);
            let mut cfg = CpsiConfig::new(App::Shares);
            cfg.ot = OtKind::Kk13;
            cfg.epc = epc;
            let sender = Party {
                keys: s.clone(),
                values: Some(sv.clone()),
            };
            let receiver = Party {
                keys: r.clone(),
                values: None,
            };
            let (so, ro) = run_pair(sender, receiver, cfg).await;
            if epc == Epc::Bits(22) {
                assert_eq!(ro.phases.compared_bits, 22);
            }
            check_shares(so, ro, &s, &sv, &r, &truth);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kk13_aggregates_match_the_plaintext() {
    for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
        let (s, r, truth) = sets(180 + i as u64, n_s, n_r, overlap);
        let cardinality = truth.iter().filter(|&&t| t).count() as u64;
        let sv = values(s.len(), 3 + i as u64, u64::MAX);
        let rv = values(r.len(), 4 + i as u64, u64::MAX);
        let by_key: HashMap<&Vec<u8>, u64> = s.iter().zip(&sv).map(|(k, v)| (k, *v)).collect();
        let sender_sum = r
            .iter()
            .filter_map(|k| by_key.get(k))
            .fold(0u64, |a, v| a.wrapping_add(*v));
        let receiver_sum = r
            .iter()
            .zip(&rv)
            .zip(&truth)
            .filter(|(_, t)| **t)
            .fold(0u64, |a, ((_, v), _)| a.wrapping_add(*v));
        let party = |keys: &Vec<Vec<u8>>, v: Option<&Vec<u64>>| Party {
            keys: keys.clone(),
            values: v.cloned(),
        };
        let kk13 = |app| {
            let mut cfg = CpsiConfig::new(app);
            cfg.ot = OtKind::Kk13;
            cfg
        };

        let mut cfg = kk13(App::Cardinality);
        cfg.both_learn = true;
        let (so, ro) = run_pair(party(&s, None), party(&r, None), cfg).await;
        assert_eq!(ro.output, Output::Cardinality(Some(cardinality)));
        assert_eq!(so.output, Output::Cardinality(Some(cardinality)));

        let (so, ro) = run_pair(party(&s, Some(&sv)), party(&r, Some(&rv)), kk13(App::Sum)).await;
        assert_eq!(so.output, Output::Sum(None));
        assert_eq!(
            ro.output,
            Output::Sum(Some(Sums {
                cardinality,
                sender_values: Some(sender_sum),
                receiver_values: Some(receiver_sum),
            }))
        );

        for t in [0, cardinality, cardinality + 1] {
            let cfg = kk13(App::Threshold(t));
            let (_, ro) = run_pair(party(&s, None), party(&r, None), cfg).await;
            let want = Output::Threshold(Some(cardinality >= t));
            assert_eq!(ro.output, want, "t {t}");
        }

        let (so, _) = run_pair(party(&s, None), party(&r, None), kk13(App::Union)).await;
        let Output::Union(Some(mut extra)) = so.output else {
            panic!("the sender learns the union");
        };
        extra.sort();
        let want: Vec<Vec<u8>> = r
            .iter()
            .zip(&truth)
            .filter(|(_, t)| !**t)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(extra, want, "sizes {n_s} {n_r}");
    }
}

#[test]
fn kk13_generates_no_gmw_triples_for_the_equality() {
    let (m, ell) = (10_000, 16);
    assert_eq!(triples_needed(App::Shares, OtKind::Kk13, m, ell), 0);
    assert_eq!(
        triples_needed(App::Shares, OtKind::Iknp, m, ell),
        gmw::equality_cost(m, ell)
    );
    let t = App::Threshold(5);
    assert_eq!(
        triples_needed(t, OtKind::Kk13, m, ell) + gmw::equality_cost(m, ell),
        triples_needed(t, OtKind::Silent, m, ell)
    );
}

#[test]
fn hellos_carry_kk13_as_code_2() {
    use psikit_transport::Message;
    let mut cfg = CpsiConfig::new(App::Cardinality);
    cfg.ot = OtKind::Kk13;
    let hello = hello_of(&cfg, 9);
    let mut payload = hello.to_frame().payload;
    assert_eq!(messages::Hello::decode(&payload, ()), Ok(hello));
    // Application, threshold, then the OT kind.
    assert_eq!(payload[9], 2);
    payload[9] = 3;
    assert!(messages::Hello::decode(&payload, ()).is_err());
}
