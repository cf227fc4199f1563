//! ristretto255 on [`Lanes`]: the curve code written once for every lane
//! width. It follows RFC 9496 (decoding §4.3.1, the Elligator map
//! §4.3.4), encodes doubled points in batches as curve25519-dalek's
//! `double_and_compress_batch` does (RFC 9496 §4.3.2's encoding of `2·P`
//! with one shared inversion), and uses the extended twisted Edwards
//! formulas of Hisil–Wong–Carter–Dawson that dalek also uses, so each
//! lane's result is bit for bit dalek's.
//!
//! Nothing here branches on a lane's value: per-lane conditions become
//! masks and both sides are computed. Everything is `inline(always)` so
//! that a kernel's `#[target_feature]` entry point compiles the whole
//! computation with its instructions.

use super::field::{self, consts, Lanes, Limbs, PerLane};
use super::Coordinates;

/// A point in extended coordinates: `x = X/Z`, `y = Y/Z`, `XY = ZT`.
#[derive(Clone, Copy)]
pub(crate) struct Point<F> {
    x: F,
    y: F,
    z: F,
    t: F,
}

/// A point ready to be added: `(Y + X, Y - X, Z, 2d·T)`.
#[derive(Clone, Copy)]
struct Cached<F> {
    y_plus_x: F,
    y_minus_x: F,
    z: F,
    t2d: F,
}

/// A point's doubling before its inversion ([`Point::doubling`]).
#[derive(Clone, Copy)]
pub(crate) struct Doubling<F> {
    e: F,
    f: F,
    g: F,
    h: F,
    eg: F,
    fh: F,
}

/// RFC 9496 `ENCODE` of `2·P` for each doubling of `batch`, with one
/// field inversion per lane for the whole batch (Montgomery's trick over
/// the batch's values, each lane its own chain) instead of one inverse
/// square root per point: the encoding needs only `1/(eg·fh)`, because
/// the doubled point's coordinates are squares of known values. The
/// formulas are curve25519-dalek's `double_and_compress_batch`.
///
/// A lane whose `eg·fh` is zero (`2·P` is the identity: `e = 0`) takes 1
/// in the chain so the other lanes' inverses stay right, and encodes as
/// the identity (zero bytes).
#[inline(always)]
pub(crate) fn encode_doubled<F: Lanes>(batch: &[Doubling<F>], out: &mut [PerLane<[u8; 32]>]) {
    let one = F::splat(&consts::ONE);
    // Each lane's `eg·fh`, 1 where it is zero, and where it was.
    let mut values = Vec::with_capacity(batch.len());
    for d in batch {
        let v = d.eg.mul(d.fh);
        let zero = mask_of(v, field::is_zero);
        values.push((F::select(zero, one, v), zero));
    }
    // prefix[i]: the product of the first i values.
    let mut prefix = Vec::with_capacity(batch.len() + 1);
    prefix.push(one);
    for (v, _) in &values {
        let last = prefix[prefix.len() - 1];
        prefix.push(last.mul(*v));
    }
    // `inv` is the inverse of prefix[i + 1] at step i.
    let mut inv = invert(prefix[batch.len()]);
    for i in (0..batch.len()).rev() {
        let (v, zero) = values[i];
        out[i] = finish_doubled(&batch[i], inv.mul(prefix[i]), zero);
        inv = inv.mul(v);
    }
}

/// The encoding of `2·P` from its doubling and `1/(eg·fh)`.
#[inline(always)]
fn finish_doubled<F: Lanes>(d: &Doubling<F>, inv: F, zero: F::Mask) -> PerLane<[u8; 32]> {
    let z_inv = d.eg.mul(inv);
    let t_inv = d.fh.mul(inv);
    let sqrt_m1 = F::splat(&consts::SQRT_M1);
    let rotate = mask_of(d.eg.mul(z_inv), field::is_negative);
    let e = F::select(rotate, d.g, d.e);
    let g = F::select(rotate, d.e.neg(), d.g);
    let h = F::select(rotate, d.f.mul(sqrt_m1), d.h);
    let magic = F::select(rotate, sqrt_m1, F::splat(&consts::INVSQRT_A_MINUS_D));
    let g = F::select(mask_of(h.mul(e).mul(z_inv), field::is_negative), g.neg(), g);
    let s = abs(h.sub(g).mul(magic.mul(g.mul(t_inv))));
    let s = F::select(zero, F::splat(&[0; 5]), s).to_lanes();
    core::array::from_fn(|i| field::to_bytes(&s[i]))
}

