//! Public parameters of HE PSI, in Microsoft APSI's JSON parameter format.
//!
//! A parameter set fixes everything both parties must agree on before a
//! query: the client's cuckoo table (`table_params`), how an item is cut into
//! field elements (`item_params`), which powers of its items the client
//! encrypts (`query_params`) and the BFV scheme (`seal_params`). We read and
//! write APSI's files so that the two implementations can be compared on
//! identical inputs, and we enforce APSI's validity rules so that a file
//! APSI rejects is rejected here too (design note, section 3).
//!
//! Reading goes through a `serde_json::Value` rather than derived structs:
//! every error then names the JSON field it concerns, which derived
//! deserializers only do for missing fields.

use serde_json::{Map, Value};

use crate::Error;

type Result<T> = std::result::Result<T, Error>;

/// Largest number of cuckoo hash functions APSI allows.
pub const HASH_FUNC_COUNT_MAX: u32 = 8;
/// Range of field elements per item that APSI allows.
pub const FELTS_PER_ITEM_RANGE: std::ops::RangeInclusive<u32> = 2..=32;
/// Range of item bits (`felts_per_item * bits_per_felt`) APSI allows: below
/// 80 bits false positives become likely, above 128 bits the item value (16
/// bytes of OPRF output) runs out.
pub const ITEM_BITS_RANGE: std::ops::RangeInclusive<u32> = 80..=128;
/// SEAL's limits on the ring degree (a power of two in this range).
pub const POLY_MODULUS_DEGREE_RANGE: std::ops::RangeInclusive<u32> = 2..=131_072;
/// SEAL's limit on the bit size of any modulus it generates or accepts.
pub const MODULUS_BITS_MAX: u32 = 60;
/// SEAL's limit on the number of coefficient moduli.
pub const COEFF_MODULUS_COUNT_MAX: usize = 64;

/// A complete, validated HE PSI parameter set (APSI's `PSIParams`).
///
/// The fields are public for reading and for building variants in tests and
/// parameter searches; call [`PsiParams::validate`] after changing one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsiParams {
    /// The client's cuckoo table and the server's bin capacity.
    pub table: TableParams,
    /// How an item value is split into plaintext slots.
    pub item: ItemParams,
    /// Which encrypted powers the client sends.
    pub query: QueryParams,
    /// The BFV scheme, in SEAL's terms.
    pub seal: SealParams,
}

/// APSI's `table_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableParams {
    /// Cuckoo hash functions `h` (1..=8).
    pub hash_func_count: u32,
    /// Bins `T` of the client's table, a multiple of the bins per bundle.
    pub table_size: u32,
    /// Largest number `B` of server items in one bin of one bin bundle: the
    /// degree of the matching polynomials.
    pub max_items_per_bin: u32,
}

/// APSI's `item_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemParams {
    /// Field elements `f` per item, i.e. slots per bin.
    pub felts_per_item: u32,
}

/// APSI's `query_params`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryParams {
    /// Paterson-Stockmeyer low degree `L`; 0 disables Paterson-Stockmeyer.
    pub ps_low_degree: u32,
    /// Source powers the client encrypts: sorted, without duplicates, and
    /// containing 1.
    pub query_powers: Vec<u32>,
}

/// APSI's `seal_params`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealParams {
    /// Ring degree `n`, also the number of plaintext slots.
    pub poly_modulus_degree: u32,
    /// Bit sizes of the coefficient moduli; SEAL uses the last one as the
    /// special key-switching prime.
    pub coeff_modulus_bits: Vec<u32>,
    /// Plaintext modulus `t`: a prime with `t = 1 mod 2n` so that slots exist.
    pub plain_modulus: u64,
}

impl QueryParams {
    /// Query parameters with `powers` sorted, deduplicated and completed with
    /// 1, as APSI does when it loads a file (it keeps the powers in a set and
    /// always inserts 1).
    pub fn new(ps_low_degree: u32, powers: impl IntoIterator<Item = u32>) -> Self {
        let mut query_powers: Vec<u32> = powers.into_iter().chain([1]).collect();
        query_powers.sort_unstable();
        query_powers.dedup();
        Self {
            ps_low_degree,
            query_powers,
        }
    }

