//! Crate tests at APSI's `1M-1024-cmp` parameters (n 4096, t 40961,
//! moduli [40, 32 | 32]), which keep every homomorphic operation cheap.

use std::sync::OnceLock;

use fhe::bfv::{Encoding, Plaintext};
use fhe_math::rq::{traits::TryConvertFrom, Poly};
use fhe_traits::FheEncoder;
use proptest::prelude::*;
use rand09::Rng;

use crate::pack::bit_width;
use crate::wire::{self, SEED_LEN};
use crate::*;

const N: usize = 4096;
const T: u64 = 40961;

pub(crate) struct Fixture {
    pub(crate) params: HeParams,
    pub(crate) sk: SecretKey,
    pub(crate) rk: RelinKey,
    pub(crate) eval: Evaluator,
}

pub(crate) fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let params = HeParams::new(N, T, &[40, 32, 32]).expect("params");
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

pub(crate) fn random_slots(len: usize) -> Vec<u64> {
    let mut rng = rand09::rng();
    (0..len).map(|_| rng.random_range(0..T)).collect()
}

fn mul_mod(a: u64, b: u64) -> u64 {
    a * b % T
}

#[test]
fn handles_are_send_and_sync() {
    fn check<X: Send + Sync>() {}
    check::<HeParams>();
    check::<Ciphertext>();
    check::<CompactPoly>();
    check::<PlainPoly>();
    check::<SecretKey>();
    check::<RelinKey>();
    check::<Evaluator>();
}

#[test]
fn secret_key_is_ternary() {
    let coeffs = fixture().sk.coefficients_for_test();
    assert_eq!(coeffs.len(), N);
    let mut counts = [0usize; 3];
    for c in &coeffs {
        assert!((-1..=1).contains(c), "coefficient {c} is not ternary");
        counts[(c + 1) as usize] += 1;
    }
    // Each value has probability 1/3; 6 standard deviations is ±181.
    for count in counts {
        assert!(count.abs_diff(N / 3) < 200, "counts {counts:?}");
    }
}

#[test]
fn encrypt_decrypt_at_query_and_lowest_level() {
    let f = fixture();
    let slots = random_slots(N);
    let mut ct = f.sk.encrypt_slots(&slots).unwrap();
    assert_eq!((ct.level(), ct.parts()), (1, 2));
    assert_eq!(f.sk.decrypt_slots(&ct).unwrap(), slots);
    f.eval.to_lowest(&mut ct).unwrap();
    assert_eq!(ct.level(), f.params.lowest_level());
    assert_eq!(f.sk.decrypt_slots(&ct).unwrap(), slots);
    // Short input: the remaining slots are zero.
    let ct = f.sk.encrypt_slots(&[5, 6, 7]).unwrap();
    let out = f.sk.decrypt_slots(&ct).unwrap();
    assert_eq!(&out[..3], &[5, 6, 7]);
    assert!(out[3..].iter().all(|&v| v == 0));
    assert!(f.sk.noise_budget_bits(&ct).unwrap() > 20);
}

#[test]
fn encrypt_rejects_bad_slots() {
    let f = fixture();
    assert!(matches!(
        f.sk.encrypt_slots(&vec![0; N + 1]),
        Err(HeError::TooManySlots {
            got: 4097,
            max: 4096
        })
    ));
    assert_eq!(
        f.sk.encrypt_slots(&[1, T]).unwrap_err(),
        HeError::SlotOutOfRange {
            index: 1,
            value: T,
            modulus: T
        }
    );
}

#[test]
fn products_are_slotwise() {
    let f = fixture();
    let (a, b, c, d) = (
        random_slots(N),
        random_slots(N),
        random_slots(N),
        random_slots(N),
    );
    let enc = |v: &[u64]| f.sk.encrypt_slots(v).unwrap();
    let (ca, cb, cc, cd) = (enc(&a), enc(&b), enc(&c), enc(&d));

    let ab = f.eval.mul_relin(&ca, &cb).unwrap();
    assert_eq!(ab.parts(), 2);
    let expected: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| mul_mod(x, y)).collect();
    assert_eq!(f.sk.decrypt_slots(&ab).unwrap(), expected);

    // Two lazy products summed, one relinearization: ab + cd.
    let mut acc = f.eval.mul_lazy(&ca, &cb).unwrap();
    assert_eq!(acc.parts(), 3);
    f.eval
        .add_assign(&mut acc, &f.eval.mul_lazy(&cc, &cd).unwrap())
        .unwrap();
    f.eval.relin(&mut acc).unwrap();
    assert_eq!(acc.parts(), 2);
    let expected: Vec<u64> = (0..N)
        .map(|i| (mul_mod(a[i], b[i]) + mul_mod(c[i], d[i])) % T)
        .collect();
    assert_eq!(f.sk.decrypt_slots(&acc).unwrap(), expected);

    // Squaring takes fhe's other multiplication path.
    let aa = f.eval.mul_relin(&ca, &ca).unwrap();
    let expected: Vec<u64> = a.iter().map(|&x| mul_mod(x, x)).collect();
    assert_eq!(f.sk.decrypt_slots(&aa).unwrap(), expected);
}

