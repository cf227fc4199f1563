//! EPC tests: exact equality on random and adversarially close inputs for
//! several ℓ and every supported ℓ_c, the noise budget of replies, the
//! parameter rules, and the decoders.

use proptest::prelude::*;
use psikit_he::wire;
use psikit_transport::{DecodeError, Message};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::{Error, Violation};

/// The output lengths the paper uses (16: IKNP-GMW, KK-CGS; 22:
/// Silent-GMW) and the two between.
const ELL_CS: [u32; 4] = [16, 18, 20, 22];

/// Tags per test run (three batches at n = 4096): the flooding covers
/// this many coefficients.
const SLOTS: usize = 3 * 4096;

/// Runs EPC over the pairs and checks `r_i = r*_i ⇔ v_i = v*_i`.
fn check_pairs(params: &EpcParams, v: &[u128], v_star: &[u128]) {
    let (sender, pk) = EpcSender::new(params).unwrap();
    let pk = EpcPublicKey::decode(&pk.to_frame().payload, params).unwrap();
    let receiver = EpcReceiver::new(params, &pk).unwrap();
    let batches = sender.encrypt_all(v).unwrap();
    let (replies, r_star) = receiver.evaluate_all(&batches, v_star).unwrap();
    let r = sender.decrypt_all(&replies, v.len()).unwrap();
    assert_eq!((r.len(), r_star.len()), (v.len(), v.len()));
    let p = params.plain_modulus() as u32;
    for i in 0..v.len() {
        assert!(r[i] < p && r_star[i] < p);
        assert_eq!(
            r[i] == r_star[i],
            v[i] == v_star[i],
            "ℓ = {}, ℓ_c = {}, pair {i}: v = {:#x}, v* = {:#x}",
            params.ell(),
            params.ell_c(),
            v[i],
            v_star[i]
        );
    }
}

fn max_tag(ell: u32) -> u128 {
    (1 << ell) - 1
}

/// Pairs that differ as little as possible: in one bit (each position), in
/// one digit by ±1 (each digit), in the top digit only, plus the extremes.
fn close_pairs(params: &EpcParams, rng: &mut StdRng) -> (Vec<u128>, Vec<u128>) {
    let ell = params.ell();
    let max = max_tag(ell);
    let w = u128::from(params.word_base());
    let mut v = Vec::new();
    let mut v_star = Vec::new();
    let mut push = |a: u128, b: u128| {
        v.push(a);
        v_star.push(b);
    };
    push(0, 0);
    push(max, max);
    push(0, max);
    push(max, 0);
    push(0, 1);
    push(1, 0);
    push(max, max - 1);
    for bit in 0..ell {
        let x = rng.gen::<u128>() & max;
        push(x, x ^ (1 << bit));
        push(x ^ (1 << bit), x);
        push(0, 1 << bit);
        push(max, max ^ (1 << bit));
    }
    // One digit ±1 (without carries): digit i of x is moved by one.
    let mut power = 1u128;
    let mut top = 1u128;
    for _ in 0..params.digits() {
        top = power;
        for _ in 0..4 {
            let x = rng.gen::<u128>() & max;
            let digit = (x / power) % w;
            if digit + 1 < w && x.checked_add(power).is_some_and(|y| y <= max) {
                push(x, x + power);
            }
            if digit > 0 {
                push(x, x - power);
            }
        }
        power = power.saturating_mul(w);
    }
    // Top digit only.
    for _ in 0..8 {
        let x = rng.gen::<u128>() & max;
        if let Some(y) = x.checked_sub(top) {
            push(x, y);
        }
        let low = x % top;
        push(low, low + top.min(max - low));
    }
    // Random pairs, half equal.
    for _ in 0..200 {
        let x = rng.gen::<u128>() & max;
        let y = if rng.gen() {
            x
        } else {
            rng.gen::<u128>() & max
        };
        push(x, y);
    }
    (v, v_star)
}

#[test]
fn preserves_equality_exactly_on_close_inputs() {
    let mut rng = StdRng::seed_from_u64(0xe9c);
    // Tags above 64 bits: a job's buckets at σ > 40, or sets beyond 2^23.
    for ell in [41, 57, 61, 64, 65, 96, 127] {
        for ell_c in ELL_CS {
            let params = EpcParams::new(ell, ell_c, SLOTS, 40).unwrap();
            let (v, v_star) = close_pairs(&params, &mut rng);
            check_pairs(&params, &v, &v_star);
        }
    }
}