/// `1/x` (0 for 0): `x^(p-2) = (x^((p-5)/8))^8 · x^3`.
#[inline(always)]
fn invert<F: Lanes>(x: F) -> F {
    pow2k(pow_p58(x), 3).mul(x.square().mul(x))
}

/// A point without `T`, as a doubling needs it.
#[derive(Clone, Copy)]
struct Projective<F> {
    x: F,
    y: F,
    z: F,
}

/// A sum or double before its last four products: `x = X/Z`, `y = Y/T`.
struct Completed<F> {
    x: F,
    y: F,
    z: F,
    t: F,
}

/// Applies `f` to each lane's element of `x`.
#[inline(always)]
fn lane_bits<F: Lanes>(x: F, f: impl Fn(&Limbs) -> u64) -> PerLane<u64> {
    let lanes = x.to_lanes();
    core::array::from_fn(|i| f(&lanes[i]))
}

#[inline(always)]
fn mask_of<F: Lanes>(x: F, f: impl Fn(&Limbs) -> u64) -> F::Mask {
    F::mask(&lane_bits(x, f))
}

/// RFC 9496 `CT_ABS`: `-x` where `x` is negative.
#[inline(always)]
fn abs<F: Lanes>(x: F) -> F {
    F::select(mask_of(x, field::is_negative), x.neg(), x)
}

/// `x^(2^k)`.
#[inline(always)]
fn pow2k<F: Lanes>(mut x: F, k: u32) -> F {
    for _ in 0..k {
        x = x.square();
    }
    x
}

/// `x^((p - 5)/8) = x^(2^252 - 3)`, by the usual addition chain.
#[inline(always)]
fn pow_p58<F: Lanes>(x: F) -> F {
    let t0 = x.square(); // 2
    let t2 = x.mul(pow2k(t0, 2)); // 9
    let t3 = t0.mul(t2); // 11
    let t5 = t2.mul(t3.square()); // 2^5 - 1
    let t7 = pow2k(t5, 5).mul(t5); // 2^10 - 1
    let t9 = pow2k(t7, 10).mul(t7); // 2^20 - 1
    let t11 = pow2k(t9, 20).mul(t9); // 2^40 - 1
    let t13 = pow2k(t11, 10).mul(t7); // 2^50 - 1
    let t15 = pow2k(t13, 50).mul(t13); // 2^100 - 1
    let t17 = pow2k(t15, 100).mul(t15); // 2^200 - 1
    let t19 = pow2k(t17, 50).mul(t13); // 2^250 - 1
    pow2k(t19, 2).mul(x)
}

/// RFC 9496 `SQRT_RATIO_M1(u, v)`: per lane whether `u/v` is a square
/// (bit 1) and the non-negative root of `u/v` or of `i·u/v`.
#[inline(always)]
fn sqrt_ratio_m1<F: Lanes>(u: F, v: F) -> (PerLane<u64>, F) {
    let sqrt_m1 = F::splat(&consts::SQRT_M1);
    let v3 = v.square().mul(v);
    let v7 = v3.square().mul(v);
    let r = u.mul(v3).mul(pow_p58(u.mul(v7)));
    let check = v.mul(r.square()).to_lanes();
    let (u_l, minus_u, minus_u_i) = (
        u.to_lanes(),
        u.neg().to_lanes(),
        u.neg().mul(sqrt_m1).to_lanes(),
    );
    let correct: PerLane<u64> = core::array::from_fn(|i| field::equal(&check[i], &u_l[i]));
    let flipped: PerLane<u64> = core::array::from_fn(|i| field::equal(&check[i], &minus_u[i]));
    let flipped_i: PerLane<u64> = core::array::from_fn(|i| field::equal(&check[i], &minus_u_i[i]));
    let rotate: PerLane<u64> = core::array::from_fn(|i| flipped[i] | flipped_i[i]);
    let r = F::select(F::mask(&rotate), sqrt_m1.mul(r), r);
    let was_square = core::array::from_fn(|i| correct[i] | flipped[i]);
    (was_square, abs(r))
}