#[test]
fn dot_product_is_slotwise() {
    let f = fixture();
    let terms = 7;
    let xs: Vec<Vec<u64>> = (0..terms).map(|_| random_slots(N)).collect();
    let ps: Vec<Vec<u64>> = (0..terms).map(|_| random_slots(N)).collect();
    let cts: Vec<Ciphertext> = xs.iter().map(|x| f.sk.encrypt_slots(x).unwrap()).collect();
    let pts: Vec<PlainPoly> = ps
        .iter()
        .map(|p| {
            let compact = CompactPoly::from_slots(&f.params, p).unwrap();
            compact.to_plain(&f.params).unwrap()
        })
        .collect();
    let ct_refs: Vec<&Ciphertext> = cts.iter().collect();
    let pt_refs: Vec<&PlainPoly> = pts.iter().collect();
    let mut sum = f.eval.dot(&ct_refs, &pt_refs).unwrap();
    let expected: Vec<u64> = (0..N)
        .map(|i| (0..terms).map(|j| mul_mod(xs[j][i], ps[j][i])).sum::<u64>() % T)
        .collect();
    assert_eq!(f.sk.decrypt_slots(&sum).unwrap(), expected);
    f.eval.to_lowest(&mut sum).unwrap();
    assert_eq!(f.sk.decrypt_slots(&sum).unwrap(), expected);
}

#[test]
fn compact_poly_matches_fhe_encoding() {
    let f = fixture();
    let slots = random_slots(N);
    let compact = CompactPoly::from_slots(&f.params, &slots).unwrap();
    let fhe_pt = Plaintext::try_encode(
        &slots,
        Encoding::simd_at_level(f.params.query_level()),
        f.params.bfv(),
    )
    .unwrap();
    let ctx = f.params.context_at(f.params.query_level()).unwrap();
    let fhe_coeffs = Poly::try_convert_from(&fhe_pt, ctx, false, None).unwrap();
    let row: Vec<u64> = fhe_coeffs.coefficients().row(0).to_vec();
    let ours = crate::pack::unpack_checked(compact.as_bytes(), N, bit_width(T), T).unwrap();
    assert_eq!(ours, row);
    assert_eq!(compact.to_slots(&f.params).unwrap(), slots);
}

#[test]
fn centered_plain_poly_decrypts_like_fhe_plaintext() {
    let f = fixture();
    let (x, p) = (random_slots(N), random_slots(N));
    let ct = f.sk.encrypt_slots(&x).unwrap();
    let fhe_pt = Plaintext::try_encode(
        &p,
        Encoding::simd_at_level(f.params.query_level()),
        f.params.bfv(),
    )
    .unwrap();
    let theirs = Ciphertext::new(&f.params, ct.inner() * &fhe_pt);
    let plain = CompactPoly::from_slots(&f.params, &p)
        .unwrap()
        .to_plain(&f.params)
        .unwrap();
    let ours = f.eval.dot(&[&ct], &[&plain]).unwrap();
    let expected: Vec<u64> = x.iter().zip(&p).map(|(&a, &b)| mul_mod(a, b)).collect();
    assert_eq!(f.sk.decrypt_slots(&theirs).unwrap(), expected);
    assert_eq!(f.sk.decrypt_slots(&ours).unwrap(), expected);
    let (n_theirs, n_ours) = (
        f.sk.noise_bits(&theirs).unwrap(),
        f.sk.noise_bits(&ours).unwrap(),
    );
    println!("ct x pt noise: fhe plaintext {n_theirs} bits, centered {n_ours} bits");
    assert!(n_ours <= n_theirs, "centered lift should not add noise");
}