#[test]
fn preserves_equality_across_batches_all_equal_and_none_equal() {
    let mut rng = StdRng::seed_from_u64(7);
    let params = EpcParams::new(61, 16, SLOTS, 40).unwrap();
    let n = params.batch_slots();
    let m = 2 * n + 123;
    let max = max_tag(61);
    let v: Vec<u128> = (0..m).map(|_| rng.gen::<u128>() & max).collect();
    // First batch all equal, second none equal (one bit off), third mixed.
    let v_star: Vec<u128> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| match i / n {
            0 => x,
            1 => x ^ (1 << (i % 61)),
            _ if i % 2 == 0 => x,
            _ => rng.gen::<u128>() & max,
        })
        .collect();
    check_pairs(&params, &v, &v_star);
    // A single tag, and exactly one full batch.
    check_pairs(&params, &v[..1], &v_star[..1]);
    check_pairs(&params, &v[..n], &v[..n]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// The property of the issue: for random ℓ, ℓ_c and tags, equal pairs
    /// stay equal and unequal ones (random, or one bit apart) unequal.
    #[test]
    fn equality_is_preserved(
        ell in 41u32..=MAX_ELL,
        ell_c in prop::sample::select(ELL_CS.to_vec()),
        pairs in prop::collection::vec((any::<u128>(), 0u8..3, any::<u128>()), 1..300),
    ) {
        let params = EpcParams::new(ell, ell_c, SLOTS, 40).unwrap();
        let max = max_tag(ell);
        let (v, v_star): (Vec<u128>, Vec<u128>) = pairs
            .iter()
            .map(|&(x, kind, y)| {
                let x = x & max;
                match kind {
                    0 => (x, x),
                    1 => (x, x ^ (1 << (y % u128::from(ell)))),
                    _ => (x, y & max),
                }
            })
            .unzip();
        check_pairs(&params, &v, &v_star);
    }
}

#[test]
fn replies_keep_a_noise_margin() {
    for ell_c in ELL_CS {
        let params = EpcParams::new(61, ell_c, SLOTS, 40).unwrap();
        let (sender, pk) = EpcSender::new(&params).unwrap();
        let receiver = EpcReceiver::new(&params, &pk).unwrap();
        let tags: Vec<u128> = (0..params.batch_slots() as u64)
            .map(|i| u128::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3))
            .collect();
        let batch = sender.encrypt_batch(0, &tags).unwrap();
        let (reply, _) = receiver.evaluate_batch(0, &batch, &tags).unwrap();
        let he = params.he();
        let ct = wire::decode_result_ct_dropped(he, &reply.ct, params.reply_drop_bits()).unwrap();
        let noise_bits = sender.sk.noise_bits(&ct).unwrap() as u32;
        let budget = sender.sk.noise_budget_bits(&ct).unwrap();
        let bound_bits = u128::BITS - params.reply_noise_bound().leading_zeros();
        let q1 = he.moduli()[0] as f64;
        let limit_bits = (q1 / (2.0 * params.plain_modulus() as f64)).log2();
        // The measurement stays within the proven bound, and the bound is
        // MARGIN_BITS below the decryption limit q_1/(2p).
        assert!(
            noise_bits <= bound_bits,
            "ℓ_c {ell_c}: {noise_bits} > {bound_bits}"
        );
        assert!(
            (params.reply_noise_bound() as f64).log2() + f64::from(MARGIN_BITS) <= limit_bits,
            "ℓ_c {ell_c}"
        );
        assert!(budget >= 0, "ℓ_c {ell_c}: budget {budget}");
        // The flooding dominates: the noise is within a few bits of B_fp/q_2.
        let flood_bits = (params.flood_bound() as f64 / he.moduli()[1] as f64).log2();
        assert!(f64::from(noise_bits) >= flood_bits - 2.0, "ℓ_c {ell_c}");
    }
}

