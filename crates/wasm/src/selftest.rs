//! A known-answer self-test of the OPRF as this module computes it: RFC
//! 9497's ristretto255-SHA512 vectors (Appendix A.1.1, mode 0) through
//! the client's own batch blind and finalize, the RFC's key evaluating
//! in between. Blinds are random, so a pass shows that blinding and
//! unblinding cancel and that hashing to the group and finalizing match
//! the standard. A page runs it once before trusting the module (an
//! engine's WebAssembly, a bad build); the browser tests run it too.

use psikit_protocols::oprf::{blind_batch, finalize_batch, ServerKey};
use wasm_bindgen::prelude::*;

const SEED: [u8; 32] = [0xa3; 32];
const KEY_INFO: &[u8] = b"test key";

/// (input, output) pairs of the RFC's two vectors.
const VECTORS: [(&str, &str); 2] = [
    (
        "00",
        "527759c3d9366f277d8c6020418d96bb393ba2afb20ff90df23fb7708264e2f3\
         ab9135e3bd69955851de4b1f9fe8a0973396719b7912ba9ee8aa7d0b5e24bcf6",
    ),
    (
        "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
        "f4a74c9c592497375e796aa837e907b1a045d34306a749db9f34221f7e750cb4\
         f2a6413a6bf6fa5e19ba6348eb673934a722a7ede2e7621306d18951e7cf2c73",
    ),
];

/// Runs the vectors; an error says which one failed.
#[wasm_bindgen(js_name = selfTest)]
pub fn self_test() -> Result<(), JsError> {
    match failure() {
        None => Ok(()),
        Some(why) => Err(JsError::new(&format!("OPRF self-test failed: {why}"))),
    }
}

/// Why the vectors do not come out, if they do not.
pub fn failure() -> Option<String> {
    let key = match ServerKey::derive(&SEED, KEY_INFO) {
        Ok(key) => key,
        Err(e) => return Some(format!("deriving the RFC's key: {e}")),
    };
    let inputs: Vec<Vec<u8>> = VECTORS.iter().map(|(i, _)| unhex(i)).collect();
    let outputs = blind_batch(&inputs, &mut rand::rngs::OsRng).and_then(|(blinds, blinded)| {
        let evaluated = key.blind_evaluate_batch(&blinded);
        finalize_batch(&inputs, &blinds, &evaluated)
    });
    let outputs = match outputs {
        Ok(outputs) => outputs,
        Err(e) => return Some(e.to_string()),
    };
    (outputs.iter().zip(&VECTORS))
        .find(|(got, (_, want))| got.as_slice() != unhex(want).as_slice())
        .map(|(_, (input, _))| format!("the output for input {input} differs from RFC 9497's"))
}

/// The vectors' hex, which is well formed.
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_default())
        .collect()
}
