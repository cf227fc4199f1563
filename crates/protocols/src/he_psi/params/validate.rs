//! APSI's validity rules (its `PSIParams` constructor and SEAL's context
//! check), applied in APSI's order so that a file APSI rejects is rejected
//! here too, with an error naming the field.

use super::error::{invalid, Result};
use super::limits::{
    COEFF_MODULUS_COUNT_MAX, FELTS_PER_ITEM_RANGE, HASH_FUNC_COUNT_MAX, ITEM_BITS_RANGE,
    MODULUS_BITS_MAX, POLY_MODULUS_DEGREE_RANGE,
};
use super::prime::is_prime;
use super::types::PsiParams;

impl PsiParams {
    /// Checks every rule APSI's `PSIParams` constructor and SEAL's context
    /// check apply, in APSI's order, and reports the first one broken.
    ///
    /// Not checked here: the 128-bit security bound on the total modulus size,
    /// which the HE backend checks against its own table.
    pub fn validate(&self) -> Result<()> {
        self.check_table()?;
        self.check_item()?;
        self.check_query()?;
        self.check_seal()?;
        self.check_item_bits()?;
        self.check_bundles()
    }

    fn check_table(&self) -> Result<()> {
        let t = &self.table;
        if t.table_size == 0 {
            return Err(invalid("table_params.table_size must be non-zero"));
        }
        if t.max_items_per_bin == 0 {
            return Err(invalid("table_params.max_items_per_bin must be non-zero"));
        }
        if !(1..=HASH_FUNC_COUNT_MAX).contains(&t.hash_func_count) {
            return Err(invalid(format!(
                "table_params.hash_func_count must be in 1..={HASH_FUNC_COUNT_MAX}, got {}",
                t.hash_func_count
            )));
        }
        Ok(())
    }

    fn check_item(&self) -> Result<()> {
        let f = self.item.felts_per_item;
        if !FELTS_PER_ITEM_RANGE.contains(&f) {
            return Err(invalid(format!(
                "item_params.felts_per_item must be in {}..={}, got {f}",
                FELTS_PER_ITEM_RANGE.start(),
                FELTS_PER_ITEM_RANGE.end()
            )));
        }
        Ok(())
    }

    /// The query powers must be exactly the sources a server can use: APSI
    /// would compute the same plan from them. Their count cannot exceed `B`
    /// (APSI's "at most max_items_per_bin powers") once they are distinct,
    /// non-zero and at most `B`, so that rule needs no code of its own.
    fn check_query(&self) -> Result<()> {
        let q = &self.query;
        let b = self.table.max_items_per_bin;
        if q.ps_low_degree > b {
            return Err(invalid(format!(
                "query_params.ps_low_degree ({}) must not exceed table_params.max_items_per_bin \
                 ({b})",
                q.ps_low_degree
            )));
        }
        if !q.query_powers.windows(2).all(|w| w[0] < w[1]) {
            return Err(invalid(
                "query_params.query_powers must be sorted and without duplicates",
            ));
        }
        if q.query_powers.first() == Some(&0) {
            return Err(invalid("query_params.query_powers must not contain 0"));
        }
        if !q.query_powers.contains(&1) {
            return Err(invalid("query_params.query_powers must contain 1"));
        }
        q.query_powers
            .iter()
            .try_for_each(|&p| check_power(p, q.ps_low_degree, b))
    }

    fn check_seal(&self) -> Result<()> {
        let s = &self.seal;
        let n = s.poly_modulus_degree;
        check_degree(n)?;
        check_coeff_modulus_bits(&s.coeff_modulus_bits)?;
        check_plain_modulus(s.plain_modulus, n)
    }

    fn check_item_bits(&self) -> Result<()> {
        let bits = self.item_bits();
        if !ITEM_BITS_RANGE.contains(&bits) {
            return Err(invalid(format!(
                "item bits = item_params.felts_per_item ({}) x {} bits per felt \
                 (floor(log2 seal_params.plain_modulus)) = {bits}, must be in {}..={}",
                self.item.felts_per_item,
                self.bits_per_felt(),
                ITEM_BITS_RANGE.start(),
                ITEM_BITS_RANGE.end()
            )));
        }
        Ok(())
    }