/// Before flooding, the receiver's ciphertext decrypts to exactly
/// `D + r*` with `D = Σ (v_i - v*_i)²` per slot (so the sign of
/// `-2·m*_i` is right), with noise below the bound `B*` of Theorem 1.
#[test]
fn evaluation_computes_the_distance_within_b_star() {
    let mut rng = StdRng::seed_from_u64(11);
    for (ell, ell_c) in [(57, 16), (61, 16), (61, 18), (61, 20), (64, 22), (90, 18)] {
        let params = EpcParams::new(ell, ell_c, SLOTS, 40).unwrap();
        let (sender, pk) = EpcSender::new(&params).unwrap();
        let receiver = EpcReceiver::new(&params, &pk).unwrap();
        let (v, v_star) = close_pairs(&params, &mut rng);
        let len = v.len().min(params.batch_slots());
        let (v, v_star) = (&v[..len], &v_star[..len]);
        let batch = sender.encrypt_batch(0, v).unwrap();
        let (ct, r_star) = receiver.masked_distance(&batch, v_star).unwrap();
        let noise = sender.sk.noise_bits(&ct).unwrap() as u32;
        let b_star_bits = u128::BITS - params.eval_noise_bound().leading_zeros();
        assert!(
            noise <= b_star_bits,
            "ℓ {ell} ℓ_c {ell_c}: {noise} > {b_star_bits}"
        );
        let got = sender.sk.decrypt_slots(&ct).unwrap();
        let (p, w) = (params.plain_modulus(), u128::from(params.word_base()));
        for j in 0..params.batch_slots() {
            // The padding: 0 for the sender, 1 for the receiver.
            let (mut a, mut b) = (
                v.get(j).copied().unwrap_or(0),
                v_star.get(j).copied().unwrap_or(1),
            );
            let mut d = 0u64;
            for _ in 0..params.digits() {
                let diff = ((a % w).abs_diff(b % w)) as u64;
                d += diff * diff;
                a /= w;
                b /= w;
            }
            assert!(d < p);
            assert_eq!(got[j], (d + r_star[j]) % p, "ℓ {ell} ℓ_c {ell_c} slot {j}");
        }
    }
}

#[test]
fn parameters_reproduce_table_3() {
    // (ℓ_c, p, [(w, u) at ℓ = 57, (w, u) at ℓ = 61]) from Table 3.
    let table = [
        (16, 40961, [(65, 10), (62, 11)]),
        (18, 188417, [(154, 8), (145, 9)]),
        (20, 1032193, [(385, 7), (360, 8)]),
        (22, 4169729, [(834, 6), (772, 7)]),
    ];
    for (ell_c, p, wu) in table {
        for (ell, (w, u)) in [57, 61].into_iter().zip(wu) {
            let params = EpcParams::per_coefficient(ell, ell_c).unwrap();
            assert_eq!(params.plain_modulus(), p);
            assert_eq!(
                (params.word_base(), params.digits()),
                (w, u),
                "ℓ {ell} ℓ_c {ell_c}"
            );
            assert_eq!(params.batch_slots(), 4096);
            // 128-bit standard: at most 109 bits at n = 4096.
            let bits: usize = params.he().moduli_bits().iter().sum();
            assert!(bits <= 109);
            assert!(!params.he().has_key_switching());
            // Theorem 1: B_fp = 2^40·B*, and Q above p·(B_fp + B* + 2p).
            assert_eq!(params.flood_bound(), params.eval_noise_bound() << 40);
            assert_eq!(params.flood_bits(), 40);
            let bound = (p as f64)
                * (params.flood_bound() as f64 + params.eval_noise_bound() as f64 + 2.0 * p as f64);
            assert!(params.log_q() > bound.log2());
        }
    }
}

#[test]
fn parameter_rules_refuse_bad_choices() {
    for (ell, ell_c, needle) in [
        (0, 16, "tag length"),
        (128, 16, "tag length"),
        (61, 14, "no plaintext prime"),
        (61, 9, "no plaintext prime"),
        (61, 40, "above 31"),
    ] {
        let err = EpcParams::new(ell, ell_c, SLOTS, 40)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "ℓ {ell} ℓ_c {ell_c}: {err}");
    }
    // The paper's setting stops at 109 bits (the 128-bit table at 4096).
    assert!(EpcParams::per_coefficient(61, 24).is_ok());
    assert!(EpcParams::per_coefficient(61, 25).is_err());
    // A run floods for all its coefficients: 2^40 · 2^14 here, and beyond
    // 109 bits the ring doubles (then ℓ_c = 16 has no prime 1 mod 2n).
    let small = EpcParams::new(61, 16, SLOTS, 40).unwrap();
    assert_eq!((small.batch_slots(), small.flood_bits()), (4096, 54));
    let large = EpcParams::new(61, 17, 1 << 21, 40).unwrap();
    assert_eq!((large.batch_slots(), large.flood_bits()), (8192, 61));
    assert!(large.log_q() <= 218.0);
    assert!(EpcParams::new(61, 16, 1 << 21, 40).is_err());
    // Tags must fit ℓ bits, batches 1..=n tags.
    let params = EpcParams::new(41, 16, SLOTS, 40).unwrap();
    let (sender, _) = EpcSender::new(&params).unwrap();
    assert!(matches!(
        sender.encrypt_batch(0, &[1 << 41]),
        Err(Error::Misuse(_))
    ));
    assert!(matches!(
        sender.encrypt_batch(0, &[]),
        Err(Error::Misuse(_))
    ));
    assert!(matches!(
        sender.encrypt_batch(0, &vec![0; 4097]),
        Err(Error::Misuse(_))
    ));
}

