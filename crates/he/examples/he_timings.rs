//! Times the operations the HE PSI protocol is built from, at APSI's two
//! common parameter shapes. Run in release mode:
//!
//! ```text
//! cargo run -p psikit-he --release --example he_timings
//! ```

use std::time::Instant;

use psikit_he::{wire, Ciphertext, CompactPoly, Evaluator, HeError, HeParams, RelinKey, SecretKey};
use rand09::Rng;

/// Mean milliseconds of `reps` runs of `f`.
fn time_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    start.elapsed().as_secs_f64() * 1e3 / reps as f64
}

fn random_slots(params: &HeParams) -> Vec<u64> {
    let mut rng = rand09::rng();
    let t = params.plain_modulus();
    (0..params.slot_count())
        .map(|_| rng.random_range(0..t))
        .collect()
}

fn run(degree: usize, t: u64, bits: &[usize]) -> Result<(), HeError> {
    let params = HeParams::new(degree, t, bits)?;
    println!("n {degree}, t {t}, moduli {bits:?}");
    let start = Instant::now();
    let sk = SecretKey::generate(&params)?;
    let rk = RelinKey::generate(&sk)?;
    println!(
        "  keygen (sk + rk)      {:8.2} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let eval = Evaluator::new(&params, &rk)?;

    let slots = random_slots(&params);
    let reps = 20;
    let encrypt = time_ms(reps, || drop(sk.encrypt_slots(&slots)));
    let a = sk.encrypt_slots(&slots)?;
    let b = sk.encrypt_slots(&random_slots(&params))?;
    let query = wire::encode_query_ct(&a)?;
    let encode = time_ms(reps, || drop(wire::encode_query_ct(&a)));
    let decode = time_ms(reps, || drop(wire::decode_query_ct(&params, &query)));
    let mul_relin = time_ms(reps, || drop(eval.mul_relin(&a, &b)));
    let mul_lazy = time_ms(reps, || drop(eval.mul_lazy(&a, &b)));
    let lazy = eval.mul_lazy(&a, &b)?;
    let relin = time_ms(reps, || {
        let mut ct = lazy.clone();
        drop(eval.relin(&mut ct));
    });
    products(&eval, &a, &b)?;

    let compacts: Vec<CompactPoly> = (0..100)
        .map(|_| CompactPoly::from_slots(&params, &random_slots(&params)))
        .collect::<Result<_, _>>()?;
    let from_slots = time_ms(reps, || drop(CompactPoly::from_slots(&params, &slots)));
    let to_plain = time_ms(reps, || drop(compacts[0].to_plain(&params)));
    let plains = compacts
        .iter()
        .map(|c| c.to_plain(&params))
        .collect::<Result<Vec<_>, _>>()?;
    let cts: Vec<Ciphertext> = (0..100)
        .map(|_| sk.encrypt_slots(&random_slots(&params)))
        .collect::<Result<_, _>>()?;
    let ct_refs: Vec<&Ciphertext> = cts.iter().collect();
    let pt_refs: Vec<_> = plains.iter().collect();
    let dot = time_ms(5, || drop(eval.dot(&ct_refs, &pt_refs)));
    lazy_dot(&eval, &cts, &pt_refs)?;

    let product = eval.mul_relin(&a, &b)?;
    let to_lowest = time_ms(reps, || {
        let mut ct = product.clone();
        drop(eval.to_lowest(&mut ct));
    });
    let mut low = product.clone();
    eval.to_lowest(&mut low)?;
    let decrypt = time_ms(reps, || drop(sk.decrypt_slots(&low)));
    let decrypt_query = time_ms(reps, || drop(sk.decrypt_slots(&product)));
    dropped_results(&sk, &low)?;

    println!("  encrypt               {encrypt:8.2} ms");
    println!("  encode / decode query {encode:8.2} / {decode:.2} ms");
    println!("  ct x ct + relin       {mul_relin:8.2} ms");
    println!("  ct x ct (lazy) | relin{mul_lazy:8.2} | {relin:.2} ms");
    println!("  dot, 100 terms        {dot:8.2} ms");
    println!("  CompactPoly from slots{from_slots:8.2} ms, to_plain {to_plain:.2} ms");
    println!("  to_lowest             {to_lowest:8.2} ms");
    println!("  decrypt lowest | query{decrypt:8.2} | {decrypt_query:.2} ms");
    println!(
        "  bytes: query ct {}, result ct {}, relin key {}, compact poly {}, plain poly {}",
        wire::query_ct_size(&params),
        wire::result_ct_size(&params),
        wire::relin_key_size(&params),
        compacts[0].byte_size(),
        plains[0].byte_size()
    );
    Ok(())
}

/// Best of three alternating rounds of `reps` runs each, for `a` then `b`:
/// alternating keeps a loaded machine from favouring one side.
fn compare_ms(reps: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut best_a, mut best_b) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        best_a = best_a.min(time_ms(reps, &mut a));
        best_b = best_b.min(time_ms(reps, &mut b));
    }
    (best_a, best_b)
}

