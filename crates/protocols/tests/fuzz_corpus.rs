//! Replays the fuzz corpus (`fuzz/corpus/<target>/`) through the fuzz
//! targets' functions on stable Rust, so every input a fuzzer once kept,
//! including the ones that found bugs, is checked by the ordinary test run.
//!
//! Run with `cargo test -p psikit-protocols --features fuzzing --test
//! fuzz_corpus`; `-- --ignored` (re)writes the seed files from the real
//! encoders.

use std::fs;
use std::path::{Path, PathBuf};

use psikit_protocols::fuzzing::{seeds, TARGETS};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// The files of one target's corpus directory.
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = corpus().join(target);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_runs_clean() {
    for &(target, run) in TARGETS {
        let files = inputs(target);
        assert!(!files.is_empty(), "the corpus of {target} is empty");
        for file in files {
            let data = fs::read(&file).expect("a corpus file");
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{target} fails on {}", file.display());
        }
    }
}

#[test]
fn every_corpus_directory_has_a_target() {
    let dirs = fs::read_dir(corpus()).expect("fuzz/corpus");
    for dir in dirs {
        let name = dir.expect("a directory entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            TARGETS.iter().any(|&(target, _)| target == name),
            "fuzz/corpus/{name} belongs to no target"
        );
    }
}

#[test]
#[ignore = "writes the seed corpus into fuzz/corpus"]
fn write_seed_corpus() {
    for seed in seeds() {
        let dir = corpus().join(seed.target);
        fs::create_dir_all(&dir).expect("a corpus directory");
        fs::write(dir.join(format!("seed-{}", seed.name)), &seed.bytes).expect("a seed file");
    }
}