/// Sets the first residue after `offset` to all ones (above any modulus).
fn corrupt(bytes: &mut [u8], offset: usize) {
    for b in &mut bytes[offset..offset + 8] {
        *b = 0xff;
    }
}

#[test]
fn decoders_refuse_bad_bytes() {
    let params = EpcParams::new(61, 16, SLOTS, 40).unwrap();
    let other = EpcParams::new(61, 18, SLOTS, 40).unwrap();
    let (sender, pk) = EpcSender::new(&params).unwrap();
    let receiver = EpcReceiver::new(&params, &pk).unwrap();
    let batch = sender.encrypt_batch(3, &[5, 6, 7]).unwrap();
    let (reply, _) = receiver.evaluate_batch(3, &batch, &[5, 6, 8]).unwrap();

    // Round trips, exact sizes.
    let pk_payload = pk.to_frame().payload;
    assert_eq!(pk_payload.len(), 2 + params.public_key_bytes());
    assert_eq!(EpcPublicKey::decode(&pk_payload, &params).unwrap(), pk);
    let batch_payload = batch.to_frame().payload;
    assert_eq!(batch_payload.len(), 4 + params.sender_batch_bytes());
    assert_eq!(
        EpcSenderBatch::decode(&batch_payload, &params).unwrap(),
        batch
    );
    let reply_payload = reply.to_frame().payload;
    assert_eq!(reply_payload.len(), 4 + params.reply_bytes());
    assert_eq!(EpcReply::decode(&reply_payload, &params).unwrap(), reply);
    assert_eq!(
        (EpcPublicKey::KIND, EpcSenderBatch::KIND, EpcReply::KIND),
        (20, 21, 22)
    );

    // Truncated and over-long, for each message.
    fn short_and_long<M>(payload: &[u8], params: &EpcParams)
    where
        M: for<'a> Message<Bounds<'a> = &'a EpcParams> + std::fmt::Debug,
    {
        for cut in [0, 1, 5, payload.len() / 2, payload.len() - 1] {
            assert!(matches!(
                M::decode(&payload[..cut], params),
                Err(DecodeError::Truncated { .. })
            ));
        }
        let mut long = payload.to_vec();
        long.push(0);
        assert!(matches!(
            M::decode(&long, params),
            Err(DecodeError::TrailingBytes { count: 1 })
        ));
    }
    short_and_long::<EpcPublicKey>(&pk_payload, &params);
    short_and_long::<EpcSenderBatch>(&batch_payload, &params);
    short_and_long::<EpcReply>(&reply_payload, &params);

    // Out-of-range residues: in the key's b, in the first and the last
    // ciphertext of a batch (after the 32-byte seed).
    let mut bad = pk_payload.clone();
    corrupt(&mut bad, 2 + 32);
    assert!(matches!(
        EpcPublicKey::decode(&bad, &params),
        Err(DecodeError::Invalid { .. })
    ));
    let ct_size = wire::query_ct_size(params.he());
    for offset in [
        4 + 32,
        4 + params.digits() * ct_size + 32,
        batch_payload.len() - 8,
    ] {
        let mut bad = batch_payload.clone();
        corrupt(&mut bad, offset);
        assert!(
            matches!(
                EpcSenderBatch::decode(&bad, &params),
                Err(DecodeError::Invalid { .. })
            ),
            "offset {offset}"
        );
    }

    // A key made for other parameters, and messages sized for others.
    let (_, other_pk) = EpcSender::new(&other).unwrap();
    let err = EpcPublicKey::decode(&other_pk.to_frame().payload, &params).unwrap_err();
    assert!(err.to_string().contains("ℓ_c = 18"), "{err}");
    assert!(matches!(
        EpcReceiver::new(&params, &other_pk),
        Err(Error::Peer(Violation::Settings(_)))
    ));
    assert!(EpcSenderBatch::decode(&batch_payload, &other).is_err());
    assert!(EpcReply::decode(&reply_payload, &other).is_err());

    // Batches and replies out of order.
    assert!(matches!(
        receiver.evaluate_batch(4, &batch, &[1]),
        Err(Error::Peer(Violation::OutOfOrder(_)))
    ));
    assert!(matches!(
        sender.decrypt_reply(2, &reply, 3),
        Err(Error::Peer(Violation::OutOfOrder(_)))
    ));
    assert!(matches!(
        receiver.evaluate_all(std::slice::from_ref(&batch), &vec![0; 5000]),
        Err(Error::Peer(Violation::Count { .. }))
    ));
    assert!(matches!(
        sender.decrypt_all(&[reply], 5000),
        Err(Error::Peer(Violation::Count { .. }))
    ));
}

