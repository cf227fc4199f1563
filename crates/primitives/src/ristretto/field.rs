//! GF(2^255 - 19) for many elements at once: the [`Lanes`] trait the
//! curve code is written against, the one-element helpers that read and
//! write canonical forms, and the curve's constants.
//!
//! An element is five limbs in radix 2^51. Every value a [`Lanes`]
//! operation returns is *tight*: each limb below 2^51 + 2^13. Tight
//! limbs are what the IFMA kernel needs, since `vpmadd52*` only reads the
//! low 52 bits of its operands; every operation reduces its result so
//! that no caller has to track bounds.

/// One field element in radix 2^51, least significant limb first.
pub(crate) type Limbs = [u64; 5];

/// The low 51 bits.
pub(crate) const MASK51: u64 = (1 << 51) - 1;

/// `2p` limb by limb: added before a subtraction so no limb goes negative
/// (each is above any tight limb).
pub(crate) const TWO_P: Limbs = [
    (MASK51 - 18) * 2,
    MASK51 * 2,
    MASK51 * 2,
    MASK51 * 2,
    MASK51 * 2,
];

/// Most lanes any implementation has; lane arrays are this long and an
/// implementation uses the first [`Lanes::N`].
pub(crate) const MAX_LANES: usize = 8;

/// Per-lane values of a [`Lanes`] (the unused tail is ignored).
pub(crate) type PerLane<T> = [T; MAX_LANES];

/// [`Lanes::N`] field elements, one per lane, with arithmetic done on all
/// lanes at once. Implementations differ only in how they hold the limbs.
pub(crate) trait Lanes: Copy {
    /// How many elements one value holds (at most [`MAX_LANES`]).
    const N: usize;
    /// A per-lane condition, made with [`Lanes::mask`].
    type Mask: Copy;

    /// The same element in every lane.
    fn splat(value: &Limbs) -> Self;
    /// One element per lane; each limb below 2^51 + 2^13.
    fn from_lanes(values: &PerLane<Limbs>) -> Self;
    /// Each lane's element, tight (not canonical: see [`freeze`]).
    fn to_lanes(self) -> PerLane<Limbs>;
    /// A mask from one bit (0 or 1) per lane; never branches on the bits.
    fn mask(bits: &PerLane<u64>) -> Self::Mask;

    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn neg(self) -> Self;
    fn mul(self, other: Self) -> Self;
    fn square(self) -> Self;
    /// `a` in the lanes where `mask` is set, `b` elsewhere.
    fn select(mask: Self::Mask, a: Self, b: Self) -> Self;
}

/// Curve constants (RFC 9496 §4.1), radix 2^51; `constants_hold` checks
/// each against its definition.
pub(crate) mod consts {
    use super::Limbs;

    pub(crate) const ONE: Limbs = [1, 0, 0, 0, 0];
    /// The Edwards `d = -121665/121666`.
    pub(crate) const D: Limbs = [
        929955233495203,
        466365720129213,
        1662059464998953,
        2033849074728123,
        1442794654840575,
    ];
    /// `2d`, for the cached form of a point.
    pub(crate) const D2: Limbs = [
        1859910466990425,
        932731440258426,
        1072319116312658,
        1815898335770999,
        633789495995903,
    ];
    /// `sqrt(-1)`.
    pub(crate) const SQRT_M1: Limbs = [
        1718705420411056,
        234908883556509,
        2233514472574048,
        2117202627021982,
        765476049583133,
    ];
    /// `sqrt(a·d - 1)` with `a = -1`.
    pub(crate) const SQRT_AD_MINUS_ONE: Limbs = [
        2241493124984347,
        425987919032274,
        2207028919301688,
        1220490630685848,
        974799131293748,
    ];
    /// `1/sqrt(a - d)`.
    pub(crate) const INVSQRT_A_MINUS_D: Limbs = [
        278908739862762,
        821645201101625,
        8113234426968,
        1777959178193151,
        2118520810568447,
    ];
    /// `1 - d²`.
    pub(crate) const ONE_MINUS_D_SQ: Limbs = [
        1136626929484150,
        1998550399581263,
        496427632559748,
        118527312129759,
        45110755273534,
    ];
    /// `(d - 1)²`.
    pub(crate) const D_MINUS_ONE_SQ: Limbs = [
        1507062230895904,
        1572317787530805,
        683053064812840,
        317374165784489,
        1572899562415810,
    ];
}

/// Reads 32 little-endian bytes, ignoring bit 255 (RFC 9496 masks it
/// before Elligator; decoding checks canonicity separately).
pub(crate) fn from_bytes(bytes: &[u8; 32]) -> Limbs {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    };
    let (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3));
    [
        w0 & MASK51,
        ((w0 >> 51) | (w1 << 13)) & MASK51,
        ((w1 >> 38) | (w2 << 26)) & MASK51,
        ((w2 >> 25) | (w3 << 39)) & MASK51,
        (w3 >> 12) & MASK51,
    ]
}

/// The canonical representative (below p) of a tight element, in
/// constant time.
pub(crate) fn freeze(limbs: &Limbs) -> Limbs {
    let mut l = *limbs;
    // One carry pass: limbs below 2^51, except l[0] below 2^51 + 2^4·19.
    let carries = l.map(|x| x >> 51);
    for x in l.iter_mut() {
        *x &= MASK51;
    }
    l[0] += 19 * carries[4];
    for i in 1..5 {
        l[i] += carries[i - 1];
    }
    // The value is now below 2p; q = 1 exactly when it is at least p.
    let mut q = (l[0] + 19) >> 51;
    for x in &l[1..] {
        q = (x + q) >> 51;
    }
    l[0] += 19 * q;
    for i in 0..4 {
        l[i + 1] += l[i] >> 51;
        l[i] &= MASK51;
    }
    l[4] &= MASK51;
    l
}

/// The 32-byte little-endian encoding of a tight element.
pub(crate) fn to_bytes(limbs: &Limbs) -> [u8; 32] {
    let l = freeze(limbs);
    let words = [
        l[0] | (l[1] << 51),
        (l[1] >> 13) | (l[2] << 38),
        (l[2] >> 26) | (l[3] << 25),
        (l[3] >> 39) | (l[4] << 12),
    ];
    let mut out = [0u8; 32];
    for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// 1 if the element is zero, else 0, in constant time.
pub(crate) fn is_zero(limbs: &Limbs) -> u64 {
    let l = freeze(limbs);
    let any = l.iter().fold(0, |acc, x| acc | x);
    // `any` is below 2^51, so `any - 1` wraps (top bit set) iff it is 0.
    any.wrapping_sub(1) >> 63
}

/// 1 if the element's canonical form is odd (RFC 9496 `IS_NEGATIVE`).
pub(crate) fn is_negative(limbs: &Limbs) -> u64 {
    freeze(limbs)[0] & 1
}

/// 1 if the two elements are equal, in constant time.
pub(crate) fn equal(a: &Limbs, b: &Limbs) -> u64 {
    let (a, b) = (freeze(a), freeze(b));
    let diff = a.iter().zip(&b).fold(0, |acc, (x, y)| acc | (x ^ y));
    // `diff` is below 2^51, so `diff - 1` wraps (top bit set) iff it is 0.
    diff.wrapping_sub(1) >> 63
}
