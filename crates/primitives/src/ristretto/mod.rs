//! Multi-buffer ristretto255: many independent points at once, one per
//! SIMD lane, for the OPRF's batches.
//!
//! The OPRF spends its time on one pattern: take a point (decoded from
//! the wire, or hashed from an input by Elligator), multiply it by a
//! scalar (the server's key, or a client's blind), encode the result.
//! curve25519-dalek runs that one point at a time (its vector backend
//! spreads a single point's coordinates over the lanes), which leaves
//! most of a wide vector unit idle. [`mul_batch`] instead puts eight
//! points side by side (AVX-512 IFMA), with the same formulas and
//! constant-time table look-ups, and gives byte-for-byte dalek's
//! encodings; dalek stays the portable reference the tests compare
//! against, and the path taken when [`crate::cpu::features`] offers no
//! kernel (or under `PSIKIT_PORTABLE=1`).
//!
//! Constant time: lanes never branch on their values (see `curve`); the
//! only data-dependent outcome is [`Outcome`], whether an input was a
//! valid point, which the protocols treat as public.

// Off x86-64 no kernel is detected: the lanes run in the tests only
// (the portable model against curve25519-dalek).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

mod curve;
mod field;
#[cfg(target_arch = "x86_64")]
mod ifma;
#[cfg(test)]
mod portable;
#[cfg(test)]
mod tests;

use curve::{encode_doubled, Digits, Point};
use field::{Lanes, PerLane, MAX_LANES};

/// A decoded point's extended coordinates `(X, Y, Z, T)` in radix 2^51,
/// each limb tight: what [`validate_batch`] keeps of a valid encoding so
/// that multiplying the point later need not decode it again (an inverse
/// square root, about a tenth of a multiplication's cost).
pub(crate) type Coordinates = [field::Limbs; 4];

/// The identity's coordinates, for the unused lanes of a group.
const IDENTITY: Coordinates = [[0; 5], [1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0; 5]];

/// Where each lane's point comes from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// RFC 9496 encodings, decoded (and validated) first.
    Encoded(&'a [[u8; 32]]),
    /// Points [`validate_batch`] decoded.
    Decoded(&'a [Coordinates]),
    /// 64 uniform bytes each, mapped with `FROM_UNIFORM_BYTES`.
    Uniform(&'a [[u8; 64]]),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::Encoded(e) => e.len(),
            Source::Decoded(d) => d.len(),
            Source::Uniform(u) => u.len(),
        }
    }
}

/// The scalars, as canonical little-endian encodings: *half* of what the
/// caller multiplies by, since the kernel encodes the doubled product (one
/// shared inversion instead of an inverse square root per point); the
/// dalek path of `crate::oprf` takes halves too.
#[derive(Clone, Copy)]
pub(crate) enum Scalars<'a> {
    /// One scalar for every point (the server's key).
    One(&'a [u8; 32]),
    /// One scalar per point (the client's blinds), parallel to the source.
    Each(&'a [[u8; 32]]),
}

/// What became of one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The encoding of `2·scalar·point`.
    Product([u8; 32]),
    /// The input was not a canonical encoding of a point.
    Invalid,
    /// The input point was the identity.
    Identity,
}

/// The kernels [`crate::cpu::features`] allows on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Eight lanes of AVX-512 IFMA.
    #[cfg(target_arch = "x86_64")]
    Ifma8,
}

impl Kernel {
    /// A name for reports.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma8 => "psikit multi-buffer, 8 lanes of AVX-512 IFMA",
        }
    }

    /// The fastest kernel this CPU has, if any.
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            let f = crate::cpu::features();
            if f.avx512f && f.avx512ifma {
                return Some(Kernel::Ifma8);
            }
        }
        None
    }
}