/// CPU seconds this process has used (user + system, from
/// `/proc/self/stat`, in the usual 100 ticks per second): on a loaded
/// machine the one-thread figures are quoted in CPU time as well as wall
/// time.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime
    // are the 12th and 13th.
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// In-process measurement at the paper's 2^20 set size (M = 1.27·2^20
/// bins, ℓ = 61) for ℓ_c = 16 and 22: each party's time on one thread and
/// with rayon over batches, and the bytes each way. Run with
/// `cargo test --release -p psikit-protocols epc_measure -- --ignored --nocapture`.
#[test]
#[ignore]
fn epc_measure() {
    use std::time::Instant;
    let m = (1.27 * f64::from(1 << 20)).ceil() as usize;
    let mut rng = StdRng::seed_from_u64(1);
    let max = max_tag(61);
    let v: Vec<u128> = (0..m).map(|_| rng.gen::<u128>() & max).collect();
    let v_star: Vec<u128> = v
        .iter()
        .map(|&x| {
            if rng.gen_bool(0.5) {
                x
            } else {
                rng.gen::<u128>() & max
            }
        })
        .collect();
    let single = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for ell_c in [16, 22] {
        let params = EpcParams::new(61, ell_c, m, 40).unwrap();
        println!("{params:?}, log2 Q = {:.2}", params.log_q());
        for (label, pool) in [("1 thread", Some(&single)), ("rayon", None)] {
            let run = || {
                let (t, c) = (Instant::now(), process_cpu_seconds());
                let (sender, pk) = EpcSender::new(&params).unwrap();
                let batches = sender.encrypt_all(&v).unwrap();
                let t_enc = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
                let (t, c) = (Instant::now(), process_cpu_seconds());
                let receiver = EpcReceiver::new(&params, &pk).unwrap();
                let (replies, r_star) = receiver.evaluate_all(&batches, &v_star).unwrap();
                let t_eval = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
                let (t, c) = (Instant::now(), process_cpu_seconds());
                let r = sender.decrypt_all(&replies, m).unwrap();
                let t_dec = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
                let up: usize = pk.to_frame().payload.len()
                    + batches
                        .iter()
                        .map(|b| b.to_frame().payload.len())
                        .sum::<usize>();
                let down: usize = replies.iter().map(|r| r.to_frame().payload.len()).sum();
                let ok = (0..m).all(|i| (r[i] == r_star[i]) == (v[i] == v_star[i]));
                (t_enc, t_eval, t_dec, up, down, ok)
            };
            let (t_enc, t_eval, t_dec, up, down, ok) = match pool {
                Some(pool) => pool.install(run),
                None => run(),
            };
            println!(
                "ℓ_c {ell_c} {label}: sender encrypt {:.2} s (CPU {:.2} s), receiver evaluate \
                 {:.2} s (CPU {:.2} s), sender decrypt {:.2} s (CPU {:.2} s); sender -> \
                 receiver {:.1} MB, receiver -> sender {:.1} MB, total {:.1} MB; correct: {ok}",
                t_enc.0,
                t_enc.1,
                t_eval.0,
                t_eval.1,
                t_dec.0,
                t_dec.1,
                up as f64 / 1e6,
                down as f64 / 1e6,
                (up + down) as f64 / 1e6
            );
            assert!(ok);
        }
    }
}
