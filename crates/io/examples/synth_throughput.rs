//! Measures synthetic generation and streaming key reading throughput.
//!
//! `cargo run --release -p psikit-io --example synth_throughput -- [ROWS]`
//! Prints only counts and timings, never row contents.

use std::time::Instant;

use psikit_io::{write_synthetic_csv, Column, KeyReader, KeySpec, Normalize};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 2_000_000,
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("server.csv");

    let start = Instant::now();
    write_synthetic_csv(&path, 0..rows, 1)?;
    let size = std::fs::metadata(&path)?.len();
    println!(
        "generated {rows} rows ({size} bytes) in {:?}",
        start.elapsed()
    );

    for opts in ["trim", "trim,lower,nfc"] {
        let mut spec = KeySpec::new(vec![Column::parse("email")?]);
        spec.normalize = Normalize::parse(opts)?;
        let start = Instant::now();
        let mut reader = KeyReader::open(&path, &spec)?;
        let mut batch = Vec::new();
        while reader.next_batch(1 << 16, &mut batch)? > 0 {}
        let stats = reader.stats();
        println!(
            "read {} items ({opts}) in {:?}",
            stats.items(),
            start.elapsed()
        );
    }
    Ok(())
}