#[test]
fn constant_term_through_trivial_ones() {
    let f = fixture();
    assert_eq!(f.sk.decrypt_slots(f.eval.one()).unwrap(), vec![1; N]);
    let (x, p, c) = (random_slots(N), random_slots(N), random_slots(N));
    let ct = f.sk.encrypt_slots(&x).unwrap();
    let to_plain = |v: &[u64]| {
        CompactPoly::from_slots(&f.params, v)
            .unwrap()
            .to_plain(&f.params)
            .unwrap()
    };
    let (pp, pc) = (to_plain(&p), to_plain(&c));
    let ours = f.eval.dot(&[f.eval.one(), &ct], &[&pc, &pp]).unwrap();
    let expected: Vec<u64> = (0..N).map(|i| (mul_mod(x[i], p[i]) + c[i]) % T).collect();
    assert_eq!(f.sk.decrypt_slots(&ours).unwrap(), expected);

    // fhe's own route: ct * pt + pt.
    let level = Encoding::simd_at_level(f.params.query_level());
    let fhe_p = Plaintext::try_encode(&p, level.clone(), f.params.bfv()).unwrap();
    let fhe_c = Plaintext::try_encode(&c, level, f.params.bfv()).unwrap();
    let theirs = Ciphertext::new(&f.params, &(ct.inner() * &fhe_p) + &fhe_c);
    assert_eq!(f.sk.decrypt_slots(&theirs).unwrap(), expected);
    assert!(f.sk.noise_bits(&ours).unwrap() <= f.sk.noise_bits(&theirs).unwrap());
}

#[test]
fn wire_sizes_are_exact() {
    let p = &fixture().params;
    assert_eq!(wire::query_ct_size(p), 32 + 4096 / 8 * (40 + 32));
    assert_eq!(wire::result_ct_size(p), 2 * 4096 / 8 * 40);
    assert_eq!(wire::relin_key_size(p), 32 + 2 * 4096 / 8 * (40 + 32 + 32));
    assert_eq!(CompactPoly::encoded_size(p), 4096 * 16 / 8);
    let big = HeParams::new(8192, 65537, &[56, 56, 56, 50]).unwrap();
    assert_eq!(wire::query_ct_size(&big), 172_064);
    assert_eq!(wire::result_ct_size(&big), 114_688);
    assert_eq!(wire::relin_key_size(&big), 669_728);
}

#[test]
fn query_ct_round_trip() {
    let f = fixture();
    let slots = random_slots(N);
    let ct = f.sk.encrypt_slots(&slots).unwrap();
    let bytes = wire::encode_query_ct(&ct).unwrap();
    assert_eq!(bytes.len(), wire::query_ct_size(&f.params));
    let back = wire::decode_query_ct(&f.params, &bytes).unwrap();
    assert_eq!(back.level(), f.params.query_level());
    assert_eq!(f.sk.decrypt_slots(&back).unwrap(), slots);
    assert_eq!(wire::encode_query_ct(&back).unwrap(), bytes);
    // Any change to a fresh ciphertext drops its seed.
    let mut summed = ct.clone();
    f.eval.add_assign(&mut summed, &ct).unwrap();
    assert_eq!(
        wire::encode_query_ct(&summed).unwrap_err(),
        HeError::NotSeeded
    );
    // The server computes on decoded queries.
    let sq = f.eval.mul_relin(&back, &back).unwrap();
    let expected: Vec<u64> = slots.iter().map(|&v| mul_mod(v, v)).collect();
    assert_eq!(f.sk.decrypt_slots(&sq).unwrap(), expected);
    // Results of operations have no seed.
    assert_eq!(wire::encode_query_ct(&sq).unwrap_err(), HeError::NotSeeded);
}

#[test]
fn result_ct_round_trip() {
    let f = fixture();
    let slots = random_slots(N);
    let mut ct = f.sk.encrypt_slots(&slots).unwrap();
    assert!(matches!(
        wire::encode_result_ct(&ct),
        Err(HeError::WrongLevel { .. })
    ));
    f.eval.to_lowest(&mut ct).unwrap();
    let bytes = wire::encode_result_ct(&ct).unwrap();
    assert_eq!(bytes.len(), wire::result_ct_size(&f.params));
    let back = wire::decode_result_ct(&f.params, &bytes).unwrap();
    assert_eq!(f.sk.decrypt_slots(&back).unwrap(), slots);
    assert_eq!(wire::encode_result_ct(&back).unwrap(), bytes);
}