    /// Whether the Paterson-Stockmeyer evaluation is enabled.
    pub fn uses_ps(&self) -> bool {
        self.ps_low_degree > 0
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Params(message.into())
}

impl PsiParams {
    /// Checks a parameter set against every APSI rule and returns it.
    pub fn new(
        table: TableParams,
        item: ItemParams,
        query: QueryParams,
        seal: SealParams,
    ) -> Result<Self> {
        let params = Self {
            table,
            item,
            query,
            seal,
        };
        params.validate()?;
        Ok(params)
    }

    /// Parses APSI's JSON parameter file format and validates the result.
    ///
    /// Unknown fields are ignored, as APSI ignores them.
    pub fn from_apsi_json(text: &str) -> Result<Self> {
        let root: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("not a valid JSON document: {e}")))?;
        let root = as_object(&root, "the parameter file")?;
        let table = read_table(object_field(root, "table_params")?)?;
        let item = read_item(object_field(root, "item_params")?)?;
        let query = read_query(object_field(root, "query_params")?)?;
        let seal = read_seal(object_field(root, "seal_params")?)?;
        Self::new(table, item, query, seal)
    }

    /// Writes the parameters in APSI's JSON format, laid out as APSI's own
    /// files are (a file APSI ships reads back and writes out byte for byte).
    ///
    /// The plaintext modulus is always written as `plain_modulus`: a file
    /// that gave `plain_modulus_bits` comes back with the prime it denotes,
    /// which APSI reads as the same parameters.
    pub fn to_apsi_json(&self) -> String {
        let t = &self.table;
        let q = &self.query;
        let s = &self.seal;
        format!(
            "{{\n    \"table_params\": {{\n        \"hash_func_count\": {},\n        \
             \"table_size\": {},\n        \"max_items_per_bin\": {}\n    }},\n    \
             \"item_params\": {{\n        \"felts_per_item\": {}\n    }},\n    \
             \"query_params\": {{\n        \"ps_low_degree\": {},\n        \
             \"query_powers\": {}\n    }},\n    \"seal_params\": {{\n        \
             \"plain_modulus\": {},\n        \"poly_modulus_degree\": {},\n        \
             \"coeff_modulus_bits\": {}\n    }}\n}}\n",
            t.hash_func_count,
            t.table_size,
            t.max_items_per_bin,
            self.item.felts_per_item,
            q.ps_low_degree,
            json_array(&q.query_powers),
            s.plain_modulus,
            s.poly_modulus_degree,
            json_array(&s.coeff_modulus_bits),
        )
    }

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
        if self.table.table_size % per_bundle != 0 {
            return Err(invalid(format!(
                "table_params.table_size ({}) must be a multiple of floor(poly_modulus_degree / \
                 felts_per_item) = {per_bundle}",
                self.table.table_size
            )));
        }
        Ok(())
    }

    /// The BFV parameters of this set, checked against the 128-bit
    /// HomomorphicEncryption.org bound.
    pub fn he_params(&self) -> Result<psikit_he::HeParams> {
        let bits: Vec<usize> = self
            .seal
            .coeff_modulus_bits
            .iter()
            .map(|&b| b as usize)
            .collect();
        Ok(psikit_he::HeParams::new(
            self.seal.poly_modulus_degree as usize,
            self.seal.plain_modulus,
            &bits,
        )?)
    }

    /// Bits `b` of item value per field element: `floor(log2 t)`, so that
    /// every `b`-bit chunk is below `t` (APSI: `bit_count(t) - 1`).
    pub fn bits_per_felt(&self) -> u32 {
        self.seal.plain_modulus.checked_ilog2().unwrap_or(0)
    }

    /// Bits of the item value actually compared: `f * b`.
    pub fn item_bits(&self) -> u32 {
        self.item
            .felts_per_item
            .saturating_mul(self.bits_per_felt())
    }

    /// Bins per bundle index, i.e. per ciphertext: `floor(n / f)`. Slots past
    /// the last whole bin stay unused.
    pub fn bins_per_bundle(&self) -> u32 {
        self.seal
            .poly_modulus_degree
            .checked_div(self.item.felts_per_item)
            .unwrap_or(0)
    }

    /// Number of bundle indices (ciphertexts per source power in a query):
    /// `table_size / bins_per_bundle`.
    pub fn bundle_idx_count(&self) -> u32 {
        self.table
            .table_size
            .checked_div(self.bins_per_bundle())
            .unwrap_or(0)
    }

    /// APSI's `log2_fpp()`: `f * (log2 B - b)`, the log2 probability that one
    /// item that is not in the server's set matches one bin bundle. Each of
    /// the `f` chunks hits one of at most `B` roots among `2^b` values.
    pub fn log2_fpp_per_item_and_bundle(&self) -> f64 {
        let b = f64::from(self.table.max_items_per_bin).log2();
        f64::from(self.item.felts_per_item) * (b - f64::from(self.bits_per_felt()))
    }

    /// log2 of the union bound on a false positive anywhere in one query
    /// (design note, section 1): `items` queried, each tested against at
    /// most `bundles_per_index` bin bundles at its bundle index. Returns
    /// negative infinity (probability 0) when nothing is tested.
    pub fn log2_fpp_query(&self, items: u64, bundles_per_index: u64) -> f64 {
        if items == 0 || bundles_per_index == 0 {
            return f64::NEG_INFINITY;
        }
        (items as f64).log2()
            + (bundles_per_index as f64).log2()
            + self.log2_fpp_per_item_and_bundle()
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
    if t.checked_ilog2()
        .map_or(true, |log| log >= MODULUS_BITS_MAX)
    {
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

/// SEAL's `PlainModulus::Batching(n, bits)`: the largest prime `t` with
/// `2^(bits-1) < t < 2^bits` and `t = 1 mod 2n`.
///
/// SEAL walks down from `2^bits - 2n + 1` in steps of `2n`; so do we, so the
/// same file gives the same prime in both implementations.
pub fn batching_prime(poly_modulus_degree: u32, bits: u32) -> Result<u64> {
    if !(2..=MODULUS_BITS_MAX).contains(&bits) {
        return Err(invalid(format!(
            "seal_params.plain_modulus_bits must be in 2..={MODULUS_BITS_MAX}, got {bits}"
        )));
    }
    let step = 2 * u64::from(poly_modulus_degree);
    let top = 1u64 << bits;
    let lower = top >> 1;
    let mut candidate = top.checked_sub(step).map(|v| v + 1);
    while let Some(c) = candidate.filter(|&c| c > lower) {
        if is_prime(c) {
            return Ok(c);
        }
        candidate = c.checked_sub(step);
    }
    Err(invalid(format!(
        "seal_params.plain_modulus_bits: no {bits}-bit prime is 1 mod 2 * poly_modulus_degree \
         ({step})"
    )))
}

/// Deterministic Miller-Rabin for 64-bit integers.
///
/// The first twelve primes as witnesses are known to decide primality for
/// every `n < 3.3 * 10^24`, which covers all of `u64`.
pub fn is_prime(n: u64) -> bool {
    const WITNESSES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    if let Some(&p) = WITNESSES.iter().find(|&&p| n % p == 0) {
        return n == p;
    }
    let s = (n - 1).trailing_zeros();
    let odd = (n - 1) >> s;
    WITNESSES.iter().all(|&a| passes_round(n, a, odd, s))
}

/// One Miller-Rabin round with `n - 1 = odd * 2^s`: `n` passes for witness
/// `a` if `a^odd = 1` or `a^(odd * 2^r) = n - 1` for some `r < s`.
fn passes_round(n: u64, a: u64, odd: u64, s: u32) -> bool {
    let mut x = pow_mod(a, odd, n);
    if x == 1 || x == n - 1 {
        return true;
    }
    for _ in 1..s {
        x = mul_mod(x, x, n);
        if x == n - 1 {
            return true;
        }
    }
    false
}

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(m)) as u64
}

