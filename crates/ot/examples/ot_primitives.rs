//! Single-thread cost of the building blocks of OT extension, per OT
//! (128-bit row) or per AES block: where the time of `ot_bench` goes.
//!
//! ```sh
//! cargo run --release -p psikit-ot --example ot_primitives
//! ```

use std::hint::black_box;
use std::time::Instant;

use psikit_ot::aes_hash::{
    cr_lows_at_offsets, cr_many, encrypt_each, fill_pair, permute_many, tccr_many, Prg,
};
use psikit_ot::gf128;
use psikit_ot::transpose::{best_path, transpose_128xn, transpose_128xn_with, Path};

/// Median over 5 runs of the nanoseconds per item of `f` over `items` items.
fn time(items: usize, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / items as f64
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[2]
}

fn main() {
    let n = 1 << 20;
    let mut buf: Vec<u128> = (0..n as u128).collect();
    println!("# ns per item, one thread, n = {n}");
    println!(
        "aes fixed-key permute      {:6.2} ns/block",
        time(n, || permute_many(black_box(&mut buf)))
    );
    println!(
        "cr hash                    {:6.2} ns/block",
        time(n, || cr_many(black_box(&mut buf)))
    );
    println!(
        "tccr hash                  {:6.2} ns/block",
        time(n, || tccr_many(black_box(&mut buf), |k| k as u128))
    );
    let prg = Prg::new(7);
    println!(
        "prg fill (bulk)            {:6.2} ns/block",
        time(n, || prg.fill(0, black_box(&mut buf)))
    );
    let keys: Vec<u128> = (0..n as u128).map(|x| x * 5 + 3).collect();
    println!(
        "aes one block per key      {:6.2} ns/key",
        time(n, || encrypt_each(&keys, black_box(&mut buf)))
    );
    let offsets: Vec<u128> = (0..16u128).map(|j| j * 0x9e37_79b9_7f4a_7c15).collect();
    let mut words = vec![0u64; n];
    for (width, keep) in [(4, 2), (16, 1)] {
        println!(
            "cr low bits, {width:2} offsets    {:6.2} ns/input",
            time(n, || cr_lows_at_offsets(
                &buf,
                &offsets[..width],
                keep,
                black_box(&mut words)
            ))
        );
    }
    let prgs: Vec<Prg> = (0..128u128).map(Prg::new).collect();
    let per_col = 8;
    println!(
        "prg fill (8-block columns) {:6.2} ns/block",
        time(n, || {
            for (k, chunk) in buf.chunks_mut(per_col).enumerate() {
                prgs[k % 128].fill(k as u64, chunk);
            }
        })
    );
    println!(
        "prg fill_pair (8-block columns) {:6.2} ns/block",
        time(n, || {
            for (k, chunk) in buf.chunks_mut(2 * per_col).enumerate() {
                let (a, b) = chunk.split_at_mut(per_col);
                fill_pair(
                    &prgs[(2 * k) % 128],
                    &prgs[(2 * k + 1) % 128],
                    k as u64,
                    a,
                    b,
                );
            }
        })
    );
    let mut small = vec![0u128; 2 * per_col];
    println!(
        "prg fill_pair, output in L1 {:6.2} ns/block",
        time(n, || {
            for k in 0..n / (2 * per_col) {
                let (a, b) = small.split_at_mut(per_col);
                fill_pair(
                    &prgs[(2 * k) % 128],
                    &prgs[(2 * k + 1) % 128],
                    k as u64,
                    a,
                    b,
                );
                black_box(&mut small);
            }
        })
    );
    println!(
        "aes permute, 64-block calls {:5.2} ns/block",
        time(n, || {
            for c in buf.chunks_mut(64) {
                permute_many(black_box(c));
            }
        })
    );
    let mut rows = vec![0u128; n];
    println!(
        "transpose in 1024-row sub-batches {:6.2} ns/row",
        time(n, || {
            for (c, r) in buf.chunks(1024).zip(rows.chunks_mut(1024)) {
                transpose_128xn(black_box(c), r);
            }
        })
    );
    for path in [Path::Portable, Path::Sse2, Path::Avx2] {
        println!(
            "  {path:?}, 1024-row sub-batches  {:6.2} ns/row",
            time(n, || {
                for (c, r) in buf.chunks(1024).zip(rows.chunks_mut(1024)) {
                    transpose_128xn_with(path, black_box(c), r);
                }
            })
        );
    }
    println!(
        "transpose 128xn whole ({:?}) {:6.2} ns/row",
        best_path(),
        time(n, || transpose_128xn(black_box(&buf), &mut rows))
    );
    let chis: Vec<u128> = (0..n as u128).map(|x| x * 3 + 1).collect();
    println!(
        "gf128 inner product        {:6.2} ns/term (clmul={})",
        time(n, || {
            black_box(gf128::inner_product(black_box(&chis), &buf));
        }),
        gf128::has_clmul()
    );
    let mut acc = chis.clone();
    println!(
        "gf128 multiply-accumulate  {:6.2} ns/term",
        time(n, || gf128::mul_acc(chis[7], &buf, black_box(&mut acc)))
    );
    println!(
        "gf128 KOS column sums      {:6.2} ns/term (1024-row sub-batches)",
        time(n, || {
            let mut sums = gf128::ColumnSums::new(128);
            for (c, sub) in buf.chunks(1024).enumerate() {
                sums.add(&chis[8 * c..8 * c + 8], sub);
            }
            black_box(sums.finish());
        })
    );
    println!(
        "gf128 inner product port.  {:6.2} ns/term",
        time(n / 16, || {
            black_box(gf128::inner_product_portable(
                &chis[..n / 16],
                &buf[..n / 16],
            ));
        })
    );
}
