//! Parameter files and helpers shared by the tests of every part of the
//! parameter code.

use super::types::PsiParams;

pub(super) const CMP_1M_1024: &str = include_str!("../apsi-params/1M-1024-cmp.json");
pub(super) const LABELED_1M_1_32: &str = include_str!("../apsi-params/1M-1-32.json");
pub(super) const K256_1024: &str = include_str!("../apsi-params/256K-1024.json");

/// APSI's `1M-4096-32.json` (Paterson-Stockmeyer, `plain_modulus_bits`).
pub(super) const PS_1M_4096_32: &str = r#"{
    "table_params": { "hash_func_count": 3, "table_size": 6552, "max_items_per_bin": 770 },
    "item_params": { "felts_per_item": 5 },
    "query_params": { "ps_low_degree": 26, "query_powers": [ 1, 5, 8, 27, 135 ] },
    "seal_params": {
        "plain_modulus_bits": 21,
        "poly_modulus_degree": 8192,
        "coeff_modulus_bits": [ 48, 56, 56, 48 ]
    }
}"#;

pub(super) fn base() -> PsiParams {
    PsiParams::from_apsi_json(CMP_1M_1024).expect("fixture is valid")
}

/// The error for an invalid parameter set, checked to be a single line
/// that mentions `field`.
pub(super) fn rejected(params: &PsiParams, field: &str) -> String {
    let message = params.validate().expect_err("must be rejected").to_string();
    assert!(!message.contains('\n'), "multi-line: {message}");
    assert!(message.contains(field), "{message:?} does not name {field}");
    message
}

pub(super) fn json_rejected(text: &str, field: &str) -> String {
    let message = PsiParams::from_apsi_json(text)
        .expect_err("must be rejected")
        .to_string();
    assert!(!message.contains('\n'), "multi-line: {message}");
    assert!(message.contains(field), "{message:?} does not name {field}");
    message
}
