use psikit_primitives::oprf::{self, ServerKey};
use rand_core::OsRng;
use std::time::Instant;
fn main() {
    let n = 8192;
    let items: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("user{i}@example.com").into_bytes())
        .collect();
    let key = ServerKey::generate(&mut OsRng);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        for _ in 0..3 {
            let t = Instant::now();
            let (blinds, blinded) = oprf::blind_batch(&items, &mut OsRng).unwrap();
            let tb = t.elapsed();
            let bytes = oprf::BlindedElement::encode_concatenated(&blinded);
            let t = Instant::now();
            let parsed = oprf::BlindedElement::decode_concatenated(&bytes).unwrap();
            let tp = t.elapsed();
            let t = Instant::now();
            let ev = key.blind_evaluate_batch(&parsed);
            let te = t.elapsed();
            let t = Instant::now();
            let out = oprf::finalize_batch(&items, &blinds, &ev).unwrap();
            let tf = t.elapsed();
            let t = Instant::now();
            let direct = key.evaluate_batch(&items).unwrap();
            let td = t.elapsed();
            assert_eq!(out, direct);
            let rate = |d: std::time::Duration| n as f64 / d.as_secs_f64();
            println!("blind {:.0}/s  parse {:.0}/s  blind_eval {:.0}/s  finalize {:.0}/s  evaluate {:.0}/s",
                rate(tb), rate(tp), rate(te), rate(tf), rate(td));
        }
    });
}