    fn check_bundles(&self) -> Result<()> {
        let per_bundle = self.bins_per_bundle();
        if per_bundle == 0 {
            return Err(invalid(format!(
                "seal_params.poly_modulus_degree ({}) is smaller than item_params.felts_per_item \
                 ({}): not even one item fits in a ciphertext",
                self.seal.poly_modulus_degree, self.item.felts_per_item
            )));
        }
        if !self.table.table_size.is_multiple_of(per_bundle) {
            return Err(invalid(format!(
                "table_params.table_size ({}) must be a multiple of floor(poly_modulus_degree / \
                 felts_per_item) = {per_bundle}",
                self.table.table_size
            )));
        }
        Ok(())
    }
}

fn check_power(p: u32, ps_low_degree: u32, max_items_per_bin: u32) -> Result<()> {
    if p > max_items_per_bin {
        return Err(invalid(format!(
            "query_params.query_powers contains {p}, above table_params.max_items_per_bin \
             ({max_items_per_bin})"
        )));
    }
    let step = u64::from(ps_low_degree) + 1;
    if p > ps_low_degree && u64::from(p) % step != 0 {
        return Err(invalid(format!(
            "query_params.query_powers contains {p}, above ps_low_degree ({ps_low_degree}) \
             but not a multiple of ps_low_degree + 1 ({step})"
        )));
    }
    Ok(())
}

fn check_coeff_modulus_bits(bits: &[u32]) -> Result<()> {
    if bits.is_empty() || bits.len() > COEFF_MODULUS_COUNT_MAX {
        return Err(invalid(format!(
            "seal_params.coeff_modulus_bits must have 1..={COEFF_MODULUS_COUNT_MAX} entries, \
             got {}",
            bits.len()
        )));
    }
    match bits.iter().find(|&&b| b == 0 || b > MODULUS_BITS_MAX) {
        Some(b) => Err(invalid(format!(
            "seal_params.coeff_modulus_bits entries must be in 1..={MODULUS_BITS_MAX}, got {b}"
        ))),
        None => Ok(()),
    }
}

/// SIMD slots exist only when `t` is a prime with `t = 1 mod 2n`: then
/// `x^n + 1` splits into `n` linear factors modulo `t`.
fn check_plain_modulus(t: u64, n: u32) -> Result<()> {
    if t.checked_ilog2().is_none_or(|log| log >= MODULUS_BITS_MAX) {
        return Err(invalid(format!(
            "seal_params.plain_modulus must be in 2..2^{MODULUS_BITS_MAX}, got {t}"
        )));
    }
    if !is_prime(t) {
        return Err(invalid(format!(
            "seal_params.plain_modulus ({t}) is not prime, so batching is impossible"
        )));
    }
    let two_n = 2 * u64::from(n);
    if t % two_n != 1 {
        return Err(invalid(format!(
            "seal_params.plain_modulus ({t}) must be 1 mod 2 * poly_modulus_degree ({two_n}) \
             for batching"
        )));
    }
    Ok(())
}

