//! Tests of the three evaluation shortcuts against the straightforward path:
//! lazy relinearization, bit-dropped result ciphertexts and prepared
//! products. Run at both APSI shapes the protocol benchmarks use: n 4096
//! `[40, 32 | 32]`, t 40961 (the crate fixture) and n 8192 `[56, 48 | 48]`,
//! t 65537.

use std::sync::OnceLock;

use proptest::prelude::*;
use rand09::Rng;

use crate::tests::{fixture, power_plan, Fixture};
use crate::wire;
use crate::*;

fn fixture_8192() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let params = HeParams::new(8192, 65537, &[56, 48, 48]).expect("params");
        let sk = SecretKey::generate(&params).expect("secret key");
        let rk = RelinKey::generate(&sk).expect("relin key");
        let eval = Evaluator::new(&params, &rk).expect("evaluator");
        Fixture {
            params,
            sk,
            rk,
            eval,
        }
    })
}

fn both() -> [&'static Fixture; 2] {
    [fixture(), fixture_8192()]
}

fn slots(f: &Fixture) -> Vec<u64> {
    let mut rng = rand09::rng();
    let t = f.params.plain_modulus();
    (0..f.params.slot_count())
        .map(|_| rng.random_range(0..t))
        .collect()
}

fn mul_mod(a: u64, b: u64, t: u64) -> u64 {
    (u128::from(a) * u128::from(b) % u128::from(t)) as u64
}

fn slotwise_product(a: &[u64], b: &[u64], t: u64) -> Vec<u64> {
    a.iter().zip(b).map(|(&x, &y)| mul_mod(x, y, t)).collect()
}

fn plain(f: &Fixture, values: &[u64]) -> PlainPoly {
    CompactPoly::from_slots(&f.params, values)
        .and_then(|c| c.to_plain(&f.params))
        .expect("plaintext")
}

/// The polys of a ciphertext as plain numbers, to compare ciphertexts.
fn coefficients(ct: &Ciphertext) -> Vec<Vec<u64>> {
    ct.inner()
        .iter()
        .map(|p| p.coefficients().iter().copied().collect())
        .collect()
}

// ---------------------------------------------------------------------------
// 1. Lazy relinearization
// ---------------------------------------------------------------------------

#[test]
fn add_assign_mixes_two_and_three_parts() {
    let f = fixture();
    let t = f.params.plain_modulus();
    let (a, b, c) = (slots(f), slots(f), slots(f));
    let enc = |v: &[u64]| f.sk.encrypt_slots(v).unwrap();
    let (ca, cb, cc) = (enc(&a), enc(&b), enc(&c));
    let ab = slotwise_product(&a, &b, t);
    let expected: Vec<u64> = ab.iter().zip(&c).map(|(&x, &y)| (x + y) % t).collect();

    // 3-part accumulator plus a 2-part term.
    let mut acc = f.eval.mul_lazy(&ca, &cb).unwrap();
    f.eval.add_assign(&mut acc, &cc).unwrap();
    assert_eq!(acc.parts(), 3);
    assert_eq!(f.sk.decrypt_slots(&acc).unwrap(), expected);

    // 2-part accumulator plus a 3-part term grows to 3 parts.
    let mut acc = cc.clone();
    f.eval
        .add_assign(&mut acc, &f.eval.mul_lazy(&ca, &cb).unwrap())
        .unwrap();
    assert_eq!(acc.parts(), 3);
    assert_eq!(f.sk.decrypt_slots(&acc).unwrap(), expected);
    f.eval.relin(&mut acc).unwrap();
    assert_eq!(acc.parts(), 2);
    assert_eq!(f.sk.decrypt_slots(&acc).unwrap(), expected);
}

