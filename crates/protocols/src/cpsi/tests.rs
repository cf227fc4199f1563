//! Circuit PSI end to end on in-memory channels, against the plaintext
//! computation.

use std::collections::HashMap;

use psikit_transport::{Channel, Limits};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::config::{CpsiConfig, Input};
use super::outcome::{Outcome, Output, Sums};
use super::steps::{triples_needed, Equality};
use super::vocabulary::{App, Epc, OtKind, Reveal, Role};
use super::{apps, bits, facade, gmw, messages, osn};
use crate::common::two_party::testing::sets;
use crate::common::NoProgress;

struct Party {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u64>>,
}

async fn run_pair(sender: Party, receiver: Party, cfg: CpsiConfig) -> (Outcome, Outcome) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let cfg2 = cfg.clone();
    let task = tokio::spawn(async move {
        let input = Input {
            keys: &sender.keys,
            values: &sender.values,
        };
        facade::run_on(&mut a, Role::Sender, input, &cfg2, &NoProgress).await
    });
    let input = Input {
        keys: &receiver.keys,
        values: &receiver.values,
    };
    let r = facade::run_on(&mut b, Role::Receiver, input, &cfg, &NoProgress)
        .await
        .expect("receiver");
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
        // EPC's bits, the tags' ℓ bits, and 22 bits (a 2-bit last block).
        (OtKind::Kk13, Epc::Auto),
        (OtKind::Kk13, Epc::Off),
        (OtKind::Kk13, Epc::Bits(22)),
    ];
    for (ot, epc) in modes {
        for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
            let (s, r, truth) = sets(40 + i as u64, n_s, n_r, overlap);
            // Two value columns.
            let sv = [
                values(s.len(), i as u64, u64::MAX),
                values(s.len(), 100 + i as u64, 9),
            ];
            let by_key: HashMap<&Vec<u8>, usize> =
                s.iter().enumerate().map(|(i, k)| (k, i)).collect();
            let mut cfg = CpsiConfig::new(App::Shares);
            cfg.ot = ot;
            cfg.epc = epc;
            let (so, ro) = run_pair(
                Party {
                    keys: s.clone(),
                    values: sv.to_vec(),
                },
                Party {
                    keys: r.clone(),
                    values: Vec::new(),
                },
                cfg,
            )
            .await;
            let (Output::Shares(ss), Output::Shares(rs)) = (so.output, ro.output) else {
                panic!("shares expected");
            };
            let item_of_bin = rs.item_of_bin.expect("receiver's bins");
            let (sw, rw) = (ss.sender_values, rs.sender_values);
            assert_eq!((sw.len(), rw.len()), (2, 2));
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
                            for c in 0..2 {
                                let v = sw[c][bin].wrapping_add(rw[c][bin]);
                                assert_eq!(v, sv[c][by_key[&r[i]]], "column {c} of item {i}");
                            }
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
    aggregates_with(OtKind::Silent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kk13_aggregates_match_the_plaintext() {
    aggregates_with(OtKind::Kk13).await;
}

/// Every application with `ot` against the plaintext, over [`SIZES`].
async fn aggregates_with(ot: OtKind) {
    let new = |app| {
        let mut cfg = CpsiConfig::new(app);
        cfg.ot = ot;
        cfg
    };
    for (i, &(n_s, n_r, overlap)) in SIZES.iter().enumerate() {
        let (s, r, truth) = sets(80 + i as u64, n_s, n_r, overlap);
        let cardinality = truth.iter().filter(|&&t| t).count() as u64;
        // Values near 2^64 so that sums wrap.
        // The sender brings three columns, the receiver one.
        let sv: Vec<Vec<u64>> = (0..3)
            .map(|c| values(s.len(), 10 * c + i as u64, u64::MAX >> (20 * c)))
            .collect();
        let rv = values(r.len(), 2 + i as u64, u64::MAX);
        let by_key: HashMap<&Vec<u8>, usize> = s.iter().enumerate().map(|(i, k)| (k, i)).collect();
        let sender_sums: Vec<u64> = sv
            .iter()
            .map(|col| {
                r.iter()
                    .filter_map(|k| by_key.get(k))
                    .fold(0u64, |a, &j| a.wrapping_add(col[j]))
            })
            .collect();
        let receiver_sum = r
            .iter()
            .zip(&rv)
            .zip(&truth)
            .filter(|(_, t)| **t)
            .fold(0u64, |a, ((_, v), _)| a.wrapping_add(*v));

        let party = |keys: &Vec<Vec<u8>>, v: &[Vec<u64>]| Party {
            keys: keys.clone(),
            values: v.to_vec(),
        };
        let (known, unknown) = (
            Output::Cardinality(Some(cardinality)),
            Output::Cardinality(None),
        );
        for (reveal, to_sender, to_receiver) in [
            (Reveal::Both, &known, &known),
            (Reveal::Sender, &known, &unknown),
        ] {
            let mut cfg = new(App::Cardinality);
            cfg.reveal = reveal;
            let (so, ro) = run_pair(party(&s, &[]), party(&r, &[]), cfg).await;
            assert_eq!((&so.output, &ro.output), (to_sender, to_receiver));
        }

        let inner_product = r
            .iter()
            .zip(&rv)
            .filter_map(|(k, y)| by_key.get(k).map(|&j| sv[0][j].wrapping_mul(*y)))
            .fold(0u64, u64::wrapping_add);
        let mut cfg = new(App::Sum);
        cfg.product_bits = 64;
        let sums = Sums {
            cardinality,
            sender_values: sender_sums,
            receiver_values: vec![receiver_sum],
            inner_product: Some(inner_product),
        };
        let (so, ro) = run_pair(party(&s, &sv), party(&r, std::slice::from_ref(&rv)), cfg).await;
        assert_eq!(so.output, Output::Sum(None));
        assert_eq!(ro.output, Output::Sum(Some(sums.clone())));
        // The minimum intersection: just reached, just missed.
        if i % 2 == 1 {
            for min in [cardinality.max(1), cardinality + 1] {
                let mut cfg = new(App::Sum);
                cfg.min_intersection = min;
                let (so, ro) = run_pair(party(&s, &sv), party(&r, &[]), cfg).await;
                match cardinality >= min {
                    true => {
                        let Output::Sum(Some(got)) = ro.output else {
                            panic!("sums expected at {min}");
                        };
                        assert_eq!(got.sender_values, sums.sender_values);
                        assert_eq!(so.output, Output::Sum(None));
                    }
                    false => {
                        assert_eq!(ro.output, Output::SumWithheld(min));
                        assert_eq!(so.output, Output::SumWithheld(min));
                    }
                }
            }
        }

        for t in [0, cardinality, cardinality + 1, 3 * cardinality + 7] {
            let cfg = new(App::Threshold(t));
            let (_, ro) = run_pair(party(&s, &[]), party(&r, &[]), cfg).await;
            assert_eq!(
                ro.output,
                Output::Threshold(Some(cardinality >= t)),
                "t {t}"
            );
        }

        let cfg = new(App::Union);
        let (so, _) = run_pair(party(&s, &[]), party(&r, &[]), cfg).await;
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

/// A job's buckets run at σ = 40 + log2 B: tags then pass 64 bits
/// (EPC decomposes them by long division, the hint gives them a table of
/// their own), and sums still match the plaintext, with EPC and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_beyond_64_bits_still_carry_sums() {
    // σ = 52 over 3,000 items: 16,384 bins' worth of tags, 66 bits.
    let (s, r, truth) = sets(77, 2000, 3000, 999);
    let sv: Vec<Vec<u64>> = (0..3).map(|c| values(s.len(), 30 + c, u64::MAX)).collect();
    let rv = values(r.len(), 40, u64::MAX);
    let by_key: HashMap<&Vec<u8>, usize> = s.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let sums = Sums {
        cardinality: truth.iter().filter(|&&t| t).count() as u64,
        sender_values: sv
            .iter()
            .map(|col| {
                r.iter()
                    .filter_map(|k| by_key.get(k))
                    .fold(0u64, |a, &j| a.wrapping_add(col[j]))
            })
            .collect(),
        receiver_values: vec![rv
            .iter()
            .zip(&truth)
            .filter(|(_, t)| **t)
            .fold(0u64, |a, (v, _)| a.wrapping_add(*v))],
        inner_product: None,
    };
    for epc in [Epc::Auto, Epc::Off] {
        let mut cfg = CpsiConfig::new(App::Sum);
        (cfg.epc, cfg.statistical_bits) = (epc, 52);
        let sender = Party {
            keys: s.clone(),
            values: sv.clone(),
        };
        let receiver = Party {
            keys: r.clone(),
            values: vec![rv.clone()],
        };
        let (_, ro) = run_pair(sender, receiver, cfg).await;
        assert!(ro.phases.tag_bits > 64, "{:?}", ro.phases);
        let compressed = matches!(epc, Epc::Auto);
        assert_eq!(ro.phases.compared_bits < 64, compressed, "{epc:?}");
        assert_eq!(ro.output, Output::Sum(Some(sums.clone())), "{epc:?}");
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
            values: &[],
        };
        facade::run_on(&mut a, Role::Sender, input, &cfg, &NoProgress).await
    });
    let cfg = CpsiConfig::new(App::Threshold(3));
    let input = Input {
        keys: &r,
        values: &[],
    };
    let err = facade::run_on(&mut b, Role::Receiver, input, &cfg, &NoProgress)
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
        value_columns: 0,
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
        values: &[],
    };
    let err = facade::run_on(&mut b, Role::Receiver, input, &cfg, &NoProgress)
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
        values: &[],
    };
    let err = facade::run_on(&mut a, Role::Sender, input, &cfg, &NoProgress)
        .await
        .expect_err("garbage");
    drop(fake.await.expect("fake"));
    assert!(!err.to_string().is_empty(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_input_is_refused_before_the_run() {
    let keys: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec()];
    let long = vec![vec![b'x'; 2000]];
    let with = |app, set: fn(&mut CpsiConfig)| {
        let mut cfg = CpsiConfig::new(app);
        set(&mut cfg);
        cfg
    };
    type Case<'a> = (CpsiConfig, &'a [Vec<u8>], &'a [Vec<u64>], &'a str);
    let cases: [Case; 6] = [
        (
            with(App::Threshold(1 << 50), |_| {}),
            &keys,
            &[],
            "threshold",
        ),
        (
            with(App::Sum, |_| {}),
            &keys,
            &[vec![1]],
            "1 values for 2 keys",
        ),
        (
            with(App::Sum, |c| c.product_bits = 8),
            &keys,
            &[vec![255, 256]],
            "below 2^8; 256 is not",
        ),
        (with(App::Union, |_| {}), &long, &[], "up to 1024 bytes"),
        (
            with(App::Union, |c| c.reveal = Reveal::Both),
            &keys,
            &[],
            "union is revealed to the sender",
        ),
        (
            with(App::Cardinality, |c| c.min_intersection = 3),
            &keys,
            &[],
            "sums only",
        ),
    ];
    // Refused before a byte is sent: the peer never answers.
    let (mut a, _b) = Channel::memory_pair(Limits::default());
    for (cfg, keys, values, want) in cases {
        let input = Input { keys, values };
        let err = facade::run_on(&mut a, Role::Receiver, input, &cfg, &NoProgress)
            .await
            .expect_err(want);
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[test]
fn both_roles_run_as_steppers_without_a_runtime() {
    use std::task::Poll;
    let (s, r, truth) = sets(11, 300, 200, 77);
    let cfg = CpsiConfig::new(App::Cardinality);
    let limits = Limits::default();
    let mut sender = facade::stepper(Role::Sender, s, Vec::new(), cfg.clone(), limits);
    let mut receiver = facade::stepper(Role::Receiver, r, Vec::new(), cfg, limits);
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

#[test]
fn each_equality_generates_the_gmw_triples_it_uses() {
    let (m, ell) = (10_000usize, 17);
    let shares = CpsiConfig::new(App::Shares);
    let threshold = CpsiConfig::new(App::Threshold(5));
    assert_eq!(Equality::of(OtKind::Kk13, true), Equality::Kk13);
    assert_eq!(Equality::of(OtKind::Silent, true), Equality::Leaves);
    assert_eq!(Equality::of(OtKind::Silent, false), Equality::Leaves);
    assert_eq!(Equality::of(OtKind::Iknp, false), Equality::Gmw);
    for (equality, own) in [
        (Equality::Kk13, 0),
        (Equality::Leaves, 0),
        (Equality::Gmw, gmw::equality_cost(m, ell)),
    ] {
        assert_eq!(triples_needed(&shares, equality, m, ell), own);
        let adder = gmw::adder_cost(apps::threshold_bits(m as u64));
        assert_eq!(triples_needed(&threshold, equality, m, ell), own + adder);
    }
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

/// What the union's learner can tell of its own items from its view: per
/// item, the guess "in the intersection" when a slot at one of its bins
/// did not open (right for the bin-ordered union: an intersection item
/// closes its own bin). Returns the accuracy over `runs` random sets in
/// which exactly half of the learner's items are the provider's, so
/// chance is 1/2; `shuffled` runs today's union, otherwise the slots in
/// bin order (the union before the shuffle).
async fn union_distinguisher_accuracy(shuffled: bool, runs: u64) -> f64 {
    use super::apps::{self, Slot};
    use super::hashing::{self, CuckooBins};
    use crate::vole_psi::oprf::item_keys;
    let (mut right, mut total) = (0usize, 0usize);
    for run in 0..runs {
        // 8000 provider items, 200 of them shared with the learner's 400.
        let mut rng = StdRng::seed_from_u64(900 + run);
        let item = |i: usize| format!("{run}-{i}").into_bytes();
        let s: Vec<Vec<u8>> = (0..400).map(item).collect();
        let r: Vec<Vec<u8>> = (200..8200).map(item).collect();
        let truth: Vec<bool> = (200..8200).map(|i| i < 400).collect();
        let m = hashing::bins(r.len(), 40).expect("bins");
        let seed: u128 = rng.gen();
        let table = CuckooBins::build(&item_keys(&r), m, seed, &mut rng).expect("fits");
        let member = |bin: usize| table.item_of_bin[bin].is_some_and(|i| truth[i as usize]);
        let learner_shares = bits::Bits::from_bools((0..m).map(|_| rng.gen::<bool>()));
        let provider_shares =
            bits::Bits::from_bools((0..m).map(|bin| learner_shares.get(bin) ^ member(bin)));
        // The last 100 items are a job's padding: their slots stay closed.
        let padding = |i: u32| i >= 7900;
        let width = r.iter().map(Vec::len).max().unwrap_or(0);

        let (mut a, mut b) = Channel::memory_pair(Limits::default());
        let learner = tokio::spawn(async move {
            let mut rots = osn::tests::rots(&mut a, true).await;
            match shuffled {
                true => apps::union_view(&mut a, &mut rots, &learner_shares, width).await,
                false => apps::open_slots(&mut a, &mut rots, &learner_shares, width).await,
            }
        });
        let mut rots = osn::tests::rots(&mut b, false).await;
        let items: Vec<apps::Fill<'_>> = table
            .item_of_bin
            .iter()
            .map(|i| match i {
                None => apps::Fill::Empty,
                Some(i) if padding(*i) => apps::Fill::Padding,
                Some(i) => apps::Fill::Item(&r[*i as usize]),
            })
            .collect();
        match shuffled {
            true => apps::union_provide(&mut b, &mut rots, &provider_shares, &items, width).await,
            false => apps::fill_slots(&mut b, &mut rots, &provider_shares, &items, width).await,
        }
        .expect("provider");
        let view = learner.await.expect("learner task").expect("learner");
        assert_eq!(view.len(), m);
        let closed = view.iter().filter(|s| **s == Slot::Closed).count();
        assert_eq!(closed, truth.iter().filter(|&&t| t).count() + 100);
        let opened: std::collections::HashSet<&Vec<u8>> = view
            .iter()
            .filter_map(|s| match s {
                Slot::Item(i) => Some(i),
                _ => None,
            })
            .collect();
        assert!(
            r[7900..].iter().all(|p| !opened.contains(p)),
            "a padding item opened"
        );
        assert_eq!(opened.len(), r.len() - 200 - 100);

        // The distinguisher: the learner's own items and their bins.
        let held: std::collections::HashSet<&Vec<u8>> = r.iter().collect();
        let mut guess = vec![false; s.len()];
        for (bin, item) in hashing::simple_table(&item_keys(&s), m, seed) {
            guess[item as usize] |= view[bin as usize] == Slot::Closed;
        }
        let members = s.iter().filter(|x| held.contains(x)).count();
        assert_eq!(
            2 * members,
            s.len(),
            "half of the learner's items are shared"
        );
        right += s
            .iter()
            .zip(&guess)
            .filter(|(x, &g)| held.contains(x) == g)
            .count();
        total += s.len();
    }
    right as f64 / total as f64
}

/// The union must not tell the learner which of its items are in the
/// intersection: from its view alone, the distinguisher of
/// [`union_distinguisher_accuracy`] does no better than chance (within
/// four standard deviations of 1/2 over 2,000 guesses), where on the
/// slots in bin order (the union before the shuffle) it is nearly always
/// right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_union_hides_the_intersection_from_its_learner() {
    let runs = 5;
    let sd = 0.5 / ((400 * runs) as f64).sqrt();
    let shuffled = union_distinguisher_accuracy(true, runs).await;
    assert!(
        (shuffled - 0.5).abs() < 4.0 * sd,
        "the learner guesses its items' membership with accuracy {shuffled:.3}"
    );
    let in_bin_order = union_distinguisher_accuracy(false, 2).await;
    assert!(
        in_bin_order > 0.9,
        "the distinguisher should read bin-ordered slots: {in_bin_order:.3}"
    );
    eprintln!("union distinguisher: shuffled {shuffled:.4}, bin order {in_bin_order:.4}");
}

/// `party`'s items (and values) in bucket `b` of `buckets`, by the key's
/// first byte; the last bucket stays empty.
fn bucket_of(party: &Party, b: usize, buckets: usize) -> Party {
    let keep: Vec<usize> = (0..party.keys.len())
        .filter(|&i| usize::from(party.keys[i].first().copied().unwrap_or(0)) % (buckets - 1) == b)
        .collect();
    Party {
        keys: keep.iter().map(|&i| party.keys[i].clone()).collect(),
        values: party
            .values
            .iter()
            .map(|col| keep.iter().map(|&i| col[i]).collect())
            .collect(),
    }
}

/// `cfg` run bucket by bucket as a job runs it: each party's shares added
/// up over the buckets, then opened once.
async fn bucketed(s: &Party, r: &Party, cfg: &CpsiConfig, buckets: usize) -> (Output, Output) {
    let (mut s_sum, mut r_sum): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    let add = |total: &mut Vec<u64>, shares: Vec<u64>| {
        total.resize(shares.len(), 0);
        for (t, x) in total.iter_mut().zip(shares) {
            *t = t.wrapping_add(x);
        }
    };
    for b in 0..buckets {
        let (sb, rb) = (bucket_of(s, b, buckets), bucket_of(r, b, buckets));
        let (mut a, mut c) = Channel::memory_pair(Limits::default());
        let cfg2 = cfg.clone();
        let task = tokio::spawn(async move {
            let input = Input {
                keys: &sb.keys,
                values: &sb.values,
            };
            facade::shares_on(&mut a, Role::Sender, input, &cfg2, &NoProgress).await
        });
        let input = Input {
            keys: &rb.keys,
            values: &rb.values,
        };
        let mine = facade::shares_on(&mut c, Role::Receiver, input, cfg, &NoProgress).await;
        add(&mut r_sum, mine.expect("receiver bucket"));
        add(
            &mut s_sum,
            task.await.expect("task").expect("sender bucket"),
        );
    }
    let (mut a, mut c) = Channel::memory_pair(Limits::default());
    let sid = psikit_ot::SessionId::new(b"a job's opening");
    let columns = (s.values.len(), r.values.len());
    let sizes = (s.keys.len() as u64, r.keys.len() as u64);
    let bounds = (sizes.1, sizes);
    let cfg2 = cfg.clone();
    let task = tokio::spawn(async move {
        facade::open_shares_on(&mut a, Role::Sender, &s_sum, &cfg2, &sid, columns, bounds).await
    });
    let ro = facade::open_shares_on(&mut c, Role::Receiver, &r_sum, cfg, &sid, columns, bounds)
        .await
        .expect("receiver opening");
    (task.await.expect("task").expect("sender opening"), ro)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_shares_add_up_and_open_once_to_the_whole_result() {
    let (s, r, truth) = sets(7, 900, 700, 333);
    let cardinality = truth.iter().filter(|&&t| t).count() as u64;
    let sv = vec![values(s.len(), 1, u64::MAX)];
    let rv = vec![values(r.len(), 2, 1 << 20)];
    let by_key: HashMap<&Vec<u8>, usize> = s.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let common = || {
        r.iter()
            .enumerate()
            .filter_map(|(i, k)| Some((*by_key.get(k)?, i)))
    };
    let sums = Sums {
        cardinality,
        sender_values: vec![common().fold(0u64, |a, (j, _)| a.wrapping_add(sv[0][j]))],
        receiver_values: vec![common().fold(0u64, |a, (_, i)| a.wrapping_add(rv[0][i]))],
        inner_product: Some(common().fold(0u64, |a, (j, i)| {
            a.wrapping_add(sv[0][j].wrapping_mul(rv[0][i]))
        })),
    };
    let (sp, rp) = (
        Party {
            keys: s.clone(),
            values: sv,
        },
        Party {
            keys: r.clone(),
            values: rv,
        },
    );
    let (bare_s, bare_r) = (
        Party {
            keys: s.clone(),
            values: vec![],
        },
        Party {
            keys: r.clone(),
            values: vec![],
        },
    );
    let mut cfg = CpsiConfig::new(App::Cardinality);
    cfg.reveal = Reveal::Both;
    let known = Output::Cardinality(Some(cardinality));
    assert_eq!(
        bucketed(&bare_s, &bare_r, &cfg, 4).await,
        (known.clone(), known)
    );

    let mut cfg = CpsiConfig::new(App::Sum);
    cfg.product_bits = 21;
    let (so, ro) = bucketed(&sp, &rp, &cfg, 4).await;
    assert_eq!(
        (so, ro),
        (Output::Sum(None), Output::Sum(Some(sums.clone())))
    );
    for min in [cardinality, cardinality + 1] {
        cfg.min_intersection = min;
        let (so, ro) = bucketed(&sp, &rp, &cfg, 3).await;
        match cardinality >= min {
            true => assert_eq!(ro, Output::Sum(Some(sums.clone()))),
            false => assert_eq!(
                (so, ro),
                (Output::SumWithheld(min), Output::SumWithheld(min))
            ),
        }
    }
    // Every bucket holds well under the threshold: only the job's count
    // can reach it.
    for t in [cardinality, cardinality + 1] {
        let cfg = CpsiConfig::new(App::Threshold(t));
        let (_, ro) = bucketed(&bare_s, &bare_r, &cfg, 4).await;
        assert_eq!(ro, Output::Threshold(Some(cardinality >= t)), "t {t}");
    }
}