fn pow_mod(mut base: u64, mut exp: u64, m: u64) -> u64 {
    let mut acc = 1 % m;
    base %= m;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul_mod(acc, base, m);
        }
        base = mul_mod(base, base, m);
        exp >>= 1;
    }
    acc
}

fn json_array(values: &[u32]) -> String {
    if values.is_empty() {
        return "[]".to_string();
    }
    let items: Vec<String> = values.iter().map(u32::to_string).collect();
    format!("[ {} ]", items.join(", "))
}

fn read_table(obj: &Map<String, Value>) -> Result<TableParams> {
    Ok(TableParams {
        hash_func_count: u32_field(obj, "table_params", "hash_func_count")?,
        table_size: u32_field(obj, "table_params", "table_size")?,
        max_items_per_bin: u32_field(obj, "table_params", "max_items_per_bin")?,
    })
}

fn read_item(obj: &Map<String, Value>) -> Result<ItemParams> {
    Ok(ItemParams {
        felts_per_item: u32_field(obj, "item_params", "felts_per_item")?,
    })
}

fn read_query(obj: &Map<String, Value>) -> Result<QueryParams> {
    let ps_low_degree = u32_field(obj, "query_params", "ps_low_degree")?;
    let powers = u32_array_field(obj, "query_params", "query_powers")?;
    Ok(QueryParams::new(ps_low_degree, powers))
}

