//! The shared key-normalisation vectors (`vectors/normalize.json`), which
//! the browser client's tests check too: the CLI's normalisation gives
//! exactly these bytes.

use psikit_io::Normalize;

#[derive(serde::Deserialize)]
struct Vectors {
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    normalize: String,
    input: String,
    output: String,
}

#[test]
fn normalisation_gives_the_shared_vectors() {
    let vectors: Vectors =
        serde_json::from_str(include_str!("vectors/normalize.json")).expect("vectors parse");
    assert!(vectors.cases.len() >= 20);
    for case in &vectors.cases {
        let normalize = Normalize::parse(&case.normalize).expect("valid options");
        let mut out = Vec::new();
        normalize
            .apply_into(case.input.as_bytes(), &mut out)
            .expect("UTF-8 input");
        assert_eq!(
            String::from_utf8(out).expect("UTF-8 output"),
            case.output,
            "{:?} under {}",
            case.input,
            case.normalize
        );
    }
}
