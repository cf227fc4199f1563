//! The reference [`Lanes`]: plain `u64` limbs and `u128` products, lane
//! after lane. The tests run the curve code on it to check that code
//! apart from any vector unit, and check the vector kernels against it.

use super::field::{Lanes, Limbs, PerLane, MASK51, TWO_P};

/// `N` elements held one after another.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable<const N: usize>(pub(crate) [Limbs; N]);

impl<const N: usize> Portable<N> {
    fn map2(self, other: Self, f: impl Fn(&Limbs, &Limbs) -> Limbs) -> Self {
        Self(core::array::from_fn(|i| f(&self.0[i], &other.0[i])))
    }
}

/// One parallel carry pass: limbs below 2^59 become tight.
fn weak_reduce(l: &Limbs) -> Limbs {
    let c = l.map(|x| x >> 51);
    [
        (l[0] & MASK51) + 19 * c[4],
        (l[1] & MASK51) + c[0],
        (l[2] & MASK51) + c[1],
        (l[3] & MASK51) + c[2],
        (l[4] & MASK51) + c[3],
    ]
}

fn add(a: &Limbs, b: &Limbs) -> Limbs {
    weak_reduce(&core::array::from_fn(|i| a[i] + b[i]))
}

fn sub(a: &Limbs, b: &Limbs) -> Limbs {
    weak_reduce(&core::array::from_fn(|i| a[i] + TWO_P[i] - b[i]))
}

fn mul(a: &Limbs, b: &Limbs) -> Limbs {
    let m = |x: u64, y: u64| u128::from(x) * u128::from(y);
    // 2^255 = 19 mod p: products past the top limb wrap around times 19.
    let b19 = b.map(|x| 19 * x);
    let c = [
        m(a[0], b[0]) + m(a[4], b19[1]) + m(a[3], b19[2]) + m(a[2], b19[3]) + m(a[1], b19[4]),
        m(a[1], b[0]) + m(a[0], b[1]) + m(a[4], b19[2]) + m(a[3], b19[3]) + m(a[2], b19[4]),
        m(a[2], b[0]) + m(a[1], b[1]) + m(a[0], b[2]) + m(a[4], b19[3]) + m(a[3], b19[4]),
        m(a[3], b[0]) + m(a[2], b[1]) + m(a[1], b[2]) + m(a[0], b[3]) + m(a[4], b19[4]),
        m(a[4], b[0]) + m(a[3], b[1]) + m(a[2], b[2]) + m(a[1], b[3]) + m(a[0], b[4]),
    ];
    let mut out = [0u64; 5];
    let mut carry = 0u128;
    for (o, ci) in out.iter_mut().zip(c) {
        let v = ci + carry;
        *o = (v as u64) & MASK51;
        carry = v >> 51;
    }
    // carry < 2^59, so 19·carry fits; one more pass leaves limbs tight.
    out[0] += 19 * carry as u64;
    weak_reduce(&out)
}

impl<const N: usize> Lanes for Portable<N> {
    const N: usize = N;
    type Mask = [u64; N];

    fn splat(value: &Limbs) -> Self {
        Self([*value; N])
    }

    fn from_lanes(values: &PerLane<Limbs>) -> Self {
        Self(core::array::from_fn(|i| values[i]))
    }

    fn to_lanes(self) -> PerLane<Limbs> {
        core::array::from_fn(|i| if i < N { self.0[i] } else { [0; 5] })
    }

    fn mask(bits: &PerLane<u64>) -> [u64; N] {
        core::array::from_fn(|i| bits[i].wrapping_neg())
    }

    fn add(self, other: Self) -> Self {
        self.map2(other, add)
    }

    fn sub(self, other: Self) -> Self {
        self.map2(other, sub)
    }

    fn neg(self) -> Self {
        Self::splat(&[0; 5]).sub(self)
    }

    fn mul(self, other: Self) -> Self {
        self.map2(other, mul)
    }

    fn square(self) -> Self {
        self.map2(self, mul)
    }

    fn select(mask: [u64; N], a: Self, b: Self) -> Self {
        Self(core::array::from_fn(|i| {
            core::array::from_fn(|j| (a.0[i][j] & mask[i]) | (b.0[i][j] & !mask[i]))
        }))
    }
}