/// SEAL's rule for the ring degree. Also checked before resolving
/// `plain_modulus_bits`, whose prime search needs a sane degree.
pub(super) fn check_degree(n: u32) -> Result<()> {
    if n.is_power_of_two() && POLY_MODULUS_DEGREE_RANGE.contains(&n) {
        return Ok(());
    }
    Err(invalid(format!(
        "seal_params.poly_modulus_degree must be a power of two in {}..={}, got {n}",
        POLY_MODULUS_DEGREE_RANGE.start(),
        POLY_MODULUS_DEGREE_RANGE.end()
    )))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{base, json_rejected, rejected, CMP_1M_1024, PS_1M_4096_32};
    use super::super::types::QueryParams;
    use super::*;

    #[test]
    fn rejects_zero_sizes() {
        let mut p = base();
        p.table.table_size = 0;
        rejected(&p, "table_params.table_size must be non-zero");
        let mut p = base();
        p.table.max_items_per_bin = 0;
        rejected(&p, "table_params.max_items_per_bin must be non-zero");
    }

    #[test]
    fn rejects_hash_func_count_out_of_range() {
        for h in [0, 9] {
            let mut p = base();
            p.table.hash_func_count = h;
            rejected(&p, "table_params.hash_func_count");
        }
    }

    #[test]
    fn rejects_felts_per_item_out_of_range() {
        for f in [1, 33] {
            let mut p = base();
            p.item.felts_per_item = f;
            rejected(&p, "item_params.felts_per_item");
        }
    }

    #[test]
    fn rejects_ps_low_degree_above_bin_size() {
        let mut p = base();
        p.query.ps_low_degree = 102;
        rejected(&p, "query_params.ps_low_degree (102)");
    }

    #[test]
    fn rejects_power_zero_and_missing_one() {
        let text = CMP_1M_1024.replace("[ 1, 3,", "[ 0, 1, 3,");
        json_rejected(&text, "query_params.query_powers must not contain 0");
        let mut p = base();
        p.query.query_powers.remove(0);
        rejected(&p, "query_params.query_powers must contain 1");
        let mut p = base();
        p.query.query_powers.swap(1, 2);
        rejected(&p, "query_params.query_powers must be sorted");
    }

    #[test]
    fn rejects_power_above_bin_size() {
        let text = CMP_1M_1024.replace("51, 52 ]", "51, 52, 102 ]");
        json_rejected(&text, "query_params.query_powers contains 102");
        let text = CMP_1M_1024.replace("51, 52 ]", "51, 52, 101 ]");
        PsiParams::from_apsi_json(&text).unwrap();
    }

    #[test]
    fn rejects_high_power_not_multiple_of_ps_step() {
        let mut p = PsiParams::from_apsi_json(PS_1M_4096_32).unwrap();
        p.query = QueryParams::new(26, [1, 5, 8, 27, 130]);
        rejected(&p, "contains 130, above ps_low_degree (26)");
        p.query = QueryParams::new(26, [1, 5, 8, 27, 135, 216]);
        p.validate().unwrap();
    }

    #[test]
    fn rejects_bad_degree_and_coeff_moduli() {
        let mut p = base();
        p.seal.poly_modulus_degree = 3000;
        rejected(&p, "seal_params.poly_modulus_degree");
        let mut p = base();
        p.seal.coeff_modulus_bits.clear();
        rejected(&p, "seal_params.coeff_modulus_bits");
        let mut p = base();
        p.seal.coeff_modulus_bits.push(61);
        rejected(&p, "seal_params.coeff_modulus_bits");
    }

    #[test]
    fn rejects_plain_modulus_without_batching() {
        let mut p = base();
        p.seal.plain_modulus = 40_963; // 13 * 23 * 137
        rejected(&p, "seal_params.plain_modulus (40963) is not prime");
        let mut p = base();
        p.seal.plain_modulus = 40_961 + 8_192 * 2; // 57345 = 3 * 5 * ... not prime
        rejected(&p, "seal_params.plain_modulus");
        let mut p = base();
        p.seal.plain_modulus = 65_537; // prime, 1 mod 8192 but not 1 mod 2^17
        p.seal.poly_modulus_degree = 1 << 16;
        rejected(&p, "must be 1 mod 2 * poly_modulus_degree (131072)");
        let mut p = base();
        p.seal.plain_modulus = 40_993; // prime, 33 mod 8192
        rejected(&p, "must be 1 mod 2 * poly_modulus_degree (8192)");
        let mut p = base();
        p.seal.plain_modulus = 1 << 61;
        rejected(&p, "seal_params.plain_modulus must be in 2..2^60");
    }

    #[test]
    fn rejects_item_bits_out_of_range() {
        let mut p = base();
        p.item.felts_per_item = 5; // 5 * 15 = 75
        rejected(&p, "item bits");
        let mut p = base();
        p.item.felts_per_item = 9; // 9 * 15 = 135
        rejected(&p, "= 135, must be in 80..=128");
    }

    #[test]
    fn rejects_degree_too_small_for_one_item() {
        // n = 8, t = 17 (1 mod 16, 4 bits), f = 32: 128 item bits, 0 bins.
        let mut p = base();
        p.seal.poly_modulus_degree = 8;
        p.seal.plain_modulus = 17;
        p.item.felts_per_item = 32;
        rejected(&p, "not even one item fits");
    }

    #[test]
    fn rejects_table_size_not_multiple_of_bundle() {
        let mut p = base();
        p.table.table_size = 2047;
        rejected(&p, "table_params.table_size (2047) must be a multiple");
        p.table.table_size = 682;
        p.validate().unwrap();
    }
}