impl<F: Lanes> Point<F> {
    #[inline(always)]
    pub(crate) fn identity() -> Self {
        let (zero, one) = (F::splat(&[0; 5]), F::splat(&consts::ONE));
        Self {
            x: zero,
            y: one,
            z: one,
            t: zero,
        }
    }

    /// Each lane's extended coordinates `(X, Y, Z, T)`, tight.
    #[inline(always)]
    pub(crate) fn coordinates(&self) -> PerLane<Coordinates> {
        let (x, y, z, t) = (
            self.x.to_lanes(),
            self.y.to_lanes(),
            self.z.to_lanes(),
            self.t.to_lanes(),
        );
        core::array::from_fn(|i| [x[i], y[i], z[i], t[i]])
    }

    /// The point whose lanes hold `lanes` (from [`Self::coordinates`]).
    #[inline(always)]
    pub(crate) fn from_coordinates(lanes: &PerLane<Coordinates>) -> Self {
        let part = |k: usize| F::from_lanes(&core::array::from_fn(|i| lanes[i][k]));
        Self {
            x: part(0),
            y: part(1),
            z: part(2),
            t: part(3),
        }
    }

    /// RFC 9496 `DECODE` of one encoding per lane, with 1 in the lanes
    /// whose bytes are a valid encoding. Invalid lanes hold some point the
    /// caller must discard.
    #[inline(always)]
    pub(crate) fn decode(bytes: &PerLane<[u8; 32]>) -> (Self, PerLane<u64>) {
        let s_lanes: PerLane<Limbs> = core::array::from_fn(|i| field::from_bytes(&bytes[i]));
        // Canonical (re-encodes to the same bytes) and non-negative.
        let s_ok: PerLane<u64> = core::array::from_fn(|i| {
            let canonical = ct_bytes_eq(&field::to_bytes(&s_lanes[i]), &bytes[i]);
            canonical & (1 ^ field::is_negative(&s_lanes[i]))
        });
        let one = F::splat(&consts::ONE);
        let s = F::from_lanes(&s_lanes);
        let ss = s.square();
        let u1 = one.sub(ss);
        let u2 = one.add(ss);
        let u2_sqr = u2.square();
        let v = F::splat(&consts::D).mul(u1.square()).neg().sub(u2_sqr);
        let (was_square, invsqrt) = sqrt_ratio_m1(one, v.mul(u2_sqr));
        let den_x = invsqrt.mul(u2);
        let den_y = invsqrt.mul(den_x).mul(v);
        let x = abs(s.add(s).mul(den_x));
        let y = u1.mul(den_y);
        let t = x.mul(y);
        let (t_neg, y_zero) = (
            lane_bits(t, field::is_negative),
            lane_bits(y, field::is_zero),
        );
        let valid =
            core::array::from_fn(|i| s_ok[i] & was_square[i] & (1 ^ t_neg[i]) & (1 ^ y_zero[i]));
        (Self { x, y, z: one, t }, valid)
    }

    /// What encoding `2·self` needs before its one inversion (the
    /// doubling's `e = 2XY`, `f = Z² + dT²`, `g = Y² + X²`,
    /// `h = Z² - dT²`): [`encode_doubled`] finishes it.
    #[inline(always)]
    pub(crate) fn doubling(&self) -> Doubling<F> {
        let (xx, yy, zz) = (self.x.square(), self.y.square(), self.z.square());
        let dtt = self.t.square().mul(F::splat(&consts::D));
        let e = self.x.mul(self.y.add(self.y));
        let (f, g, h) = (zz.add(dtt), yy.add(xx), zz.sub(dtt));
        Doubling {
            e,
            f,
            g,
            h,
            eg: e.mul(g),
            fh: f.mul(h),
        }
    }

    /// RFC 9496 `element_derivation` (`FROM_UNIFORM_BYTES`): two
    /// Elligator maps, added.
    #[inline(always)]
    pub(crate) fn from_uniform(bytes: &PerLane<[u8; 64]>) -> Self {
        let p1 = Self::elligator(Self::uniform_half(bytes, 0));
        let p2 = Self::elligator(Self::uniform_half(bytes, 32));
        p1.add(&p2.cached()).extended()
    }