#[test]
fn relin_key_round_trip() {
    let f = fixture();
    let bytes = f.rk.to_bytes().unwrap();
    assert_eq!(bytes.len(), wire::relin_key_size(&f.params));
    let back = RelinKey::from_bytes(&f.params, &bytes).unwrap();
    assert_eq!(back.to_bytes().unwrap(), bytes);
    let eval = Evaluator::new(&f.params, &back).unwrap();
    let (a, b) = (random_slots(N), random_slots(N));
    let ab = eval
        .mul_relin(
            &f.sk.encrypt_slots(&a).unwrap(),
            &f.sk.encrypt_slots(&b).unwrap(),
        )
        .unwrap();
    let expected: Vec<u64> = a.iter().zip(&b).map(|(&x, &y)| mul_mod(x, y)).collect();
    assert_eq!(f.sk.decrypt_slots(&ab).unwrap(), expected);
}

/// Sets the first `width` bits after `offset` bytes to ones: a residue of
/// `2^width - 1`, never below a `width`-bit modulus.
fn poison(bytes: &[u8], offset: usize) -> Vec<u8> {
    let mut bad = bytes.to_vec();
    bad[offset..offset + 8].fill(0xff);
    bad
}

#[test]
fn decoders_reject_bad_input() {
    let f = fixture();
    let p = &f.params;
    let mut ct = f.sk.encrypt_slots(&random_slots(N)).unwrap();
    let query = wire::encode_query_ct(&ct).unwrap();
    f.eval.to_lowest(&mut ct).unwrap();
    let result = wire::encode_result_ct(&ct).unwrap();
    let key = f.rk.to_bytes().unwrap();

    type Decoder = fn(&HeParams, &[u8]) -> Result<(), HeError>;
    let decoders: [(&str, Vec<u8>, Decoder, usize); 3] = [
        (
            "query",
            query,
            |p, b| wire::decode_query_ct(p, b).map(drop),
            SEED_LEN,
        ),
        (
            "result",
            result,
            |p, b| wire::decode_result_ct(p, b).map(drop),
            0,
        ),
        (
            "key",
            key,
            |p, b| RelinKey::from_bytes(p, b).map(drop),
            SEED_LEN,
        ),
    ];
    for (name, good, decode, first_poly) in decoders {
        assert!(decode(p, &good).is_ok(), "{name}");
        let short = decode(p, &good[..good.len() - 1]);
        assert!(matches!(short, Err(HeError::WireLength { .. })), "{name}");
        let mut long = good.clone();
        long.push(0);
        assert!(
            matches!(decode(p, &long), Err(HeError::WireLength { .. })),
            "{name}"
        );
        assert!(
            matches!(decode(p, &[]), Err(HeError::WireLength { .. })),
            "{name}"
        );
        let bad = decode(p, &poison(&good, first_poly));
        assert_eq!(
            bad,
            Err(HeError::WireCoefficient {
                what: match name {
                    "query" => "query ciphertext",
                    "result" => "result ciphertext",
                    _ => "relinearization key",
                },
                index: 0
            }),
            "{name}"
        );
        let last = good.len() - 8;
        assert!(
            matches!(
                decode(p, &poison(&good, last)),
                Err(HeError::WireCoefficient { .. })
            ),
            "{name}"
        );
    }
}

#[test]
fn compact_poly_serialization() {
    let p = &fixture().params;
    let slots = random_slots(N);
    let compact = CompactPoly::from_slots(p, &slots).unwrap();
    assert_eq!(compact.byte_size(), 8192);
    let back = CompactPoly::from_bytes(p, compact.as_bytes()).unwrap();
    assert_eq!(back, compact);
    assert_eq!(back.to_slots(p).unwrap(), slots);
    let bytes = compact.as_bytes();
    assert!(CompactPoly::from_bytes(p, &bytes[1..]).is_err());
    assert!(CompactPoly::from_bytes(p, &[bytes, &[0]].concat()).is_err());
    // 0xffff = 65535 is not below t = 40961.
    let mut bad = bytes.to_vec();
    bad[2..4].fill(0xff);
    assert_eq!(
        CompactPoly::from_bytes(p, &bad),
        Err(HeError::WireCoefficient {
            what: "compact plaintext",
            index: 1
        })
    );
    let plain = compact.to_plain(p).unwrap();
    assert_eq!(plain.byte_size(), 2 * N * 8);
    // Another t: refused; another q with the same n and t: accepted.
    let t2 = HeParams::plain_modulus_for_bits(N, 17).unwrap();
    let other = HeParams::new(N, t2, &[40, 32, 32]).unwrap();
    assert_eq!(
        compact.to_plain(&other).unwrap_err(),
        HeError::ParamsMismatch
    );
    let same_t = HeParams::new(N, T, &[50, 30, 29]).unwrap();
    assert!(compact.to_plain(&same_t).is_ok());
}

