//! The kernels against curve25519-dalek (the reference) and against each
//! other, lane widths 1 to 8, with invalid inputs mixed in.

use super::field::{self, consts, Lanes, Limbs, PerLane, MASK51};
use super::portable::Portable;
use super::*;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use rand::{Rng, RngCore, SeedableRng};

fn rng() -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(0x5eed_2025)
}

fn one_lane(x: &Limbs) -> Portable<1> {
    Portable::<1>::from_lanes(&core::array::from_fn(|_| *x))
}

fn canonical(x: Portable<1>) -> [u8; 32] {
    field::to_bytes(&x.0[0])
}

fn small(n: u64) -> Portable<1> {
    one_lane(&[n, 0, 0, 0, 0])
}

#[test]
fn constants_hold() {
    let d = one_lane(&consts::D);
    let zero = [0u8; 32];
    // d·121666 + 121665 = 0.
    assert_eq!(canonical(d.mul(small(121666)).add(small(121665))), zero);
    assert_eq!(canonical(d.add(d)), canonical(one_lane(&consts::D2)));
    let i = one_lane(&consts::SQRT_M1);
    assert_eq!(canonical(i.square().add(small(1))), zero);
    let one = small(1);
    // (sqrt(ad - 1))² = -d - 1.
    let ad1 = one_lane(&consts::SQRT_AD_MINUS_ONE);
    assert_eq!(canonical(ad1.square()), canonical(d.neg().sub(one)));
    // (1/sqrt(a - d))²·(-1 - d) = 1.
    let inv = one_lane(&consts::INVSQRT_A_MINUS_D);
    assert_eq!(
        canonical(inv.square().mul(one.neg().sub(d))),
        canonical(one)
    );
    assert_eq!(
        canonical(one_lane(&consts::ONE_MINUS_D_SQ)),
        canonical(one.sub(d.square()))
    );
    assert_eq!(
        canonical(one_lane(&consts::D_MINUS_ONE_SQ)),
        canonical(d.sub(one).square())
    );
}

/// Tight limbs, often at the extremes of the bound the kernels assume.
fn tight(rng: &mut impl Rng) -> Limbs {
    core::array::from_fn(|_| match rng.gen_range(0..4) {
        0 => (1 << 51) + (1 << 13) - 1 - rng.gen_range(0..4),
        1 => rng.gen_range(0..4),
        2 => MASK51 - rng.gen_range(0..4),
        _ => rng.gen_range(0..(1 << 51) + (1 << 13)),
    })
}

/// `ops` applied to random tight inputs agree, lane by lane, between
/// `F` and the portable reference.
fn field_ops_agree<F: Lanes>(run: impl Fn(&dyn Fn())) {
    let mut rng = rng();
    for _ in 0..2000 {
        let a: PerLane<Limbs> = core::array::from_fn(|_| tight(&mut rng));
        let b: PerLane<Limbs> = core::array::from_fn(|_| tight(&mut rng));
        let bits: PerLane<u64> = core::array::from_fn(|_| rng.gen_range(0..2));
        let check = || {
            let (x, y) = (F::from_lanes(&a), F::from_lanes(&b));
            let (px, py) = (Portable::<8>::from_lanes(&a), Portable::<8>::from_lanes(&b));
            let pairs = [
                (x.add(y).to_lanes(), px.add(py).to_lanes(), "add"),
                (x.sub(y).to_lanes(), px.sub(py).to_lanes(), "sub"),
                (x.neg().to_lanes(), px.neg().to_lanes(), "neg"),
                (x.mul(y).to_lanes(), px.mul(py).to_lanes(), "mul"),
                (x.square().to_lanes(), px.square().to_lanes(), "square"),
                (
                    F::select(F::mask(&bits), x, y).to_lanes(),
                    Portable::<8>::select(Portable::<8>::mask(&bits), px, py).to_lanes(),
                    "select",
                ),
            ];
            for (got, want, op) in pairs {
                for lane in 0..F::N {
                    assert!(
                        got[lane].iter().all(|l| *l < (1 << 51) + (1 << 13)),
                        "{op} result not tight"
                    );
                    assert_eq!(
                        field::to_bytes(&got[lane]),
                        field::to_bytes(&want[lane]),
                        "{op} lane {lane}"
                    );
                }
            }
        };
        run(&check);
    }
}

