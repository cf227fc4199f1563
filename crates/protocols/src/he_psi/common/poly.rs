//! Polynomials over the plaintext field `F_t` that the sender database
//! stores per SIMD slot: the matching polynomial `P(y) = prod (y - x_i)`
//! (paper eq. (1)) and the label interpolation polynomials `G(x_i) = l_i`
//! (section 4.1).
//!
//! Written by hand because these are the database build's hot loops (about
//! `B^2` multiplications per slot and label fragment) and `t` is below 2^32,
//! which allows a single-multiply Barrett reduction on `u64`.

/// Roots [`Field::divide_linear`] divides by side by side.
const LANES: usize = 4;

/// Arithmetic modulo a prime `t < 2^32`.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    t: u64,
    /// `floor(2^64 / t)`, the Barrett constant.
    barrett: u64,
}

impl Field {
    /// `t` must be a prime below 2^32 (checked by the parameter validation).
    pub fn new(t: u64) -> Self {
        debug_assert!(t > 2 && t < (1 << 32));
        Self {
            t,
            barrett: (u128::from(u64::MAX) / u128::from(t)) as u64,
        }
    }

    /// The modulus `t`.
    pub fn modulus(&self) -> u64 {
        self.t
    }

    /// `x mod t` for any `x < 2^64`.
    #[inline]
    pub fn reduce(&self, x: u64) -> u64 {
        let q = ((u128::from(x) * u128::from(self.barrett)) >> 64) as u64;
        let r = x - q * self.t;
        if r >= self.t {
            r - self.t
        } else {
            r
        }
    }

    #[inline]
    pub fn mul(&self, a: u64, b: u64) -> u64 {
        self.reduce(a * b)
    }

    #[inline]
    pub fn add(&self, a: u64, b: u64) -> u64 {
        let s = a + b;
        if s >= self.t {
            s - self.t
        } else {
            s
        }
    }

    #[inline]
    pub fn neg(&self, a: u64) -> u64 {
        if a == 0 {
            0
        } else {
            self.t - a
        }
    }

    pub fn pow(&self, mut base: u64, mut exp: u64) -> u64 {
        let mut acc = 1;
        while exp > 0 {
            if exp & 1 == 1 {
                acc = self.mul(acc, base);
            }
            base = self.mul(base, base);
            exp >>= 1;
        }
        acc
    }

    /// Inverse by Fermat's little theorem; `a` must be non-zero.
    pub fn inv(&self, a: u64) -> u64 {
        self.pow(a, self.t - 2)
    }

    /// Evaluates `coeffs` (lowest degree first) at `x` by Horner's rule.
    pub fn eval(&self, coeffs: &[u64], x: u64) -> u64 {
        coeffs
            .iter()
            .rev()
            .fold(0, |acc, &c| self.add(self.mul(acc, x), c))
    }

    /// The monic polynomial with the given roots, lowest degree first
    /// (`roots.len() + 1` coefficients).
    ///
    /// This is the database build's hottest loop (about `B^2 / 2`
    /// multiplications per slot), so the roots are taken [`Self::group`]
    /// at a time: their small product `q` multiplies the running
    /// polynomial with the `k + 1` products of each coefficient summed
    /// unreduced (they stay below 2^64) and reduced once, where one root at
    /// a time reduces after every product. The multiply-adds vectorise.
    pub fn vanishing(&self, roots: &[u64]) -> Vec<u64> {
        let group = self.group();
        let mut p = Vec::with_capacity(roots.len() + 1);
        p.push(1);
        if group < 2 {
            for &r in roots {
                self.mul_linear(&mut p, r);
            }
            return p;
        }
        let mut next = Vec::with_capacity(roots.len() + 1);
        let mut q = Vec::with_capacity(group + 1);
        for chunk in roots.chunks(group) {
            q.clear();
            q.push(1);
            for &r in chunk {
                self.mul_linear(&mut q, r);
            }
            self.mul_lazy(&p, &q, &mut next);
            std::mem::swap(&mut p, &mut next);
        }
        p
    }

    /// Roots [`Self::vanishing`] multiplies in at once: at most 8, and
    /// fewer when `k + 1` products of residues could reach 2^64 (`t` above
    /// about 2^30; below 2 means one at a time).
    fn group(&self) -> usize {
        let square = u128::from(self.t - 1).pow(2);
        let terms = u128::from(u64::MAX) / square.max(1);
        terms.saturating_sub(1).min(8) as usize
    }