#[test]
fn evaluator_rejects_mismatches() {
    let f = fixture();
    let ct = f.sk.encrypt_slots(&[1, 2, 3]).unwrap();
    let other_params = HeParams::new(N, T, &[40, 32, 32]).unwrap();
    let other_sk = SecretKey::generate(&other_params).unwrap();
    let foreign = other_sk.encrypt_slots(&[1]).unwrap();
    assert_eq!(
        f.eval.mul_relin(&ct, &foreign).unwrap_err(),
        HeError::ParamsMismatch
    );
    assert_eq!(
        f.sk.decrypt_slots(&foreign).unwrap_err(),
        HeError::ParamsMismatch
    );
    let other_rk = RelinKey::generate(&other_sk).unwrap();
    assert!(matches!(
        Evaluator::new(&f.params, &other_rk),
        Err(HeError::ParamsMismatch)
    ));

    let mut low = ct.clone();
    f.eval.to_lowest(&mut low).unwrap();
    assert!(matches!(
        f.eval.mul_relin(&ct, &low),
        Err(HeError::WrongLevel {
            expected: 1,
            found: 2,
            ..
        })
    ));
    let mut three = f.eval.mul_lazy(&ct, &ct).unwrap();
    assert!(matches!(
        f.eval.mul_relin(&three, &ct),
        Err(HeError::WrongParts {
            expected: 2,
            found: 3,
            ..
        })
    ));
    // A 2-part term adds into a 3-part accumulator (lazy relinearization).
    f.eval.add_assign(&mut three, &ct).unwrap();
    assert_eq!(three.parts(), 3);
    let mut two = ct.clone();
    assert!(matches!(
        f.eval.relin(&mut two),
        Err(HeError::WrongParts { .. })
    ));

    let plain = CompactPoly::from_slots(&f.params, &[1])
        .unwrap()
        .to_plain(&f.params)
        .unwrap();
    assert!(matches!(
        f.eval.dot(&[&ct, &ct], &[&plain]),
        Err(HeError::DotLengths { cts: 2, pts: 1 })
    ));
    assert!(matches!(
        f.eval.dot(&[], &[]),
        Err(HeError::DotLengths { .. })
    ));
    assert_eq!(
        f.eval
            .dot(&[&ct, &three], &[&plain, &plain])
            .unwrap()
            .parts(),
        3
    );
    assert!(matches!(
        f.eval.dot(&[&low], &[&plain]),
        Err(HeError::WrongLevel { .. })
    ));
    let foreign_plain = CompactPoly::from_slots(&other_params, &[1])
        .unwrap()
        .to_plain(&other_params)
        .unwrap();
    assert_eq!(
        f.eval.dot(&[&ct], &[&foreign_plain]).unwrap_err(),
        HeError::ParamsMismatch
    );
}

/// Depth-optimal products for every power `1..=max` from `sources`: each
/// missing power `e = a + b` minimises `max(depth a, depth b) + 1`.
pub(crate) fn power_plan(sources: &[usize], max: usize) -> (Vec<(usize, usize, usize)>, usize) {
    let mut depth = vec![usize::MAX; max + 1];
    for &s in sources {
        depth[s] = 0;
    }
    let mut plan = Vec::new();
    for e in 2..=max {
        if depth[e] == 0 {
            continue;
        }
        let (a, d) = (1..=e / 2)
            .map(|a| (a, depth[a].max(depth[e - a])))
            .min_by_key(|&(_, d)| d)
            .expect("e >= 2 has a split");
        depth[e] = d + 1;
        plan.push((e, a, e - a));
    }
    (plan, depth[1..].iter().copied().max().unwrap_or(0))
}