    /// The field elements read from bytes `from..from + 32` of each lane.
    #[inline(always)]
    fn uniform_half(bytes: &PerLane<[u8; 64]>, from: usize) -> F {
        F::from_lanes(&core::array::from_fn(|i| {
            let mut b = [0u8; 32];
            b.copy_from_slice(&bytes[i][from..from + 32]);
            field::from_bytes(&b)
        }))
    }

    /// RFC 9496 `MAP`, the ristretto255 Elligator map.
    #[inline(always)]
    fn elligator(t: F) -> Self {
        let one = F::splat(&consts::ONE);
        let d = F::splat(&consts::D);
        let r = F::splat(&consts::SQRT_M1).mul(t.square());
        let u = r.add(one).mul(F::splat(&consts::ONE_MINUS_D_SQ));
        let v = one.neg().sub(r.mul(d)).mul(r.add(d));
        let (was_square, s) = sqrt_ratio_m1(u, v);
        let square = F::mask(&was_square);
        let s_prime = abs(s.mul(t)).neg();
        let s = F::select(square, s, s_prime);
        let c = F::select(square, one.neg(), r);
        let n = c
            .mul(r.sub(one))
            .mul(F::splat(&consts::D_MINUS_ONE_SQ))
            .sub(v);
        let s2 = s.square();
        let w0 = s.add(s).mul(v);
        let w1 = n.mul(F::splat(&consts::SQRT_AD_MINUS_ONE));
        let w2 = one.sub(s2);
        let w3 = one.add(s2);
        Self {
            x: w0.mul(w3),
            y: w2.mul(w1),
            z: w1.mul(w3),
            t: w0.mul(w2),
        }
    }

    /// 1 in the lanes holding the identity (ristretto equality with
    /// `(0, 1)`: `X = 0` or `Y = 0`).
    #[inline(always)]
    pub(crate) fn is_identity(&self) -> PerLane<u64> {
        let (x, y) = (
            lane_bits(self.x, field::is_zero),
            lane_bits(self.y, field::is_zero),
        );
        core::array::from_fn(|i| x[i] | y[i])
    }

    #[inline(always)]
    fn cached(&self) -> Cached<F> {
        Cached {
            y_plus_x: self.y.add(self.x),
            y_minus_x: self.y.sub(self.x),
            z: self.z,
            t2d: self.t.mul(F::splat(&consts::D2)),
        }
    }

    #[inline(always)]
    fn add(&self, other: &Cached<F>) -> Completed<F> {
        let pp = self.y.add(self.x).mul(other.y_plus_x);
        let mm = self.y.sub(self.x).mul(other.y_minus_x);
        let tt2d = self.t.mul(other.t2d);
        let zz = self.z.mul(other.z);
        let zz2 = zz.add(zz);
        Completed {
            x: pp.sub(mm),
            y: pp.add(mm),
            z: zz2.add(tt2d),
            t: zz2.sub(tt2d),
        }
    }

    /// `scalar·self` in each lane, for the scalars behind `digits`: the
    /// signed radix-16 window method, one table look-up per window, in
    /// constant time.
    #[inline(always)]
    pub(crate) fn mul(&self, digits: &Digits<F>) -> Self {
        let mut table = [self.cached(); 8];
        for j in 1..8 {
            table[j] = self.add(&table[j - 1]).extended().cached();
        }
        let mut acc = Self::identity().add(&digits.select(&table, 63));
        for i in (0..63).rev() {
            let mut p = acc.projective();
            for _ in 0..3 {
                p = p.double().projective();
            }
            acc = p.double();
            acc = acc.extended().add(&digits.select(&table, i));
        }
        acc.extended()
    }
}

impl<F: Lanes> Projective<F> {
    #[inline(always)]
    fn double(&self) -> Completed<F> {
        let xx = self.x.square();
        let yy = self.y.square();
        let zz = self.z.square();
        let zz2 = zz.add(zz);
        let xy2 = self.x.add(self.y).square();
        let yy_plus_xx = yy.add(xx);
        let yy_minus_xx = yy.sub(xx);
        Completed {
            x: xy2.sub(yy_plus_xx),
            y: yy_plus_xx,
            z: yy_minus_xx,
            t: zz2.sub(yy_minus_xx),
        }
    }
}

impl<F: Lanes> Completed<F> {
    #[inline(always)]
    fn extended(&self) -> Point<F> {
        Point {
            x: self.x.mul(self.t),
            y: self.y.mul(self.z),
            z: self.z.mul(self.t),
            t: self.x.mul(self.y),
        }
    }