fn read_seal(obj: &Map<String, Value>) -> Result<SealParams> {
    let n = u32_field(obj, "seal_params", "poly_modulus_degree")?;
    let coeff_modulus_bits = u32_array_field(obj, "seal_params", "coeff_modulus_bits")?;
    let plain_modulus = match (obj.get("plain_modulus"), obj.get("plain_modulus_bits")) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "seal_params: give only one of plain_modulus and plain_modulus_bits",
            ))
        }
        (None, None) => {
            return Err(invalid(
                "seal_params: one of plain_modulus or plain_modulus_bits is required",
            ))
        }
        (Some(v), None) => as_u64(v, "seal_params.plain_modulus")?,
        (None, Some(v)) => {
            check_degree(n)?;
            batching_prime(n, as_u32(v, "seal_params.plain_modulus_bits")?)?
        }
    };
    Ok(SealParams {
        poly_modulus_degree: n,
        coeff_modulus_bits,
        plain_modulus,
    })
}

/// SEAL's rule for the ring degree. Also checked before resolving
/// `plain_modulus_bits`, whose prime search needs a sane degree.
fn check_degree(n: u32) -> Result<()> {
    if n.is_power_of_two() && POLY_MODULUS_DEGREE_RANGE.contains(&n) {
        return Ok(());
    }
    Err(invalid(format!(
        "seal_params.poly_modulus_degree must be a power of two in {}..={}, got {n}",
        POLY_MODULUS_DEGREE_RANGE.start(),
        POLY_MODULUS_DEGREE_RANGE.end()
    )))
}

fn as_object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    value.as_object().ok_or_else(|| {
        invalid(format!(
            "{what} must be a JSON object, got {}",
            describe(value)
        ))
    })
}

fn object_field<'a>(root: &'a Map<String, Value>, name: &str) -> Result<&'a Map<String, Value>> {
    let value = root
        .get(name)
        .ok_or_else(|| invalid(format!("{name} is missing")))?;
    as_object(value, name)
}

fn field<'a>(obj: &'a Map<String, Value>, parent: &str, name: &str) -> Result<&'a Value> {
    obj.get(name)
        .ok_or_else(|| invalid(format!("{parent}.{name} is missing")))
}

fn u32_field(obj: &Map<String, Value>, parent: &str, name: &str) -> Result<u32> {
    as_u32(field(obj, parent, name)?, &format!("{parent}.{name}"))
}

fn u32_array_field(obj: &Map<String, Value>, parent: &str, name: &str) -> Result<Vec<u32>> {
    let path = format!("{parent}.{name}");
    let value = field(obj, parent, name)?;
    let items = value
        .as_array()
        .ok_or_else(|| invalid(format!("{path} must be an array, got {}", describe(value))))?;
    items
        .iter()
        .enumerate()
        .map(|(i, v)| as_u32(v, &format!("{path}[{i}]")))
        .collect()
}

fn as_u32(value: &Value, path: &str) -> Result<u32> {
    value
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| {
            invalid(format!(
                "{path} must be an unsigned 32-bit integer, got {}",
                describe(value)
            ))
        })
}

fn as_u64(value: &Value, path: &str) -> Result<u64> {
    value.as_u64().ok_or_else(|| {
        invalid(format!(
            "{path} must be an unsigned 64-bit integer, got {}",
            describe(value)
        ))
    })
}