/// APSI's `1M-1024-cmp` evaluation: powers 1..=101 from its 16 sources, a
/// dense random degree-101 polynomial in every slot plus constant term,
/// switched to the lowest level. Must decrypt exactly.
#[test]
fn apsi_1m_1024_cmp_polynomial_decrypts() {
    let f = fixture();
    let sources = [1, 3, 4, 5, 8, 14, 20, 26, 32, 38, 44, 47, 48, 49, 51, 52];
    let degree = 101;
    let (plan, depth) = power_plan(&sources, degree);
    let y = random_slots(N);
    let mut powers: Vec<Option<Ciphertext>> = vec![None; degree + 1];
    for &s in &sources {
        let slots: Vec<u64> = y.iter().map(|&v| pow_mod(v, s as u64)).collect();
        powers[s] = Some(f.sk.encrypt_slots(&slots).unwrap());
    }
    for &(e, a, b) in &plan {
        let (pa, pb) = (powers[a].as_ref().unwrap(), powers[b].as_ref().unwrap());
        powers[e] = Some(f.eval.mul_relin(pa, pb).unwrap());
    }
    let coeffs: Vec<Vec<u64>> = (0..=degree).map(|_| random_slots(N)).collect();
    let plains: Vec<PlainPoly> = coeffs
        .iter()
        .map(|c| {
            CompactPoly::from_slots(&f.params, c)
                .unwrap()
                .to_plain(&f.params)
                .unwrap()
        })
        .collect();
    let mut cts: Vec<&Ciphertext> = vec![f.eval.one()];
    cts.extend(powers[1..].iter().map(|p| p.as_ref().unwrap()));
    let pts: Vec<&PlainPoly> = plains.iter().collect();
    let mut result = f.eval.dot(&cts, &pts).unwrap();
    let budget_query = f.sk.noise_budget_bits(&result).unwrap();
    f.eval.to_lowest(&mut result).unwrap();
    let budget_lowest = f.sk.noise_budget_bits(&result).unwrap();
    println!(
        "1M-1024-cmp: {} products, depth {depth}; noise budget {budget_query} bits at the \
         query level, {budget_lowest} bits at the lowest level",
        plan.len()
    );
    let expected: Vec<u64> = (0..N)
        .map(|i| {
            (0..=degree)
                .rev()
                .fold(0, |acc, j| (mul_mod(acc, y[i]) + coeffs[j][i]) % T)
        })
        .collect();
    assert_eq!(f.sk.decrypt_slots(&result).unwrap(), expected);
    assert!(budget_lowest >= 0);
}

pub(crate) fn pow_mod(base: u64, exp: u64) -> u64 {
    (0..exp).fold(1, |acc, _| mul_mod(acc, base))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random bytes of random or exact length never panic a decoder.
    #[test]
    fn decoders_never_panic(seed in any::<u64>(), pick in 0usize..6, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..16)) {
        let p = &fixture().params;
        let lens = [
            wire::query_ct_size(p),
            wire::result_ct_size(p),
            wire::relin_key_size(p),
            CompactPoly::encoded_size(p),
            (seed % 4096) as usize,
            wire::query_ct_size(p) + 1,
        ];
        let len = lens[pick];
        let mut bytes: Vec<u8> = (0..len).map(|i| (seed.rotate_left(i as u32 % 64) ^ i as u64) as u8).collect();
        for (at, value) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = value;
            }
        }
        let _ = wire::decode_query_ct(p, &bytes);
        let _ = wire::decode_result_ct(p, &bytes);
        let _ = RelinKey::from_bytes(p, &bytes);
        let _ = CompactPoly::from_bytes(p, &bytes);
    }

    /// Valid encodings with random bytes overwritten decode or fail cleanly.
    #[test]
    fn mutated_encodings_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..32), cut in 0usize..3) {
        let f = fixture();
        let ct = f.sk.encrypt_slots(&[1, 2, 3]).unwrap();
        let mut bytes = wire::encode_query_ct(&ct).unwrap();
        for (at, value) in flips {
            let i = at % bytes.len();
            bytes[i] = value;
        }
        bytes.truncate(bytes.len() - cut);
        match wire::decode_query_ct(&f.params, &bytes) {
            Ok(back) => {
                prop_assert_eq!(cut, 0);
                prop_assert!(f.sk.decrypt_slots(&back).is_ok());
            }
            Err(e) => {
                let expected = matches!(e, HeError::WireLength { .. } | HeError::WireCoefficient { .. });
                prop_assert!(expected, "unexpected error {:?}", e);
            }
        }
    }
}