    /// `out <- p * q` for a short `q` whose `q.len()` products per
    /// coefficient add up below 2^64 ([`Self::group`]).
    fn mul_lazy(&self, p: &[u64], q: &[u64], out: &mut Vec<u64>) {
        out.clear();
        out.resize(p.len() + q.len() - 1, 0);
        for (j, &qj) in q.iter().enumerate() {
            for (o, &pi) in out[j..].iter_mut().zip(p) {
                *o += pi * qj;
            }
        }
        for o in out.iter_mut() {
            *o = self.reduce(*o);
        }
    }

    /// `p <- p * (x - r)`, in place, one coefficient longer.
    fn mul_linear(&self, p: &mut Vec<u64>, r: u64) {
        let neg_r = self.neg(r);
        p.push(0);
        for i in (0..p.len()).rev() {
            let lower = if i == 0 { 0 } else { p[i - 1] };
            p[i] = self.add(lower, self.mul(p[i], neg_r));
        }
    }

    /// Writes into `out` the polynomial `G` of degree `< xs.len()` with
    /// `G(xs[i]) = ys[j][i]` for every value column `j` at once. The columns
    /// share the Lagrange basis, so `c` label fragments cost one basis
    /// computation plus `c` accumulations. The `xs` must be distinct.
    ///
    /// `G = sum_i ys[i] / P'(x_i) * P(x) / (x - x_i)` with `P` the monic
    /// polynomial of all `xs`; `P'(x_i)` is `Q_i(x_i)` for the quotient
    /// `Q_i = P / (x - x_i)`.
    pub fn interpolate_columns(&self, xs: &[u64], ys: &[&[u64]], out: &mut [Vec<u64>]) {
        let m = xs.len();
        for col in out.iter_mut() {
            col.clear();
            col.resize(m, 0);
        }
        if m == 0 {
            return;
        }
        let p = self.vanishing(xs);
        let mut derivs = vec![0u64; m];
        let mut quotients = vec![0u64; m * m];
        for ((x, q), d) in (xs.chunks(LANES))
            .zip(quotients.chunks_mut(LANES * m))
            .zip(derivs.chunks_mut(LANES))
        {
            self.divide_linear(&p, x, q, d);
        }
        let inv = self.batch_inverse(&derivs);
        // With t < 2^24 every product is below 2^48, so the at most 2^16
        // terms of a coefficient add up without overflow in a u64 and are
        // reduced once at the end; this inner loop is the database build's
        // hottest, and without a reduction per term it vectorizes.
        let lazy = self.t < (1 << 24) && m <= (1 << 16);
        for (i, q) in quotients.chunks_exact(m).enumerate() {
            for (col, vals) in out.iter_mut().zip(ys) {
                let w = self.mul(vals[i], inv[i]);
                if w == 0 {
                    continue;
                }
                if lazy {
                    for (c, &qk) in col.iter_mut().zip(q) {
                        *c += w * qk;
                    }
                } else {
                    for (c, &qk) in col.iter_mut().zip(q) {
                        *c = self.add(*c, self.mul(w, qk));
                    }
                }
            }
        }
        if lazy {
            for col in out.iter_mut() {
                for c in col.iter_mut() {
                    *c = self.reduce(*c);
                }
            }
        }
    }

    /// Synthetic division of the monic `p` (degree `m`) by `(x - r)` for
    /// each root `r` of `rs` (at most [`LANES`]): writes each quotient's
    /// `m` coefficients (one row of `quotients` per root) and its value at
    /// `r`, which is `p'(r)`. Each division is a chain of dependent
    /// multiply-adds, as is the Horner evaluation riding on it; running
    /// [`LANES`] roots side by side lets the CPU overlap the chains (the
    /// labeled build spends most of its time here).
    fn divide_linear(&self, p: &[u64], rs: &[u64], quotients: &mut [u64], derivs: &mut [u64]) {
        let m = p.len() - 1;
        let mut carry = [p[m]; LANES];
        let mut deriv = [0u64; LANES];
        for k in (0..m).rev() {
            for (l, &r) in rs.iter().enumerate() {
                quotients[l * m + k] = carry[l];
                deriv[l] = self.add(self.mul(deriv[l], r), carry[l]);
                carry[l] = self.add(p[k], self.mul(carry[l], r));
            }
        }
        debug_assert!(
            carry[..rs.len()].iter().all(|&c| c == 0),
            "rs must be roots of p"
        );
        derivs.copy_from_slice(&deriv[..rs.len()]);
    }

