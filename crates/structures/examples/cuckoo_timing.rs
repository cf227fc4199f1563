//! Timing sanity check (not a benchmark harness): builds a filter sized for
//! 4 million tags at load 0.9 with f = 33, b = 4, then looks up 2^16 tags.
//!
//! Run with `cargo run --release -p psikit-structures --example cuckoo_timing`.

use psikit_structures::{CuckooFilter, CuckooFilterParams, Tag};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = 4_000_000;
    let params = CuckooFilterParams::for_capacity(n as u64, 30, 4, 0.9)?;
    let mut rng = StdRng::seed_from_u64(1);
    let tags: Vec<Tag> = (0..n).map(|_| rng.gen()).collect();

    let mut filter = CuckooFilter::new(params, 2)?;
    let start = Instant::now();
    for tag in &tags {
        filter.insert(tag)?;
    }
    let insert_time = start.elapsed();
    println!(
        "inserted {n} tags in {insert_time:.2?} ({:.0} ns/insert); {:?}, load {:.3}, {:.2} MB, {:.2} bits/item",
        insert_time.as_nanos() as f64 / n as f64,
        params,
        filter.load_factor(),
        filter.size_bytes() as f64 / 1e6,
        filter.bits_per_item()
    );

    let queries: Vec<Tag> = (0..1usize << 16)
        .map(|k| if k % 2 == 0 { tags[k] } else { rng.gen() })
        .collect();
    let start = Instant::now();
    let hits = queries.iter().filter(|t| filter.contains(t)).count();
    let lookup_time = start.elapsed();
    println!(
        "looked up {} tags in {lookup_time:.2?} ({:.1} ns/lookup), {hits} hits",
        queries.len(),
        lookup_time.as_nanos() as f64 / queries.len() as f64
    );
    let passes = 16;
    let start = Instant::now();
    let mut total_hits = 0;
    for _ in 0..passes {
        total_hits += queries.iter().filter(|t| filter.contains(t)).count();
    }
    println!(
        "  repeated {passes}x: {:.1} ns/lookup ({total_hits} hits)",
        start.elapsed().as_nanos() as f64 / (passes * queries.len()) as f64
    );

    // Same lookups against a cache-resident filter (2^16 items), to separate
    // the filter's own cost from DRAM latency.
    let small_params = CuckooFilterParams::for_capacity(1 << 16, 30, 4, 0.9)?;
    let mut small = CuckooFilter::new(small_params, 3)?;
    for tag in &queries[..1 << 15] {
        small.insert(tag)?;
    }
    let start = Instant::now();
    let mut small_hits = 0;
    for _ in 0..16 {
        small_hits += queries.iter().filter(|t| small.contains(t)).count();
    }
    let small_time = start.elapsed();
    println!(
        "cache-resident filter ({:.2} MB): {:.1} ns/lookup, {small_hits} hits",
        small.size_bytes() as f64 / 1e6,
        small_time.as_nanos() as f64 / (16 * queries.len()) as f64
    );

    // Churn: 1% deletes + 1% inserts with change tracking, as for a delta.
    filter.set_track_changes(true);
    let churn = n / 100;
    for tag in &tags[..churn] {
        filter.delete(tag);
    }
    for _ in 0..churn {
        filter.insert(&rng.gen())?;
    }
    let changed = filter.take_changed_slots();
    let delta = filter.export_slots(&changed);
    println!(
        "1% churn: {} of {} slots changed ({:.2}%), delta {:.2} MB",
        changed.len(),
        params.capacity_slots(),
        100.0 * changed.len() as f64 / params.capacity_slots() as f64,
        delta.len() as f64 / 1e6
    );
    Ok(())
}