#[test]
fn dot_of_three_part_terms_matches_relinearized_terms() {
    let f = fixture();
    let t = f.params.plain_modulus();
    let terms = 6;
    let xs: Vec<Vec<u64>> = (0..2 * terms).map(|_| slots(f)).collect();
    let ps: Vec<Vec<u64>> = (0..terms).map(|_| slots(f)).collect();
    let cts: Vec<Ciphertext> = xs.iter().map(|x| f.sk.encrypt_slots(x).unwrap()).collect();
    let lazy: Vec<Ciphertext> = (0..terms)
        .map(|j| f.eval.mul_lazy(&cts[2 * j], &cts[2 * j + 1]).unwrap())
        .collect();
    let relinearized: Vec<Ciphertext> = (0..terms)
        .map(|j| f.eval.mul_relin(&cts[2 * j], &cts[2 * j + 1]).unwrap())
        .collect();
    let plains: Vec<PlainPoly> = ps.iter().map(|p| plain(f, p)).collect();
    let pts: Vec<&PlainPoly> = plains.iter().collect();
    let expected: Vec<u64> = (0..f.params.slot_count())
        .map(|i| {
            (0..terms).fold(0, |acc, j| {
                let x = mul_mod(xs[2 * j][i], xs[2 * j + 1][i], t);
                (acc + mul_mod(x, ps[j][i], t)) % t
            })
        })
        .collect();

    // All terms 3-part, all 2-part, and mixed (every other term lazy).
    let mixed: Vec<&Ciphertext> = (0..terms)
        .map(|j| {
            if j % 2 == 0 {
                &lazy[j]
            } else {
                &relinearized[j]
            }
        })
        .collect();
    for (name, terms) in [
        ("3-part", lazy.iter().collect::<Vec<_>>()),
        ("2-part", relinearized.iter().collect()),
        ("mixed", mixed),
    ] {
        let mut sum = f.eval.dot(&terms, &pts).unwrap();
        assert_eq!(f.sk.decrypt_slots(&sum).unwrap(), expected, "{name}");
        // to_lowest relinearizes a 3-part result itself.
        f.eval.to_lowest(&mut sum).unwrap();
        assert_eq!((sum.parts(), sum.level()), (2, f.params.lowest_level()));
        let back = wire::decode_result_ct(&f.params, &wire::encode_result_ct(&sum).unwrap());
        assert_eq!(
            f.sk.decrypt_slots(&back.unwrap()).unwrap(),
            expected,
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------
// 3. Prepared products
// ---------------------------------------------------------------------------

#[test]
fn prepared_products_equal_mul_relin() {
    for f in both() {
        let t = f.params.plain_modulus();
        let (a, b) = (slots(f), slots(f));
        let (ca, cb) = (
            f.sk.encrypt_slots(&a).unwrap(),
            f.sk.encrypt_slots(&b).unwrap(),
        );
        let (pa, pb) = (f.eval.prepare(&ca).unwrap(), f.eval.prepare(&cb).unwrap());
        let ours = f.eval.mul_prepared(&pa, &pb).unwrap();
        let theirs = f.eval.mul_relin(&ca, &cb).unwrap();
        assert_eq!(
            coefficients(&ours),
            coefficients(&theirs),
            "n {}",
            f.params.degree()
        );
        let ab = slotwise_product(&a, &b, t);
        assert_eq!(f.sk.decrypt_slots(&ours).unwrap(), ab);

        // Unrelinearized, the product decrypts like fhe's 3-part one.
        let lazy = f.eval.mul_prepared_lazy(&pa, &pb).unwrap();
        assert_eq!(lazy.parts(), 3);
        assert_eq!(f.sk.decrypt_slots(&lazy).unwrap(), ab);

        // Squaring, and a second level from a product (not a fresh input).
        let sq = f.eval.mul_prepared(&pa, &pa).unwrap();
        let theirs_sq = f.eval.mul_relin(&ca, &ca).unwrap();
        assert_eq!(coefficients(&sq), coefficients(&theirs_sq));
        let pab = f.eval.prepare(&ours).unwrap();
        let deeper = f.eval.mul_prepared(&pab, &pa).unwrap();
        let theirs_deeper = f.eval.mul_relin(&theirs, &ca).unwrap();
        assert_eq!(coefficients(&deeper), coefficients(&theirs_deeper));
    }

    // Depth 2 on full-range slots decrypts only with the 8192 set's budget:
    // the 4096 set's 72-bit query level fails now and then (both paths
    // alike, as the equality above shows), so its decryption is not checked.
    let f = fixture_8192();
    let t = f.params.plain_modulus();
    let (a, b) = (slots(f), slots(f));
    let (ca, cb) = (
        f.sk.encrypt_slots(&a).unwrap(),
        f.sk.encrypt_slots(&b).unwrap(),
    );
    let pa = f.eval.prepare(&ca).unwrap();
    let ab = f
        .eval
        .mul_prepared(&pa, &f.eval.prepare(&cb).unwrap())
        .unwrap();
    let deeper = f
        .eval
        .mul_prepared(&f.eval.prepare(&ab).unwrap(), &pa)
        .unwrap();
    assert!(f.sk.noise_budget_bits(&deeper).unwrap() > 0);
    assert_eq!(
        f.sk.decrypt_slots(&deeper).unwrap(),
        slotwise_product(&slotwise_product(&a, &b, t), &a, t)
    );
}

#[test]
fn sum_of_products_matches_separate_products() {
    for f in both() {
        let t = f.params.plain_modulus();
        let inputs: Vec<(Vec<u64>, Vec<u64>)> = (0..5).map(|_| (slots(f), slots(f))).collect();
        let prepared: Vec<(Prepared, Prepared)> = inputs
            .iter()
            .map(|(a, b)| {
                let ca = f.sk.encrypt_slots(a).unwrap();
                let cb = f.sk.encrypt_slots(b).unwrap();
                (f.eval.prepare(&ca).unwrap(), f.eval.prepare(&cb).unwrap())
            })
            .collect();
        let pairs: Vec<(&Prepared, &Prepared)> = prepared.iter().map(|(a, b)| (a, b)).collect();
        let fused = f.eval.sum_of_products(&pairs).unwrap();
        assert_eq!(fused.parts(), 3);

        let mut separate = f.eval.mul_prepared_lazy(pairs[0].0, pairs[0].1).unwrap();
        for (a, b) in &pairs[1..] {
            let product = f.eval.mul_prepared_lazy(a, b).unwrap();
            f.eval.add_assign(&mut separate, &product).unwrap();
        }
        let want = inputs
            .iter()
            .fold(vec![0u64; inputs[0].0.len()], |acc, (a, b)| {
                let ab = slotwise_product(a, b, t);
                acc.iter().zip(&ab).map(|(x, y)| (x + y) % t).collect()
            });
        assert_eq!(f.sk.decrypt_slots(&fused).unwrap(), want);
        assert_eq!(f.sk.decrypt_slots(&separate).unwrap(), want);
        // One rounding instead of five: never more noise, give or take the
        // budget estimate's last bit.
        assert!(
            f.sk.noise_budget_bits(&fused).unwrap() + 1
                >= f.sk.noise_budget_bits(&separate).unwrap(),
            "n {}",
            f.params.degree()
        );
    }
    assert!(fixture().eval.sum_of_products(&[]).is_err());
}

#[test]
fn prepare_rejects_what_products_reject() {
    let f = fixture();
    let ct = f.sk.encrypt_slots(&[1, 2, 3]).unwrap();
    let three = f.eval.mul_lazy(&ct, &ct).unwrap();
    assert!(matches!(
        f.eval.prepare(&three),
        Err(HeError::WrongParts { .. })
    ));
    let mut low = ct.clone();
    f.eval.to_lowest(&mut low).unwrap();
    assert!(matches!(
        f.eval.prepare(&low),
        Err(HeError::WrongLevel { .. })
    ));
    let g = fixture_8192();
    let ours = f.eval.prepare(&ct).unwrap();
    let foreign = g.eval.prepare(&g.sk.encrypt_slots(&[1]).unwrap()).unwrap();
    assert_eq!(
        f.eval.mul_prepared(&ours, &foreign).unwrap_err(),
        HeError::ParamsMismatch
    );
    assert_eq!(g.eval.prepare(&ct).unwrap_err(), HeError::ParamsMismatch);
    // 2 parts over k + e moduli: 2 + 3 at n 4096.
    assert_eq!(ours.byte_size(), 2 * 5 * 4096 * 8);
}

// ---------------------------------------------------------------------------
// All three together against the straightforward path
// ---------------------------------------------------------------------------

/// One polynomial evaluation in the protocol's shape: powers `1..=degree`
/// from `sources`, a dense random polynomial per slot with constant term,
/// switched to the lowest level.
struct Evaluation {
    y: Vec<u64>,
    coeffs: Vec<Vec<u64>>,
    sources: Vec<Ciphertext>,
    plan: Vec<(usize, usize, usize)>,
    plains: Vec<PlainPoly>,
}

impl Evaluation {
    fn new(f: &Fixture, source_exps: &[usize], degree: usize) -> Self {
        let t = f.params.plain_modulus();
        let y = slots(f);
        let sources = source_exps
            .iter()
            .map(|&s| {
                let powers: Vec<u64> = y.iter().map(|&v| pow(v, s, t)).collect();
                f.sk.encrypt_slots(&powers).unwrap()
            })
            .collect();
        let coeffs: Vec<Vec<u64>> = (0..=degree).map(|_| slots(f)).collect();
        let plains = coeffs.iter().map(|c| plain(f, c)).collect();
        let (plan, _) = power_plan(source_exps, degree);
        Self {
            y,
            coeffs,
            sources,
            plan,
            plains,
        }
    }

    fn degree(&self) -> usize {
        self.coeffs.len() - 1
    }

    fn expected(&self, t: u64) -> Vec<u64> {
        self.y
            .iter()
            .enumerate()
            .map(|(i, &y)| {
                (0..=self.degree())
                    .rev()
                    .fold(0, |acc, j| (mul_mod(acc, y, t) + self.coeffs[j][i]) % t)
            })
            .collect()
    }

    /// Places the source ciphertexts at their exponents.
    fn seeded_powers(&self, source_exps: &[usize]) -> Vec<Option<Ciphertext>> {
        let mut powers = vec![None; self.degree() + 1];
        for (&s, ct) in source_exps.iter().zip(&self.sources) {
            powers[s] = Some(ct.clone());
        }
        powers
    }

    /// Every product relinearized with `mul_relin`, one dot product.
    fn straightforward(&self, f: &Fixture, source_exps: &[usize]) -> Ciphertext {
        let mut powers = self.seeded_powers(source_exps);
        for &(e, a, b) in &self.plan {
            let (pa, pb) = (powers[a].as_ref().unwrap(), powers[b].as_ref().unwrap());
            powers[e] = Some(f.eval.mul_relin(pa, pb).unwrap());
        }
        self.finish(f, &powers)
    }

    /// Factors prepared once; powers no product uses stay 3-part.
    fn fast(&self, f: &Fixture, source_exps: &[usize]) -> Ciphertext {
        let mut powers = self.seeded_powers(source_exps);
        let mut prepared: Vec<Option<Prepared>> = vec![None; self.degree() + 1];
        let is_factor = |x: usize| self.plan.iter().any(|&(_, a, b)| a == x || b == x);
        for &(e, a, b) in &self.plan {
            for x in [a, b] {
                if prepared[x].is_none() {
                    prepared[x] = Some(f.eval.prepare(powers[x].as_ref().unwrap()).unwrap());
                }
            }
            let (pa, pb) = (prepared[a].as_ref().unwrap(), prepared[b].as_ref().unwrap());
            powers[e] = Some(if is_factor(e) {
                f.eval.mul_prepared(pa, pb).unwrap()
            } else {
                f.eval.mul_prepared_lazy(pa, pb).unwrap()
            });
        }
        self.finish(f, &powers)
    }

    fn finish(&self, f: &Fixture, powers: &[Option<Ciphertext>]) -> Ciphertext {
        let mut cts: Vec<&Ciphertext> = vec![f.eval.one()];
        cts.extend(powers[1..].iter().map(|p| p.as_ref().unwrap()));
        let pts: Vec<&PlainPoly> = self.plains.iter().collect();
        let mut result = f.eval.dot(&cts, &pts).unwrap();
        f.eval.to_lowest(&mut result).unwrap();
        result
    }
}

fn pow(base: u64, exp: usize, t: u64) -> u64 {
    (0..exp).fold(1, |acc, _| mul_mod(acc, base, t))
}

/// Where `want` differs from `got`: count and first slot (short messages
/// instead of printing thousands of slots).
fn assert_slots(got: &[u64], want: &[u64], what: &str) {
    let wrong: Vec<usize> = (0..want.len()).filter(|&i| got[i] != want[i]).collect();
    assert!(
        wrong.is_empty() && got.len() == want.len(),
        "{what}: {} wrong slots, first {:?}",
        wrong.len(),
        wrong.first()
    );
}

/// APSI's own evaluations: `1M-1024-cmp` (n 4096, depth 1, degree 101) and
/// `1M-1-32` (n 8192, depth 2, degree 228). Lazy relinearization plus
/// prepared products decrypt exactly like the straightforward path, and so
/// does the bit-dropped wire form at [`wire::safe_drop_bits`].
#[test]
fn shortcuts_match_straightforward_and_dropped_results_keep_budget() {
    let shapes: [(&Fixture, &[usize], usize); 2] = [
        (
            fixture(),
            &[1, 3, 4, 5, 8, 14, 20, 26, 32, 38, 44, 47, 48, 49, 51, 52],
            101,
        ),
        (fixture_8192(), &[1, 3, 8, 19, 33, 39, 92, 102], 228),
    ];
    for (f, source_exps, degree) in shapes {
        let t = f.params.plain_modulus();
        let eval = Evaluation::new(f, source_exps, degree);
        let expected = eval.expected(t);
        let plain = eval.straightforward(f, source_exps);
        let fast = eval.fast(f, source_exps);
        assert_slots(&f.sk.decrypt_slots(&plain).unwrap(), &expected, "plain");
        assert_slots(&f.sk.decrypt_slots(&fast).unwrap(), &expected, "fast");
        let before = f.sk.noise_budget_bits(&fast).unwrap();
        println!(
            "n {}: budget straightforward {}, fast {before}",
            f.params.degree(),
            f.sk.noise_budget_bits(&plain).unwrap()
        );
        let drop = wire::safe_drop_bits(&f.params);
        // How much slack the formula leaves (printed for calibration).
        for more in [2, 4, 6] {
            let bytes = wire::encode_result_ct_dropped(&fast, drop + more).unwrap();
            let dropped = wire::decode_result_ct_dropped(&f.params, &bytes, drop + more).unwrap();
            let after = f.sk.noise_budget_bits(&dropped).unwrap();
            let ok = f.sk.decrypt_slots(&dropped).unwrap() == expected;
            println!("  drop {}: budget {after}, correct {ok}", drop + more);
        }
        let bytes = wire::encode_result_ct_dropped(&fast, drop).unwrap();
        let dropped = wire::decode_result_ct_dropped(&f.params, &bytes, drop).unwrap();
        assert_slots(&f.sk.decrypt_slots(&dropped).unwrap(), &expected, "dropped");
        let after = f.sk.noise_budget_bits(&dropped).unwrap();
        println!(
            "  drop {drop} (safe): budget {after}, {} -> {} bytes",
            wire::result_ct_size(&f.params),
            bytes.len()
        );
        assert!(after >= 2, "budget {after} after dropping {drop} bits");
    }
}

// ---------------------------------------------------------------------------
// 2. Bit-dropped result ciphertexts
// ---------------------------------------------------------------------------

#[test]
fn safe_drop_bits_follow_the_formula() {
    // D = q1/(2t); largest d with 2^(d-1)(1 + 4 sqrt(2n/3)) <= D/32.
    assert_eq!(wire::safe_drop_bits(&fixture().params), 11);
    assert_eq!(wire::safe_drop_bits(&fixture_8192().params), 26);
    // No room: q1 barely above t.
    let tight = HeParams::new(4096, 40961, &[20, 30]).unwrap();
    assert_eq!(wire::safe_drop_bits(&tight), 0);
}

/// The rounding noise measured on a low-noise ciphertext lands between the
/// standard deviation of a coefficient of `e1·s`, `2^(d-1)·sqrt(2n/9)`, and
/// the bound `2^(d-1)·(1 + 4·sqrt(2n/3))` that `safe_drop_bits` uses.
#[test]
fn rounding_noise_matches_the_model() {
    for f in both() {
        let n = f.params.degree() as f64;
        let values = slots(f);
        let mut ct = f.sk.encrypt_slots(&values).unwrap();
        f.eval.to_lowest(&mut ct).unwrap();
        let before = f.sk.noise_bits(&ct).unwrap();
        // Rounding dominates, yet stays below q1/(2t) (2^23.7 at n 4096):
        // beyond it decryption changes and the measurement wraps.
        let drop = 12;
        let bytes = wire::encode_result_ct_dropped(&ct, drop).unwrap();
        let back = wire::decode_result_ct_dropped(&f.params, &bytes, drop).unwrap();
        assert_slots(&f.sk.decrypt_slots(&back).unwrap(), &values, "dropped");
        let measured = f.sk.noise_bits(&back).unwrap() as f64;
        let sigma = f64::from(drop - 1) + (2.0 * n / 9.0).sqrt().log2();
        let bound = f64::from(drop - 1) + (1.0 + 4.0 * (2.0 * n / 3.0).sqrt()).log2();
        println!("n {n}: noise {before} bits, after dropping {drop}: {measured} (σ {sigma:.1}, bound {bound:.1})");
        // noise_bits counts the bits of the largest coefficient.
        assert!(measured > sigma && measured <= bound.ceil(), "{measured}");
    }
}

#[test]
fn dropped_round_trip_sizes_and_errors() {
    let f = fixture();
    let p = &f.params;
    let values = slots(f);
    let mut ct = f.sk.encrypt_slots(&values).unwrap();
    assert!(matches!(
        wire::encode_result_ct_dropped(&ct, 4),
        Err(HeError::WrongLevel { .. })
    ));
    f.eval.to_lowest(&mut ct).unwrap();
    for drop in [0, 1, 7, 11] {
        let bytes = wire::encode_result_ct_dropped(&ct, drop).unwrap();
        assert_eq!(bytes.len(), 2 * 4096 * (40 - drop as usize) / 8);
        let back = wire::decode_result_ct_dropped(p, &bytes, drop).unwrap();
        assert_eq!(f.sk.decrypt_slots(&back).unwrap(), values);
        // Re-encoding a decoded result is stable.
        assert_eq!(wire::encode_result_ct_dropped(&back, drop).unwrap(), bytes);
    }
    // Dropping nothing keeps the ciphertext exactly.
    let back =
        wire::decode_result_ct_dropped(p, &wire::encode_result_ct_dropped(&ct, 0).unwrap(), 0)
            .unwrap();
    assert_eq!(coefficients(&back), coefficients(&ct));

    let bytes = wire::encode_result_ct_dropped(&ct, 11).unwrap();
    for bad_len in [0, bytes.len() - 1, bytes.len() + 1] {
        let mut b = bytes.clone();
        b.resize(bad_len, 0);
        assert!(matches!(
            wire::decode_result_ct_dropped(p, &b, 11),
            Err(HeError::WireLength { .. })
        ));
    }
    // Another drop count means another length.
    assert!(matches!(
        wire::decode_result_ct_dropped(p, &bytes, 10),
        Err(HeError::WireLength { .. })
    ));
    let too_many = HeError::DropBits {
        drop_bits: 40,
        max_drop_bits: 39,
    };
    assert_eq!(
        wire::encode_result_ct_dropped(&ct, 40).unwrap_err(),
        too_many
    );
    assert_eq!(
        wire::decode_result_ct_dropped(p, &bytes, 40).unwrap_err(),
        too_many
    );
    assert_eq!(wire::result_ct_size_dropped(p, 40).unwrap_err(), too_many);
    assert_eq!(
        wire::decode_result_ct_dropped(p, &bytes, u32::MAX).unwrap_err(),
        HeError::DropBits {
            drop_bits: u32::MAX,
            max_drop_bits: 39
        }
    );
    assert!(wire::encode_result_ct_dropped(&ct, 39).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Any bytes, of any length and drop count, decode or fail cleanly; at
    /// the exact length every bit string is a valid encoding.
    #[test]
    fn dropped_decoder_never_panics(seed in any::<u64>(), drop in 0u32..48, exact in any::<bool>()) {
        let p = &fixture().params;
        let len = match wire::result_ct_size_dropped(p, drop) {
            Ok(size) if exact => size,
            _ => (seed % 12_000) as usize,
        };
        let bytes: Vec<u8> = (0..len).map(|i| (seed.rotate_left(i as u32 % 64) ^ i as u64) as u8).collect();
        match wire::decode_result_ct_dropped(p, &bytes, drop) {
            Ok(ct) => prop_assert_eq!(ct.level(), p.lowest_level()),
            Err(e) => prop_assert!(matches!(e, HeError::WireLength { .. } | HeError::DropBits { .. }), "{:?}", e),
        }
    }
}