    /// Inverts every (non-zero) element with one field inversion
    /// (Montgomery's trick).
    fn batch_inverse(&self, vals: &[u64]) -> Vec<u64> {
        let mut prefix = Vec::with_capacity(vals.len());
        let mut acc = 1;
        for &v in vals {
            prefix.push(acc);
            acc = self.mul(acc, v);
        }
        let mut inv_acc = self.inv(acc);
        let mut out = vec![0; vals.len()];
        for i in (0..vals.len()).rev() {
            out[i] = self.mul(inv_acc, prefix[i]);
            inv_acc = self.mul(inv_acc, vals[i]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const T: u64 = 65537;

    fn distinct(rng: &mut impl Rng, n: usize, t: u64) -> Vec<u64> {
        let mut v: Vec<u64> = Vec::new();
        while v.len() < n {
            let x = rng.gen_range(0..t);
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v
    }

    #[test]
    fn reduce_matches_remainder() {
        let f = Field::new(4_294_967_291); // largest prime below 2^32
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..10_000 {
            let x: u64 = rng.gen();
            assert_eq!(f.reduce(x), x % f.modulus());
        }
        assert_eq!(f.reduce(u64::MAX), u64::MAX % f.modulus());
    }

    #[test]
    fn inverse_and_batch_inverse() {
        let f = Field::new(T);
        let vals: Vec<u64> = (1..200).collect();
        let inv = f.batch_inverse(&vals);
        for (v, i) in vals.iter().zip(&inv) {
            assert_eq!(f.mul(*v, *i), 1);
            assert_eq!(f.inv(*v), *i);
        }
    }

    #[test]
    fn matching_polynomial_vanishes_exactly_on_roots() {
        let f = Field::new(T);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let roots = distinct(&mut rng, 50, T);
        let p = f.vanishing(&roots);
        assert_eq!(p.len(), 51);
        assert_eq!(p[50], 1);
        for &r in &roots {
            assert_eq!(f.eval(&p, r), 0);
        }
        let mut nonzero = 0;
        for x in 0..2000u64 {
            if !roots.contains(&x) {
                assert_ne!(f.eval(&p, x), 0);
                nonzero += 1;
            }
        }
        assert!(nonzero > 1900);
    }

    #[test]
    fn grouped_roots_give_the_same_polynomial_as_one_at_a_time() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        // 17 bits, 23 bits (psikit's usual), 30 and 31 bits (smaller
        // groups), 32 bits (one root at a time).
        for t in [T, 8_257_537, 1_073_479_681, 2_147_483_647, 4_294_967_291] {
            let f = Field::new(t);
            for n in [0, 1, 7, 8, 9, 100, 1025] {
                let roots = distinct(&mut rng, n, t);
                let mut one_at_a_time = vec![1];
                for &r in &roots {
                    f.mul_linear(&mut one_at_a_time, r);
                }
                assert_eq!(f.vanishing(&roots), one_at_a_time, "t {t}, {n} roots");
            }
        }
        assert_eq!(Field::new(8_257_537).group(), 8);
        assert_eq!(Field::new(4_294_967_291).group(), 0);
    }

    #[test]
    fn interpolation_hits_every_point_in_every_column() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        // 65537 takes the lazy-reduction path, the 32-bit prime the other.
        for (t, m) in [(T, 1usize), (T, 2), (T, 7), (T, 64), (4_294_967_291, 40)] {
            let f = Field::new(t);
            let xs = distinct(&mut rng, m, t);
            let cols: Vec<Vec<u64>> = (0..3)
                .map(|_| (0..m).map(|_| rng.gen_range(0..t)).collect())
                .collect();
            let ys: Vec<&[u64]> = cols.iter().map(Vec::as_slice).collect();
            let mut out = vec![Vec::new(); 3];
            f.interpolate_columns(&xs, &ys, &mut out);
            for (col, g) in cols.iter().zip(&out) {
                assert_eq!(g.len(), m);
                for (x, y) in xs.iter().zip(col) {
                    assert_eq!(f.eval(g, *x), *y);
                }
            }
        }
    }

    #[test]
    fn interpolation_of_nothing_is_empty() {
        let f = Field::new(T);
        let mut out = vec![vec![5u64]];
        f.interpolate_columns(&[], &[&[]], &mut out);
        assert!(out[0].is_empty());
    }
}
