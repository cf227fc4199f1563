//! Times the homomorphic operations the parameter selection's cost model
//! prices (`psikit-protocols`, `he_psi/common/cost.rs`), on the parameter shapes it
//! chooses most. Run single-threaded on a quiet machine:
//!
//! ```text
//! RAYON_NUM_THREADS=1 cargo run --release -p psikit-he --example he_ops
//! ```
//!
//! Every figure is the fastest of a few repetitions, in ms.

use std::time::Instant;

use psikit_he::{
    Ciphertext, CompactPoly, Evaluator, HeParams, PlainPoly, Prepared, RelinKey, SecretKey,
};

/// Dot-product terms timed together (distinct operands, as in a query).
const TERMS: usize = 128;
/// Products in the timed Paterson-Stockmeyer sum.
const SUMMED: usize = 8;

fn fastest(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::MAX, f64::min)
}

fn main() -> Result<(), psikit_he::HeError> {
    let shapes: [(usize, u64, &[usize]); 5] = [
        (4096, 40961, &[40, 32, 32]),
        (8192, 65537, &[50, 50, 34]),
        (8192, 8273921, &[58, 57, 57, 42]),
        (16384, 16580609, &[60, 60, 60, 44]),
        (16384, 16580609, &[60, 60, 60, 60, 60, 44]),
    ];
    for (n, t, moduli) in shapes {
        let params = HeParams::new(n, t, moduli)?;
        let sk = SecretKey::generate(&params)?;
        let ev = Evaluator::new(&params, &RelinKey::generate(&sk)?)?;
        let slots: Vec<u64> = (0..params.slot_count() as u64).map(|i| i % t).collect();
        let cts = (0..TERMS)
            .map(|_| sk.encrypt_slots(&slots))
            .collect::<Result<Vec<Ciphertext>, _>>()?;
        let (a, b) = (ev.prepare(&cts[0])?, ev.prepare(&cts[1])?);
        let lazy = ev.mul_prepared_lazy(&a, &b)?;

        let prepare = fastest(5, || drop(ev.prepare(&cts[0])));
        let product = fastest(5, || drop(ev.mul_prepared_lazy(&a, &b)));
        let relin = fastest(5, || {
            let mut c = lazy.clone();
            drop(ev.relin(&mut c));
        });
        let pairs: Vec<(&Prepared, &Prepared)> = (0..SUMMED).map(|_| (&a, &b)).collect();
        let one = fastest(5, || drop(ev.sum_of_products(&pairs[..1])));
        let all = fastest(5, || drop(ev.sum_of_products(&pairs)));

        let pt = CompactPoly::from_slots(&params, &slots)?.to_plain(&params)?;
        let pts: Vec<PlainPoly> = (0..TERMS).map(|_| pt.clone()).collect();
        let pt_refs: Vec<&PlainPoly> = pts.iter().collect();
        let ct_refs: Vec<&Ciphertext> = cts.iter().collect();
        let term = fastest(5, || drop(ev.dot(&ct_refs, &pt_refs))) / TERMS as f64;
        let lazies: Vec<Ciphertext> = (0..TERMS).map(|_| lazy.clone()).collect();
        let lazy_refs: Vec<&Ciphertext> = lazies.iter().collect();
        let lazy_term = fastest(5, || drop(ev.dot(&lazy_refs, &pt_refs))) / TERMS as f64;
        let switch = fastest(5, || {
            let mut c = lazies[0].clone();
            drop(ev.to_lowest(&mut c));
        });

        println!(
            "n {n}, {} moduli: product {product:.2}, relin {relin:.2}, prepare {prepare:.2}, \
             summed product {:.2}, dot term {term:.4} (3 parts {lazy_term:.4}), \
             relin + switch {switch:.2}",
            moduli.len() - 1,
            (all - one) / (SUMMED - 1) as f64,
        );
    }
    calibration()
}

/// A machine-speed index: fhe's own ciphertext product with
/// relinearization on APSI's common set (n 8192, t 65537, moduli 56, 56, 56
/// and a 50-bit special prime). The issue that introduced the HE backend
/// measured 11.9 ms for it on the reference machine, in the same session
/// as APSI's figures; the ratio to today's time says how much faster or
/// slower this machine runs now than then.
fn calibration() -> Result<(), psikit_he::HeError> {
    let params = HeParams::new(8192, 65537, &[56, 56, 56, 50])?;
    let sk = SecretKey::generate(&params)?;
    let ev = Evaluator::new(&params, &RelinKey::generate(&sk)?)?;
    let slots: Vec<u64> = (0..params.slot_count() as u64).collect();
    let (a, b) = (sk.encrypt_slots(&slots)?, sk.encrypt_slots(&slots)?);
    let mul_relin = fastest(9, || drop(ev.mul_relin(&a, &b)));
    println!(
        "calibration: fhe multiply + relinearize at (8192, [56, 56, 56 | 50]) {mul_relin:.2} ms \
         (reference machine when APSI was measured: 11.9 ms, ratio {:.2})",
        mul_relin / 11.9
    );
    Ok(())
}