    /// The point without `T`, whose product a doubling does not need.
    #[inline(always)]
    fn projective(&self) -> Projective<F> {
        Projective {
            x: self.x.mul(self.t),
            y: self.y.mul(self.z),
            z: self.z.mul(self.t),
        }
    }
}

impl<F: Lanes> Cached<F> {
    #[inline(always)]
    fn identity() -> Self {
        let one = F::splat(&consts::ONE);
        Self {
            y_plus_x: one,
            y_minus_x: one,
            z: one,
            t2d: F::splat(&[0; 5]),
        }
    }

    #[inline(always)]
    fn select(mask: F::Mask, a: &Self, b: &Self) -> Self {
        Self {
            y_plus_x: F::select(mask, a.y_plus_x, b.y_plus_x),
            y_minus_x: F::select(mask, a.y_minus_x, b.y_minus_x),
            z: F::select(mask, a.z, b.z),
            t2d: F::select(mask, a.t2d, b.t2d),
        }
    }

    #[inline(always)]
    fn neg(&self) -> Self {
        Self {
            y_plus_x: self.y_minus_x,
            y_minus_x: self.y_plus_x,
            z: self.z,
            t2d: self.t2d.neg(),
        }
    }
}

/// One scalar per lane as the masks its signed radix-16 digits select
/// with: for window `i`, `eq[i][j]` marks the lanes whose digit has
/// absolute value `j + 1`, `neg[i]` those whose digit is negative.
pub(crate) struct Digits<F: Lanes> {
    eq: [[F::Mask; 8]; 64],
    neg: [F::Mask; 64],
}

impl<F: Lanes> Digits<F> {
    /// From canonical scalar encodings (little-endian, below 2^253).
    #[inline(always)]
    pub(crate) fn new(scalars: &PerLane<[u8; 32]>) -> Self {
        let mut digits: PerLane<[i8; 64]> = core::array::from_fn(|i| radix16(&scalars[i]));
        let mut eq = [[F::mask(&[0; 8]); 8]; 64];
        let mut neg = [F::mask(&[0; 8]); 64];
        for w in 0..64 {
            let abs: PerLane<u8> = core::array::from_fn(|lane| abs_i8(digits[lane][w]));
            for (j, mask) in eq[w].iter_mut().enumerate() {
                *mask = F::mask(&abs.map(|a| ct_eq_u8(a, j as u8 + 1)));
            }
            neg[w] = F::mask(&core::array::from_fn(|lane| {
                (digits[lane][w] as u8 >> 7).into()
            }));
        }
        for d in digits.iter_mut() {
            zeroize::Zeroize::zeroize(d);
        }
        Self { eq, neg }
    }

    /// The table entry window `w` asks for in each lane, negated where
    /// its digit is negative; a digit 0 gives the identity.
    #[inline(always)]
    fn select(&self, table: &[Cached<F>; 8], w: usize) -> Cached<F> {
        let mut entry = Cached::identity();
        for (j, point) in table.iter().enumerate() {
            entry = Cached::select(self.eq[w][j], point, &entry);
        }
        Cached::select(self.neg[w], &entry.neg(), &entry)
    }
}

/// A canonical scalar as 64 signed digits in `[-8, 8)`, least
/// significant first (needs the top bit clear, as below 2^253).
fn radix16(bytes: &[u8; 32]) -> [i8; 64] {
    let mut d = [0i8; 64];
    for (i, b) in bytes.iter().enumerate() {
        d[2 * i] = (b & 15) as i8;
        d[2 * i + 1] = (b >> 4) as i8;
    }
    for i in 0..63 {
        let carry = (d[i] + 8) >> 4;
        d[i] -= carry << 4;
        d[i + 1] += carry;
    }
    d
}

fn abs_i8(d: i8) -> u8 {
    let sign = d >> 7;
    ((d ^ sign) - sign) as u8
}

fn ct_eq_u8(a: u8, b: u8) -> u64 {
    (u64::from(a ^ b)).wrapping_sub(1) >> 63
}

/// 1 if the two encodings are equal, without branching on their bytes.
fn ct_bytes_eq(a: &[u8; 32], b: &[u8; 32]) -> u64 {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    ct_eq_u8(diff, 0)
}