#[test]
fn portable_field_matches_big_integers() {
    // p - 1 squared is 1; (p - 1) + 1 is 0; 2^255 - 1 reads as 18.
    let p_minus_1 = one_lane(&[MASK51 - 19, MASK51, MASK51, MASK51, MASK51]);
    assert_eq!(canonical(p_minus_1.square()), canonical(small(1)));
    assert_eq!(canonical(p_minus_1.add(small(1))), [0; 32]);
    let all_ones = field::from_bytes(&[0xff; 32]);
    assert_eq!(canonical(one_lane(&all_ones)), canonical(small(18)));
}

fn random_points(rng: &mut impl RngCore, n: usize) -> Vec<[u8; 32]> {
    (0..n)
        .map(|_| {
            let mut wide = [0u8; 64];
            rng.fill_bytes(&mut wide);
            RistrettoPoint::from_uniform_bytes(&wide)
                .compress()
                .to_bytes()
        })
        .collect()
}

fn random_scalar(rng: &mut impl RngCore) -> [u8; 32] {
    let mut wide = [0u8; 64];
    rng.fill_bytes(&mut wide);
    Scalar::from_bytes_mod_order_wide(&wide).to_bytes()
}

/// Encodings dalek rejects or that decode to the identity, among valid
/// ones.
fn tricky_encodings(rng: &mut impl RngCore) -> Vec<[u8; 32]> {
    let mut out = random_points(rng, 4);
    out.push([0; 32]); // the identity
    let mut negative = out[0];
    negative[0] |= 1; // odd s: negative
    out.push(negative);
    out.push([0xff; 32]); // not canonical
    let mut high = out[1];
    high[31] |= 0x80; // bit 255 set
    out.push(high);
    // p itself (non-canonical zero) and random bytes (mostly invalid).
    let mut p = [0xffu8; 32];
    p[0] = 0xed;
    p[31] = 0x7f;
    out.push(p);
    for _ in 0..8 {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        b[0] &= 0xfe;
        b[31] &= 0x7f;
        out.push(b);
    }
    out
}

fn dalek_outcome(encoding: &[u8; 32], scalar: &[u8; 32]) -> Outcome {
    let Some(point) = CompressedRistretto(*encoding).decompress() else {
        return Outcome::Invalid;
    };
    if point == RistrettoPoint::default() {
        return Outcome::Identity;
    }
    Outcome::Product((point * doubled(scalar)).compress().to_bytes())
}

/// What the kernel multiplies by: twice the scalar it is given.
fn doubled(scalar: &[u8; 32]) -> Scalar {
    let s = Scalar::from_canonical_bytes(*scalar).expect("canonical");
    s + s
}

/// The scalar the kernel doubles into 1 (validation's expected outcome is
/// the input's own encoding).
fn half_of_one() -> [u8; 32] {
    Scalar::from(2u8).invert().to_bytes()
}

fn dalek_uniform(bytes: &[u8; 64], scalar: &[u8; 32]) -> Outcome {
    let point = RistrettoPoint::from_uniform_bytes(bytes);
    if point == RistrettoPoint::default() {
        return Outcome::Identity;
    }
    Outcome::Product((point * doubled(scalar)).compress().to_bytes())
}