/// ct×ct: fhe's multiplicator against products of prepared factors.
fn products(eval: &Evaluator, a: &Ciphertext, b: &Ciphertext) -> Result<(), HeError> {
    let (pa, pb) = (eval.prepare(a)?, eval.prepare(b)?);
    let prepare = time_ms(20, || drop(eval.prepare(a)));
    let (plain, prepared) = compare_ms(
        10,
        || drop(eval.mul_relin(a, b)),
        || drop(eval.mul_prepared(&pa, &pb)),
    );
    let (lazy, prepared_lazy) = compare_ms(
        10,
        || drop(eval.mul_lazy(a, b)),
        || drop(eval.mul_prepared_lazy(&pa, &pb)),
    );
    println!("  ct x ct + relin: mul_relin {plain:.2} ms, mul_prepared {prepared:.2} ms");
    println!("  ct x ct (3-part): mul_lazy {lazy:.2} ms, mul_prepared_lazy {prepared_lazy:.2} ms");
    println!(
        "  prepare {prepare:.2} ms per factor, {} bytes",
        pa.byte_size()
    );
    Ok(())
}

/// The same 100-term dot product over relinearized and over 3-part terms,
/// plus the one relinearization a 3-part result needs.
fn lazy_dot(
    eval: &Evaluator,
    cts: &[Ciphertext],
    pts: &[&psikit_he::PlainPoly],
) -> Result<(), HeError> {
    let three: Vec<Ciphertext> = cts
        .chunks(2)
        .flat_map(|pair| {
            [
                eval.mul_lazy(&pair[0], &pair[1]),
                eval.mul_lazy(&pair[1], &pair[0]),
            ]
        })
        .collect::<Result<_, _>>()?;
    let two_refs: Vec<&Ciphertext> = cts.iter().collect();
    let three_refs: Vec<&Ciphertext> = three.iter().collect();
    let (two_part, three_part) = compare_ms(
        3,
        || drop(eval.dot(&two_refs, pts)),
        || drop(eval.dot(&three_refs, pts)),
    );
    let result = eval.dot(&three_refs, pts)?;
    let relin = time_ms(10, || {
        let mut ct = result.clone();
        drop(eval.relin(&mut ct));
    });
    println!(
        "  dot, 100 terms: 2-part {two_part:.2} ms, 3-part {three_part:.2} ms (+ relin {relin:.2} ms)"
    );
    Ok(())
}

/// Result ciphertext bytes and codec times with the safe number of low bits
/// dropped.
fn dropped_results(sk: &SecretKey, low: &Ciphertext) -> Result<(), HeError> {
    let params = sk.params();
    let bits = wire::safe_drop_bits(params);
    let bytes = wire::encode_result_ct_dropped(low, bits)?;
    let encode = time_ms(20, || drop(wire::encode_result_ct_dropped(low, bits)));
    let decode = time_ms(20, || {
        drop(wire::decode_result_ct_dropped(params, &bytes, bits))
    });
    let back = wire::decode_result_ct_dropped(params, &bytes, bits)?;
    println!(
        "  result ct: {} bytes, {} with {bits} bits dropped (encode {encode:.2} / decode \
         {decode:.2} ms; budget {} -> {} bits)",
        wire::result_ct_size(params),
        bytes.len(),
        sk.noise_budget_bits(low)?,
        sk.noise_budget_bits(&back)?
    );
    Ok(())
}

fn main() -> Result<(), HeError> {
    run(4096, 40961, &[40, 32, 32])?;
    run(8192, 65537, &[56, 48, 48])?;
    run(8192, 65537, &[56, 56, 56, 50])?;
    Ok(())
}
