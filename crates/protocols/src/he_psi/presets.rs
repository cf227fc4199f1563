//! APSI's public parameter files that psikit ships, so benchmarks and demos
//! can run on exactly the parameters APSI is measured with (copied from
//! Microsoft APSI's `parameters/` folder; see `apsi-params/`).

/// `(name, JSON)` of every shipped APSI parameter file.
pub const APSI_PRESETS: &[(&str, &str)] = &[
    ("1M-1024-cmp", include_str!("apsi-params/1M-1024-cmp.json")),
    ("1M-1-32", include_str!("apsi-params/1M-1-32.json")),
    ("256K-1024", include_str!("apsi-params/256K-1024.json")),
];

/// The JSON of a shipped APSI parameter file, by name (with or without
/// `.json`).
pub fn apsi_preset(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".json").unwrap_or(name);
    APSI_PRESETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, json)| *json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::he_psi::params::PsiParams;

    #[test]
    fn every_preset_loads() {
        for (name, json) in APSI_PRESETS {
            assert!(PsiParams::from_apsi_json(json).is_ok(), "{name}");
        }
        assert!(apsi_preset("1M-1-32.json").is_some());
        assert!(apsi_preset("nope").is_none());
    }
}