/// The whole pipeline through `runner` for both sources and both kinds
/// of scalars, against dalek, for batch sizes around the lane count.
fn pipeline_matches_dalek(runner: impl Fn(Source, Scalars, &mut [Outcome])) {
    let mut rng = rng();
    let mut encodings = tricky_encodings(&mut rng);
    encodings.extend(random_points(&mut rng, 20));
    let uniform: Vec<[u8; 64]> = (0..encodings.len())
        .map(|_| {
            let mut b = [0u8; 64];
            rng.fill_bytes(&mut b);
            b
        })
        .collect();
    let key = random_scalar(&mut rng);
    let mut blinds: Vec<[u8; 32]> = (0..encodings.len())
        .map(|_| random_scalar(&mut rng))
        .collect();
    blinds[0] = Scalar::ONE.to_bytes();
    blinds[1] = (-Scalar::ONE).to_bytes();
    // A zero scalar: the product is the identity, encoded as zeros, and
    // its zero must not spoil the batch's shared inversion.
    blinds[4] = Scalar::ZERO.to_bytes();
    for n in [1, 3, 7, 8, 9, 16, 17, encodings.len()] {
        let mut out = vec![Outcome::Invalid; n];
        runner(
            Source::Encoded(&encodings[..n]),
            Scalars::One(&key),
            &mut out,
        );
        let want: Vec<_> = encodings[..n]
            .iter()
            .map(|e| dalek_outcome(e, &key))
            .collect();
        assert_eq!(out, want, "decode, shared scalar, n = {n}");

        runner(
            Source::Encoded(&encodings[..n]),
            Scalars::Each(&blinds[..n]),
            &mut out,
        );
        let want: Vec<_> = encodings[..n]
            .iter()
            .zip(&blinds)
            .map(|(e, s)| dalek_outcome(e, s))
            .collect();
        assert_eq!(out, want, "decode, a scalar each, n = {n}");

        runner(
            Source::Uniform(&uniform[..n]),
            Scalars::Each(&blinds[..n]),
            &mut out,
        );
        let want: Vec<_> = uniform[..n]
            .iter()
            .zip(&blinds)
            .map(|(u, s)| dalek_uniform(u, s))
            .collect();
        assert_eq!(out, want, "map, a scalar each, n = {n}");
    }
    // Points decoded by a validation multiply as their encodings do.
    let mut outcomes = vec![Outcome::Invalid; encodings.len()];
    let mut points = vec![[[0; 5]; 4]; encodings.len()];
    validate::<Portable<1>>(&encodings, &mut outcomes, &mut points);
    let (valid, decoded): (Vec<[u8; 32]>, Vec<Coordinates>) = encodings
        .iter()
        .zip(&outcomes)
        .zip(&points)
        .filter(|((_, o), _)| matches!(o, Outcome::Product(_)))
        .map(|((e, _), p)| (*e, *p))
        .unzip();
    assert!(valid.len() > 16, "enough valid points to fill groups");
    for n in [1, 7, 9, valid.len()] {
        let mut out = vec![Outcome::Invalid; n];
        runner(
            Source::Decoded(&decoded[..n]),
            Scalars::Each(&blinds[..n]),
            &mut out,
        );
        let want: Vec<_> = valid[..n]
            .iter()
            .zip(&blinds)
            .map(|(e, s)| dalek_outcome(e, s))
            .collect();
        assert_eq!(out, want, "decoded, a scalar each, n = {n}");
    }
}

#[test]
fn generic_curve_code_matches_dalek_on_portable_lanes() {
    pipeline_matches_dalek(run::<Portable<1>>);
    pipeline_matches_dalek(run::<Portable<3>>);
    pipeline_matches_dalek(run::<Portable<8>>);
}

#[test]
fn detected_kernel_matches_dalek() {
    let Some(kernel) = Kernel::detect() else {
        eprintln!("no multi-buffer kernel on this CPU: nothing to compare");
        return;
    };
    pipeline_matches_dalek(|s, k, o| mul_batch(kernel, s, k, o));
    let encodings = tricky_encodings(&mut rng());
    let mut out = vec![Outcome::Invalid; encodings.len()];
    let mut points = vec![[[0; 5]; 4]; encodings.len()];
    validate_batch(kernel, &encodings, &mut out, &mut points);
    let one = half_of_one();
    let want: Vec<_> = encodings.iter().map(|e| dalek_outcome(e, &one)).collect();
    assert_eq!(out, want, "validation");
}

#[test]
fn validation_matches_dalek_on_portable_lanes() {
    let encodings = tricky_encodings(&mut rng());
    let mut out = vec![Outcome::Invalid; encodings.len()];
    let mut points = vec![[[0; 5]; 4]; encodings.len()];
    validate::<Portable<3>>(&encodings, &mut out, &mut points);
    let one = half_of_one();
    let want: Vec<_> = encodings.iter().map(|e| dalek_outcome(e, &one)).collect();
    assert_eq!(out, want);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn ifma_field_matches_portable() {
    if Kernel::detect() != Some(Kernel::Ifma8) {
        eprintln!("no AVX-512 IFMA on this CPU: skipped");
        return;
    }
    // The closure's intrinsics run as calls outside a target-feature
    // function: slow, but the same instructions on this IFMA CPU.
    field_ops_agree::<ifma::Ifma>(|check| check());
}

#[test]
fn uniform_edge_inputs_match_dalek() {
    // All-zero, all-one and high-bit-only halves hit Elligator's special
    // cases (t = 0, non-canonical t).
    let mut inputs = vec![[0u8; 64], [0xff; 64]];
    let mut high = [0u8; 64];
    high[31] = 0x80;
    high[63] = 0x80;
    inputs.push(high);
    let key = Scalar::from(7u8).to_bytes();
    let mut out = vec![Outcome::Invalid; inputs.len()];
    run::<Portable<2>>(Source::Uniform(&inputs), Scalars::One(&key), &mut out);
    let want: Vec<_> = inputs.iter().map(|u| dalek_uniform(u, &key)).collect();
    assert_eq!(out, want);
}