/// `2·scalar·point` for every point of `source`, written to `out` (same
/// length). `Scalars::Each` must be as long as the source.
#[allow(unsafe_code)]
pub(crate) fn mul_batch(kernel: Kernel, source: Source, scalars: Scalars, out: &mut [Outcome]) {
    assert_eq!(source.len(), out.len(), "one outcome per input");
    if let Scalars::Each(s) = scalars {
        assert_eq!(s.len(), out.len(), "one scalar per input");
    }
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Kernel::Ifma8` is only made when the CPU has both
        // features.
        Kernel::Ifma8 => unsafe { mul_batch_ifma(source, scalars, out) },
    }
}

/// Decodes each encoding only: `Outcome::Product` holds the encoding
/// itself when it is a valid, non-identity element, and `points` its
/// coordinates (for [`Source::Decoded`]; other lanes' are meaningless).
#[allow(unsafe_code)]
pub(crate) fn validate_batch(
    kernel: Kernel,
    encodings: &[[u8; 32]],
    out: &mut [Outcome],
    points: &mut [Coordinates],
) {
    assert_eq!(encodings.len(), out.len(), "one outcome per input");
    assert_eq!(encodings.len(), points.len(), "one point per input");
    match kernel {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `mul_batch`.
        Kernel::Ifma8 => unsafe { validate_batch_ifma(encodings, out, points) },
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(unsafe_code)]
unsafe fn mul_batch_ifma(source: Source, scalars: Scalars, out: &mut [Outcome]) {
    run::<ifma::Ifma>(source, scalars, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(unsafe_code)]
unsafe fn validate_batch_ifma(
    encodings: &[[u8; 32]],
    out: &mut [Outcome],
    points: &mut [Coordinates],
) {
    validate::<ifma::Ifma>(encodings, out, points);
}

/// A valid encoding (the base point's) for the unused lanes of the last
/// group; their results are dropped.
const PAD_ENCODED: [u8; 32] = [
    0xe2, 0xf2, 0xae, 0x0a, 0x6a, 0xbc, 0x4e, 0x71, 0xa8, 0x84, 0xa9, 0x61, 0xc5, 0x00, 0x51, 0x5f,
    0x58, 0xe3, 0x0b, 0x6a, 0xa5, 0x82, 0xdd, 0x8d, 0xb6, 0xa6, 0x59, 0x45, 0xe0, 0x8d, 0x2d, 0x76,
];

/// The generic driver: groups of [`Lanes::N`] inputs through decode or
/// map, multiplication and encoding.
/// The encodings' lanes for one group, padded with a valid encoding.
#[inline(always)]
fn group_encodings<F: Lanes>(encodings: &[[u8; 32]], first: usize) -> PerLane<[u8; 32]> {
    core::array::from_fn(|lane| encodings.get(first + lane).copied().unwrap_or(PAD_ENCODED))
}

/// The outcome of a lane from its validity, identity and product.
fn outcome(valid: u64, identity: u64, product: [u8; 32]) -> Outcome {
    if valid == 0 {
        Outcome::Invalid
    } else if identity == 1 {
        Outcome::Identity
    } else {
        Outcome::Product(product)
    }
}

/// The generic validation: decoding and the identity check.
#[inline(always)]
fn validate<F: Lanes>(encodings: &[[u8; 32]], out: &mut [Outcome], points: &mut [Coordinates]) {
    for (group, (outcomes, points)) in out
        .chunks_mut(F::N)
        .zip(points.chunks_mut(F::N))
        .enumerate()
    {
        let lanes = group_encodings::<F>(encodings, group * F::N);
        let (point, valid) = Point::<F>::decode(&lanes);
        let identity = point.is_identity();
        let coordinates = point.coordinates();
        for (lane, (o, p)) in outcomes.iter_mut().zip(points.iter_mut()).enumerate() {
            *o = outcome(valid[lane], identity[lane], lanes[lane]);
            *p = coordinates[lane];
        }
    }
}

/// The digits of the scalars: once for a shared scalar, per group for
/// one scalar per input.
enum Plan<'a, F: Lanes> {
    Shared(Digits<F>),
    Each(&'a [[u8; 32]]),
}

/// The generic driver: groups of [`Lanes::N`] inputs through decode or
/// map and multiplication, then one batched encoding of the doubles
/// (`curve::encode_doubled`: one inversion per lane for the whole call
/// instead of an inverse square root per point).
#[inline(always)]
fn run<F: Lanes>(source: Source, scalars: Scalars, out: &mut [Outcome]) {
    let plan = match scalars {
        Scalars::One(s) => Plan::Shared(Digits::<F>::new(&[*s; MAX_LANES])),
        Scalars::Each(s) => Plan::Each(s),
    };
    let groups = out.len().div_ceil(F::N);
    let (mut doublings, mut flags) = (Vec::with_capacity(groups), Vec::with_capacity(groups));
    for group in 0..groups {
        let first = group * F::N;
        let lane_of =
            |lane: usize| (lane < F::N && first + lane < out.len()).then_some(first + lane);
        let (point, valid) = match source {
            Source::Encoded(e) => Point::<F>::decode(&group_encodings::<F>(e, first)),
            Source::Decoded(d) => {
                let lanes = core::array::from_fn(|lane| lane_of(lane).map_or(IDENTITY, |i| d[i]));
                (Point::<F>::from_coordinates(&lanes), [1; MAX_LANES])
            }
            Source::Uniform(u) => {
                let bytes = core::array::from_fn(|lane| lane_of(lane).map_or([0; 64], |i| u[i]));
                (Point::<F>::from_uniform(&bytes), [1; MAX_LANES])
            }
        };
        let product = match &plan {
            Plan::Shared(digits) => point.mul(digits),
            Plan::Each(s) => point.mul(&Digits::new(&core::array::from_fn(|lane| {
                lane_of(lane).map_or([0; 32], |i| s[i])
            }))),
        };
        flags.push((valid, point.is_identity()));
        doublings.push(product.doubling());
    }
    let mut encodings = vec![[[0u8; 32]; MAX_LANES]; groups];
    encode_doubled(&doublings, &mut encodings);
    for (outcomes, ((valid, identity), encodings)) in
        out.chunks_mut(F::N).zip(flags.iter().zip(&encodings))
    {
        for (lane, o) in outcomes.iter_mut().enumerate() {
            *o = outcome(valid[lane], identity[lane], encodings[lane]);
        }
    }
}
