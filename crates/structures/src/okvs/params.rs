//! Parameters of the binned random-band OKVS, chosen from the proven bound.

use super::bound::failure_log2;
use super::error::OkvsError;

/// Default statistical security: encoding fails with probability at most
/// `2^-40`.
pub const DEFAULT_SECURITY: u32 = 40;

/// Band width in bits: three 64-bit words per row.
pub const BAND_WIDTH: usize = 192;

/// Expected keys per bin. A bin's table (about 1.25 * 2^14 * 16 bytes, 320
/// KiB) stays in a core's L2 cache while it is solved, and bins this large
/// keep the load of the fullest bin close to the mean.
pub const BIN_ITEMS: usize = 1 << 14;

/// Columns added per search step, in thousandths of the expected bin load:
/// the rate is minimal to within 0.5%.
const STEP_PER_MILLE: usize = 5;

/// Sizes of a binned random-band OKVS for at most `capacity` keys.
///
/// The table is `bins` consecutive bins of `bin_len` columns. A key's row
/// is a band of `width` random bits starting at a random column of a random
/// bin. `bin_len` is the smallest (to within 0.5%) for which
/// [`failure_bound_log2`](Self::failure_bound_log2), a proven bound on the
/// encoding failure probability (see the module docs), is at most
/// `-security`. For up to 151 keys (at 40 bits) the rows are dense over one
/// bin of `capacity + security + 1` columns.
#[derive(Clone, Debug, PartialEq)]
pub struct OkvsParams {
    capacity: usize,
    security: u32,
    bins: usize,
    bin_len: usize,
    width: usize,
    failure_log2: f64,
}

impl OkvsParams {
    /// Parameters for up to `n` keys at 40 bits of statistical security.
    pub fn new(n: usize) -> Result<Self, OkvsError> {
        Self::with_security(n, DEFAULT_SECURITY)
    }

    /// Parameters for up to `n` keys failing with probability at most
    /// `2^-security` (`security` in `1..=128`). The bands stay 192 bits
    /// wide, so the rate grows with the security level: at `2^20` keys 1.23
    /// at 40 bits, 1.36 at 60, 1.61 at 80, 2.11 at 100; large sets at 128
    /// bits get [`OkvsError::NoParameters`] (a rate above 4 would be needed).
    pub fn with_security(n: usize, security: u32) -> Result<Self, OkvsError> {
        if !(1..=128).contains(&security) {
            return Err(OkvsError::Security(security));
        }
        let bins = n.div_ceil(BIN_ITEMS).max(1);
        if u32::try_from(bins).is_err() {
            return Err(OkvsError::TooLarge(n));
        }
        let target = -f64::from(security);
        let (bin_len, failure_log2) =
            search_bin_len(n, bins, target).ok_or(OkvsError::NoParameters { n, security })?;
        let width = bin_len.min(BAND_WIDTH);
        bins.checked_mul(bin_len).ok_or(OkvsError::TooLarge(n))?;
        Ok(Self {
            capacity: n,
            security,
            bins,
            bin_len,
            width,
            failure_log2,
        })
    }

    /// Number of table entries (`u128` values) an encoding has.
    pub fn table_len(&self) -> usize {
        self.bins * self.bin_len
    }

    /// Most keys one encoding may hold (the bound is computed for this many).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The statistical security parameter (bits).
    pub fn security(&self) -> u32 {
        self.security
    }

    /// Number of independent bins.
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Columns per bin.
    pub fn bin_len(&self) -> usize {
        self.bin_len
    }

    /// Bits in a key's band (columns one decode reads).
    pub fn band_width(&self) -> usize {
        self.width
    }

    /// `log2` of the proven bound on the probability that encoding
    /// `capacity` keys fails (at most `-security`).
    pub fn failure_bound_log2(&self) -> f64 {
        self.failure_log2
    }

    /// Table entries per key at full capacity.
    pub fn rate(&self) -> f64 {
        self.table_len() as f64 / self.capacity.max(1) as f64
    }
}

#[cfg(test)]
impl OkvsParams {
    /// Parameters with given sizes and no bound check (tests of failures).
    pub(crate) fn unchecked(capacity: usize, bins: usize, bin_len: usize, width: usize) -> Self {
        Self {
            capacity,
            security: DEFAULT_SECURITY,
            bins,
            bin_len,
            width,
            failure_log2: failure_log2(capacity, bins, bin_len, width),
        }
    }
}

/// The bound for `bin_len` columns per bin, the band clipped to the bin.
fn bound(n: usize, bins: usize, bin_len: usize) -> f64 {
    failure_log2(n, bins, bin_len, bin_len.min(BAND_WIDTH))
}

/// Smallest `bin_len` (to within a step) whose bound meets `target`, with
/// its bound; `None` if even four times the load does not (which the bound
/// never gives for loads above a few keys). Dense single bins are exact:
/// `n + security + 1` columns.
fn search_bin_len(n: usize, bins: usize, target: f64) -> Option<(usize, f64)> {
    let dense = n + (-target) as usize + 1;
    if bins == 1 && dense <= BAND_WIDTH {
        return Some((dense, bound(n, 1, dense)));
    }
    let load = n.div_ceil(bins);
    let step = (load * STEP_PER_MILLE / 1000).max(1);
    let mut len = secant_guess(n, bins, target, step).max(load + 1);
    let mut b = bound(n, bins, len);
    if b <= target {
        while len > step {
            let lower = bound(n, bins, len - step);
            if lower > target {
                break;
            }
            (len, b) = (len - step, lower);
        }
    } else {
        let most = 4 * (load + BAND_WIDTH);
        while b > target {
            len += step;
            if len > most {
                return None;
            }
            b = bound(n, bins, len);
        }
    }
    Some((len, b))
}

/// Where the bound crosses `target`, from the line through two points (the
/// log of the bound is close to linear in `bin_len` there), so that the
/// walk in `search_bin_len` takes a step or two, each bound costing
/// milliseconds for large bins.
fn secant_guess(n: usize, bins: usize, target: f64, step: usize) -> usize {
    let load = n.div_ceil(bins);
    let x0 = load * 119 / 100 + BAND_WIDTH;
    let x1 = x0 + 4 * step;
    let (y0, y1) = (bound(n, bins, x0), bound(n, bins, x1));
    if !(y0.is_finite() && y1.is_finite()) || y1 >= y0 {
        return x0;
    }
    let slope = (y1 - y0) / (x1 - x0) as f64;
    let guess = x0 as f64 + (target - y0) / slope;
    guess.clamp(load as f64, 4.0 * x1 as f64).ceil() as usize
}
