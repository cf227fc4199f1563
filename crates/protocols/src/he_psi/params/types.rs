//! The parameter set and its four parts (APSI's `PSIParams`), and the
//! figures derived from them that the client, the server and the parameter
//! selection all read.

use super::error::Result;

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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{base, LABELED_1M_1_32};
    use super::*;

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
}
