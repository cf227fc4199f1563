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

    let product = eval.mul_relin(&a, &b)?;
    let to_lowest = time_ms(reps, || {
        let mut ct = product.clone();
        drop(eval.to_lowest(&mut ct));
    });
    let mut low = product.clone();
    eval.to_lowest(&mut low)?;
    let decrypt = time_ms(reps, || drop(sk.decrypt_slots(&low)));
    let decrypt_query = time_ms(reps, || drop(sk.decrypt_slots(&product)));

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

fn main() -> Result<(), HeError> {
    run(4096, 40961, &[40, 32, 32])?;
    run(8192, 65537, &[56, 56, 56, 50])?;
    Ok(())
}