/// A short description of a JSON value for error messages: numbers as
/// written, anything else by kind, so a message stays on one short line.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => "a string".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CMP_1M_1024: &str = include_str!("apsi-params/1M-1024-cmp.json");
    const LABELED_1M_1_32: &str = include_str!("apsi-params/1M-1-32.json");
    const K256_1024: &str = include_str!("apsi-params/256K-1024.json");

    /// APSI's `1M-4096-32.json` (Paterson-Stockmeyer, `plain_modulus_bits`).
    const PS_1M_4096_32: &str = r#"{
        "table_params": { "hash_func_count": 3, "table_size": 6552, "max_items_per_bin": 770 },
        "item_params": { "felts_per_item": 5 },
        "query_params": { "ps_low_degree": 26, "query_powers": [ 1, 5, 8, 27, 135 ] },
        "seal_params": {
            "plain_modulus_bits": 21,
            "poly_modulus_degree": 8192,
            "coeff_modulus_bits": [ 48, 56, 56, 48 ]
        }
    }"#;

    fn base() -> PsiParams {
        PsiParams::from_apsi_json(CMP_1M_1024).expect("fixture is valid")
    }

    /// The error for an invalid parameter set, checked to be a single line
    /// that mentions `field`.
    fn rejected(params: &PsiParams, field: &str) -> String {
        let message = params.validate().expect_err("must be rejected").to_string();
        assert!(!message.contains('\n'), "multi-line: {message}");
        assert!(message.contains(field), "{message:?} does not name {field}");
        message
    }

    fn json_rejected(text: &str, field: &str) -> String {
        let message = PsiParams::from_apsi_json(text)
            .expect_err("must be rejected")
            .to_string();
        assert!(!message.contains('\n'), "multi-line: {message}");
        assert!(message.contains(field), "{message:?} does not name {field}");
        message
    }

    #[test]
    fn apsi_files_load_with_apsi_derived_values() {
        let p = base();
        assert_eq!(p.table.hash_func_count, 3);
        assert_eq!(p.query.query_powers.len(), 16);
        assert_eq!(p.seal.coeff_modulus_bits, [40, 32, 32]);
        assert_eq!(
            (p.bits_per_felt(), p.item_bits(), p.bins_per_bundle()),
            (15, 90, 682)
        );
        assert_eq!(p.bundle_idx_count(), 3);

        let p = PsiParams::from_apsi_json(LABELED_1M_1_32).unwrap();
        assert_eq!(
            (p.table.hash_func_count, p.table.max_items_per_bin),
            (1, 228)
        );
        assert_eq!((p.bits_per_felt(), p.item_bits()), (16, 80));
        assert_eq!((p.bins_per_bundle(), p.bundle_idx_count()), (1638, 1));

        let p = PsiParams::from_apsi_json(K256_1024).unwrap();
        assert_eq!((p.bits_per_felt(), p.item_bits()), (17, 85));
        assert_eq!((p.bins_per_bundle(), p.bundle_idx_count()), (819, 2));
    }

    #[test]
    fn apsi_files_write_back_byte_for_byte() {
        for text in [CMP_1M_1024, LABELED_1M_1_32, K256_1024] {
            let p = PsiParams::from_apsi_json(text).unwrap();
            assert_eq!(p.to_apsi_json(), text);
        }
    }

    #[test]
    fn json_round_trip_keeps_every_field() {
        let mut p = PsiParams::from_apsi_json(PS_1M_4096_32).unwrap();
        let again = PsiParams::from_apsi_json(&p.to_apsi_json()).unwrap();
        assert_eq!(again, p);
        p.query = QueryParams::new(0, [2, 3]);
        p.table.hash_func_count = 8;
        p.validate().unwrap();
        assert_eq!(PsiParams::from_apsi_json(&p.to_apsi_json()).unwrap(), p);
    }

    #[test]
    fn plain_modulus_bits_is_seals_batching_prime() {
        let p = PsiParams::from_apsi_json(PS_1M_4096_32).unwrap();
        let t = p.seal.plain_modulus;
        assert_eq!(t, 1_785_857);
        assert_eq!(p.bits_per_felt(), 20);
        assert!(is_prime(t) && t % 16_384 == 1 && t < 1 << 21);
        let mut above = t + 16_384;
        while above < 1 << 21 {
            assert!(!is_prime(above), "{above} is a larger candidate");
            above += 16_384;
        }
        // SEAL's examples: PlainModulus::Batching(8192, 20) = 1032193.
        assert_eq!(batching_prime(8192, 20).unwrap(), 1_032_193);
        assert_eq!(batching_prime(16_384, 20).unwrap(), 786_433);
        // 1M-1024-cmp.json's plain_modulus is the 16-bit batching prime.
        assert_eq!(batching_prime(4096, 16).unwrap(), 40_961);
        assert_eq!(batching_prime(4096, 17).unwrap(), 114_689);
        assert_eq!(batching_prime(8192, 22).unwrap(), 4_079_617);
    }

    #[test]
    fn batching_prime_rejects_impossible_requests() {
        assert!(batching_prime(8192, 1).is_err());
        assert!(batching_prime(8192, 61).is_err());
        // 2^14 < 2n: no candidate at all.
        let message = batching_prime(8192, 14).unwrap_err().to_string();
        assert!(message.contains("plain_modulus_bits"), "{message}");
    }

    #[test]
    fn exactly_one_plain_modulus_field() {
        let both = CMP_1M_1024.replace(
            "\"plain_modulus\": 40961,",
            "\"plain_modulus\": 40961, \"plain_modulus_bits\": 16,",
        );
        json_rejected(&both, "only one of plain_modulus and plain_modulus_bits");
        let neither = CMP_1M_1024.replace("\"plain_modulus\": 40961,", "");
        json_rejected(&neither, "plain_modulus_bits is required");
        let bits = CMP_1M_1024.replace("\"plain_modulus\": 40961", "\"plain_modulus_bits\": 16");
        assert_eq!(
            PsiParams::from_apsi_json(&bits).unwrap().seal.plain_modulus,
            batching_prime(4096, 16).unwrap()
        );
    }

    #[test]
    fn malformed_json_names_the_field() {
        json_rejected("{", "not a valid JSON document");
        json_rejected("[1]", "must be a JSON object");
        json_rejected(
            &CMP_1M_1024.replace("\"table_size\": 2046,", ""),
            "table_params.table_size is missing",
        );
        json_rejected(
            &CMP_1M_1024.replace("\"table_size\": 2046", "\"table_size\": -2046"),
            "table_params.table_size must be an unsigned 32-bit integer, got -2046",
        );
        json_rejected(
            &CMP_1M_1024.replace("\"table_size\": 2046", "\"table_size\": 5000000000"),
            "table_params.table_size",
        );
        json_rejected(
            &CMP_1M_1024.replace("\"felts_per_item\": 6", "\"felts_per_item\": 6.5"),
            "item_params.felts_per_item",
        );
        json_rejected(
            &CMP_1M_1024.replace("[ 1, 3, 4,", "[ 1, \"3\", 4,"),
            "query_params.query_powers[1] must be an unsigned 32-bit integer, got a string",
        );
        json_rejected(
            &CMP_1M_1024.replace("[ 40, 32, 32 ]", "40"),
            "seal_params.coeff_modulus_bits must be an array",
        );
        json_rejected(
            &CMP_1M_1024.replace("\"plain_modulus\": 40961", "\"plain_modulus\": null"),
            "seal_params.plain_modulus",
        );
        let no_item = CMP_1M_1024.replace("\"item_params\"", "\"items\"");
        json_rejected(&no_item, "item_params is missing");
    }

    #[test]
    fn loading_inserts_power_one_and_sorts() {
        let text = CMP_1M_1024.replace("[ 1, 3, 4, 5,", "[ 5, 3, 4, 3,");
        let p = PsiParams::from_apsi_json(&text).unwrap();
        assert_eq!(p, base());
    }

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

    #[test]
    fn false_positive_bounds_match_the_design_note() {
        let p = base();
        let per_item = p.log2_fpp_per_item_and_bundle();
        assert!((per_item + 50.05).abs() < 0.01, "{per_item}");
        let query = p.log2_fpp_query(1024, 17);
        assert!((query + 35.96).abs() < 0.01, "{query}");
        let p = PsiParams::from_apsi_json(LABELED_1M_1_32).unwrap();
        let single = p.log2_fpp_query(1, 4);
        assert!((single + 38.83).abs() < 0.01, "{single}");
        assert_eq!(p.log2_fpp_query(0, 4), f64::NEG_INFINITY);
    }

    #[test]
    fn miller_rabin_agrees_with_a_sieve_and_known_values() {
        let limit = 20_000usize;
        let mut composite = vec![false; limit];
        for i in 2..limit {
            if !composite[i] {
                (i * i..limit).step_by(i).for_each(|j| composite[j] = true);
            }
            assert_eq!(is_prime(i as u64), !composite[i], "{i}");
        }
        assert!(!is_prime(0) && !is_prime(1));
        assert!(is_prime((1 << 61) - 1));
        assert!(is_prime(18_446_744_073_709_551_557)); // largest u64 prime
        assert!(!is_prime(561)); // Carmichael
        assert!(!is_prime(3_215_031_751)); // strong pseudoprime to 2, 3, 5, 7
        assert!(!is_prime(3_825_123_056_546_413_051)); // ... to bases up to 23
        assert!(!is_prime(u64::MAX));
    }
}
