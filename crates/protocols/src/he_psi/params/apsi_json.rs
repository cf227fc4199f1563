//! Reading and writing APSI's JSON parameter files.
//!
//! Reading goes through a `serde_json::Value` rather than derived structs:
//! every error then names the JSON field it concerns, which derived
//! deserializers only do for missing fields.

use serde_json::{Map, Value};

use super::error::{invalid, Result};
use super::prime::batching_prime;
use super::types::{ItemParams, PsiParams, QueryParams, SealParams, TableParams};
use super::validate::check_degree;

impl PsiParams {
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
    use super::super::fixtures::{
        base, json_rejected, CMP_1M_1024, K256_1024, LABELED_1M_1_32, PS_1M_4096_32,
    };
    use super::*;

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
}
