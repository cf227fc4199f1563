use super::client::*;
use super::hash::*;
use super::suite::*;
use super::wire::*;
use super::*;
use curve25519_dalek::scalar::Scalar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).expect("test vector hex")
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(0x5eed)
}

/// Test-only query with a chosen blind, to reproduce the RFC vectors.
fn blind_with_scalar_for_test(input: &[u8], blind_le: &str) -> (Blind, BlindedElement) {
    let bytes: [u8; 32] = unhex(blind_le).try_into().expect("32-byte blind");
    let r = Option::<Scalar>::from(Scalar::from_canonical_bytes(bytes)).expect("canonical blind");
    let point = hash_input(input).expect("valid input");
    blind_with(&point, r)
}

fn concat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

#[test]
fn domain_separation_tags_follow_the_rfc() {
    assert_eq!(CONTEXT_STRING, b"OPRFV1-\x00-ristretto255-SHA512");
    assert_eq!(HASH_TO_GROUP_DST, concat(b"HashToGroup-", CONTEXT_STRING));
    assert_eq!(
        DERIVE_KEY_PAIR_DST,
        concat(b"DeriveKeyPair", CONTEXT_STRING)
    );
}

// RFC 9380, Appendix K.3: expand_message_xmd(SHA-512),
// DST = "QUUX-V01-CS02-with-expander-SHA512-256".
#[test]
fn expand_message_xmd_matches_rfc9380_sha512_vectors() {
    let dst = b"QUUX-V01-CS02-with-expander-SHA512-256";
    let cases: [(&[u8], usize, &str); 4] = [
        (
            b"",
            32,
            "6b9a7312411d92f921c6f68ca0b6380730a1a4d982c507211a90964c394179ba",
        ),
        (
            b"abc",
            32,
            "0da749f12fbe5483eb066a5f595055679b976e93abe9be6f0f6318bce7aca8dc",
        ),
        (
            b"abcdef0123456789",
            32,
            "087e45a86e2939ee8b91100af1583c4938e0f5fc6c9db4b107b83346bc967f58",
        ),
        (
            b"",
            128,
            "41b037d1734a5f8df225dd8c7de38f851efdb45c372887be655212d07251b921\
             b052b62eaed99b46f72f2ef4cc96bfaf254ebbbec091e1a3b9e4fb5e5b619d2e\
             0c5414800a1d882b62bb5cd1778f098b8eb6cb399d5d9d18f5d5842cf5d13d7e\
             b00a7cff859b605da678b318bd0e65ebff70bec88c753b159a805d2c89c55961",
        ),
    ];
    for (msg, len, want) in cases {
        let mut out = vec![0u8; len];
        expand_message_xmd(msg, dst, &mut out).expect("valid arguments");
        assert_eq!(hex::encode(&out), want, "msg {:?} len {len}", msg);
    }
}

#[test]
fn expand_message_xmd_rejects_out_of_range_arguments() {
    let mut out = [0u8; 32];
    assert!(matches!(
        expand_message_xmd(b"m", &[b'x'; 256], &mut out),
        Err(OprfError::ExpandMessage(_))
    ));
    let mut big = vec![0u8; 255 * 64 + 1];
    assert!(matches!(
        expand_message_xmd(b"m", b"dst", &mut big),
        Err(OprfError::ExpandMessage(_))
    ));
    let mut max = vec![0u8; 255 * 64];
    assert!(expand_message_xmd(b"m", &[b'x'; 255], &mut max).is_ok());
}

// RFC 9497, Appendix A.1.1 (OPRF(ristretto255, SHA-512), mode 0).
const SEED: &str = "a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3";
const KEY_INFO: &str = "74657374206b6579"; // "test key"
const SK_SM: &str = "5ebcea5ee37023ccb9fc2d2019f9d7737be85591ae8652ffa9ef0f4d37063b0e";
const RFC_BLIND: &str = "64d37aed22a27f5191de1c1d69fadb899d8862b58eb4220029e036ec4c1f6706";

struct Vector {
    input: &'static str,
    blinded: &'static str,
    evaluated: &'static str,
    output: &'static str,
}

const VECTORS: [Vector; 2] = [
    Vector {
        input: "00",
        blinded: "609a0ae68c15a3cf6903766461307e5c8bb2f95e7e6550e1ffa2dc99e412803c",
        evaluated: "7ec6578ae5120958eb2db1745758ff379e77cb64fe77b0b2d8cc917ea0869c7e",
        output: "527759c3d9366f277d8c6020418d96bb393ba2afb20ff90df23fb7708264e2f3\
                 ab9135e3bd69955851de4b1f9fe8a0973396719b7912ba9ee8aa7d0b5e24bcf6",
    },
    Vector {
        input: "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a",
        blinded: "da27ef466870f5f15296299850aa088629945a17d1f5b7f5ff043f76b3c06418",
        evaluated: "b4cbf5a4f1eeda5a63ce7b77c7d23f461db3fcab0dd28e4e17cecb5c90d02c25",
        output: "f4a74c9c592497375e796aa837e907b1a045d34306a749db9f34221f7e750cb4\
                 f2a6413a6bf6fa5e19ba6348eb673934a722a7ede2e7621306d18951e7cf2c73",
    },
];

fn rfc_key() -> ServerKey {
    let seed: [u8; 32] = unhex(SEED).try_into().expect("32-byte seed");
    ServerKey::derive(&seed, &unhex(KEY_INFO)).expect("derivable")
}

#[test]
fn derive_key_pair_matches_rfc9497() {
    assert_eq!(hex::encode(rfc_key().to_bytes()), SK_SM);
}

#[test]
fn rfc9497_vectors_through_the_client_server_flow() {
    let key = ServerKey::from_bytes(&unhex(SK_SM)).expect("valid key");
    for v in &VECTORS {
        let input = unhex(v.input);
        let (blind, blinded) = blind_with_scalar_for_test(&input, RFC_BLIND);
        assert_eq!(hex::encode(blinded.to_bytes()), v.blinded);

        // Go through the wire encoding as a real server would.
        let received = BlindedElement::from_bytes(blinded.as_bytes()).expect("valid element");
        let evaluated = key.blind_evaluate(&received);
        assert_eq!(hex::encode(evaluated.to_bytes()), v.evaluated);

        let returned = EvaluatedElement::from_bytes(&evaluated.to_bytes()).expect("valid element");
        let output = finalize(&input, &blind, &returned).expect("finalize");
        assert_eq!(hex::encode(output), v.output);
    }
}

#[test]
fn rfc9497_vectors_through_server_evaluate() {
    let key = rfc_key();
    for v in &VECTORS {
        let output = key.evaluate(&unhex(v.input)).expect("evaluate");
        assert_eq!(hex::encode(output), v.output);
    }
    let inputs: Vec<Vec<u8>> = VECTORS.iter().map(|v| unhex(v.input)).collect();
    let batch = key.evaluate_batch(&inputs).expect("evaluate_batch");
    for (out, v) in batch.iter().zip(&VECTORS) {
        assert_eq!(hex::encode(out), v.output);
    }
}

#[test]
fn oblivious_flow_equals_direct_evaluation_for_random_inputs() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    for len in [0usize, 1, 17, 64, 1000, MAX_INPUT_LEN] {
        let input: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let (blind, blinded) = super::blind(&input, &mut rng).expect("blind");
        let evaluated = key.blind_evaluate(&blinded);
        let output = finalize(&input, &blind, &evaluated).expect("finalize");
        assert_eq!(output, key.evaluate(&input).expect("evaluate"), "len {len}");
    }
}

#[test]
fn each_query_uses_a_fresh_blind() {
    let mut rng = rng();
    let (_, first) = super::blind(b"same input", &mut rng).expect("blind");
    let (_, second) = super::blind(b"same input", &mut rng).expect("blind");
    assert_ne!(first, second);
}

fn random_inputs(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = rng.gen_range(0..40);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

#[test]
fn batch_apis_equal_single_item_apis() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    // Spans several finalize chunks, with a partial last one.
    let inputs = random_inputs(&mut rng, 2 * MAX_CHUNK + 37);

    let direct: Vec<Output> = inputs
        .iter()
        .map(|x| key.evaluate(x).expect("evaluate"))
        .collect();
    assert_eq!(key.evaluate_batch(&inputs).expect("evaluate_batch"), direct);

    let (blinds, blinded) = blind_batch(&inputs, &mut rng).expect("blind_batch");
    assert_eq!((blinds.len(), blinded.len()), (inputs.len(), inputs.len()));
    let evaluated = key.blind_evaluate_batch(&blinded);
    let single: Vec<EvaluatedElement> = blinded.iter().map(|b| key.blind_evaluate(b)).collect();
    assert_eq!(evaluated, single);
    // Batch paths build point and encoding separately; they must agree.
    for (b, z) in blinded.iter().zip(&evaluated) {
        assert_eq!(b.point().compress().to_bytes(), b.to_bytes());
        assert_eq!(z.point().compress().to_bytes(), z.to_bytes());
    }

    let outputs = finalize_batch(&inputs, &blinds, &evaluated).expect("finalize_batch");
    assert_eq!(outputs, direct);
    for i in [0, MAX_CHUNK, inputs.len() - 1] {
        let one = finalize(&inputs[i], &blinds[i], &evaluated[i]).expect("finalize");
        assert_eq!(one, direct[i]);
    }
}

#[test]
fn batch_apis_accept_empty_batches() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    let none: [&[u8]; 0] = [];
    assert!(key.evaluate_batch(&none).expect("empty").is_empty());
    let (blinds, blinded) = blind_batch(&none, &mut rng).expect("empty");
    assert!(blinds.is_empty() && blinded.is_empty());
    assert!(key.blind_evaluate_batch(&blinded).is_empty());
    assert!(finalize_batch(&none, &blinds, &[])
        .expect("empty")
        .is_empty());
}

#[test]
fn different_keys_give_different_outputs() {
    let mut rng = rng();
    let a = ServerKey::generate(&mut rng);
    let b = ServerKey::generate(&mut rng);
    assert_ne!(a.to_bytes(), b.to_bytes());
    assert_ne!(a.evaluate(b"x").expect("a"), b.evaluate(b"x").expect("b"));

    let seed = [7u8; 32];
    let c = ServerKey::derive(&seed, b"one").expect("derive");
    let d = ServerKey::derive(&seed, b"two").expect("derive");
    assert_ne!(c.evaluate(b"x").expect("c"), d.evaluate(b"x").expect("d"));
    // Different inputs under one key differ too.
    assert_ne!(c.evaluate(b"x").expect("c"), c.evaluate(b"y").expect("c"));
}

#[test]
fn element_decoding_rejects_wrong_lengths() {
    let good = BlindedElement::from_point(hash_to_group(b"p")).to_bytes();
    for len in [0usize, 1, 31, 33, 64] {
        let bytes: Vec<u8> = good.iter().copied().cycle().take(len).collect();
        let want = OprfError::WrongLength {
            what: "blinded element",
            expected: 32,
            actual: len,
        };
        assert_eq!(BlindedElement::from_bytes(&bytes), Err(want));
        assert!(matches!(
            EvaluatedElement::from_bytes(&bytes),
            Err(OprfError::WrongLength { actual, .. }) if actual == len
        ));
    }
}

#[test]
fn element_decoding_rejects_identity_and_non_canonical_encodings() {
    assert_eq!(
        BlindedElement::from_bytes(&[0u8; 32]),
        Err(OprfError::IdentityElement)
    );
    assert_eq!(
        EvaluatedElement::from_bytes(&[0u8; 32]),
        Err(OprfError::IdentityElement)
    );

    // s = p = 2^255 - 19: reduces to 0, so it is a non-canonical identity.
    let mut p = [0xffu8; 32];
    p[0] = 0xed;
    p[31] = 0x7f;
    // s = 1 is "negative" (odd), which canonical encodings never are.
    let mut one = [0u8; 32];
    one[0] = 1;
    // A valid encoding with the unused top bit set.
    let mut high_bit = hash_to_group(b"q").compress().to_bytes();
    high_bit[31] |= 0x80;
    for bad in [p, one, high_bit, [0xff; 32]] {
        assert_eq!(
            BlindedElement::from_bytes(&bad),
            Err(OprfError::InvalidElement)
        );
        assert_eq!(
            EvaluatedElement::from_bytes(&bad),
            Err(OprfError::InvalidElement)
        );
    }
}

#[test]
fn element_decoding_survives_random_garbage() {
    let mut rng = rng();
    let mut rejected = 0;
    for _ in 0..2000 {
        let bytes: [u8; 32] = rng.gen();
        match BlindedElement::from_bytes(&bytes) {
            Ok(e) => assert_eq!(e.to_bytes(), bytes, "accepted bytes must round-trip"),
            Err(_) => rejected += 1,
        }
    }
    // Most random strings are not valid ristretto255 encodings.
    assert!(rejected > 1000, "only {rejected} of 2000 rejected");
}

#[test]
fn elements_round_trip_singly_and_concatenated() {
    let mut rng = rng();
    let inputs = random_inputs(&mut rng, 10);
    let (_, blinded) = blind_batch(&inputs, &mut rng).expect("blind_batch");
    for b in &blinded {
        assert_eq!(BlindedElement::from_bytes(b.as_bytes()).as_ref(), Ok(b));
    }
    let buf = BlindedElement::encode_concatenated(&blinded);
    assert_eq!(buf.len(), 10 * ELEMENT_LEN);
    assert_eq!(
        BlindedElement::decode_concatenated(&buf).expect("decode"),
        blinded
    );
    assert!(BlindedElement::decode_concatenated(&[])
        .expect("empty")
        .is_empty());
}

#[test]
fn concatenated_decoding_reports_ragged_buffers_and_bad_items() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    let (_, blinded) = blind_batch(&[b"a", b"b", b"c"], &mut rng).expect("blind_batch");
    let mut buf = EvaluatedElement::encode_concatenated(&key.blind_evaluate_batch(&blinded));
    assert_eq!(
        EvaluatedElement::decode_concatenated(&buf[..95]),
        Err(OprfError::RaggedElements { len: 95 })
    );
    buf[64..96].fill(0);
    assert_eq!(
        EvaluatedElement::decode_concatenated(&buf),
        Err(OprfError::BatchItem {
            index: 2,
            source: Box::new(OprfError::IdentityElement)
        })
    );
}

#[test]
fn server_key_round_trips_and_rejects_bad_encodings() {
    let key = ServerKey::generate(&mut rng());
    let again = ServerKey::from_bytes(&key.to_bytes()).expect("round trip");
    assert_eq!(again.to_bytes(), key.to_bytes());

    assert_eq!(
        ServerKey::from_bytes(&[0u8; 32]).err(),
        Some(OprfError::ZeroScalar)
    );
    // The group order L itself: L - 1 = -1, plus one on the low byte.
    let mut order = (-Scalar::ONE).to_bytes();
    order[0] += 1;
    assert_eq!(
        ServerKey::from_bytes(&order).err(),
        Some(OprfError::NonCanonicalScalar)
    );
    assert_eq!(
        ServerKey::from_bytes(&[0xff; 32]).err(),
        Some(OprfError::NonCanonicalScalar)
    );
    assert!(ServerKey::from_bytes(&(-Scalar::ONE).to_bytes()).is_ok());
    assert_eq!(
        ServerKey::from_bytes(&[1u8; 31]).err(),
        Some(OprfError::WrongLength {
            what: "server key",
            expected: 32,
            actual: 31
        })
    );
}

#[test]
fn derive_rejects_oversized_info() {
    let info = vec![0u8; MAX_INPUT_LEN + 1];
    assert_eq!(
        ServerKey::derive(&[1; 32], &info).err(),
        Some(OprfError::InfoTooLong {
            len: MAX_INPUT_LEN + 1
        })
    );
}

#[test]
fn oversized_inputs_are_rejected_everywhere() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    let long = vec![0u8; MAX_INPUT_LEN + 1];
    let too_long = OprfError::InputTooLong { len: long.len() };

    assert_eq!(key.evaluate(&long), Err(too_long.clone()));
    assert_eq!(super::blind(&long, &mut rng).err(), Some(too_long.clone()));
    let (blind, blinded) = super::blind(b"ok", &mut rng).expect("blind");
    let evaluated = key.blind_evaluate(&blinded);
    assert_eq!(finalize(&long, &blind, &evaluated), Err(too_long.clone()));

    let inputs = vec![b"ok".to_vec(), b"ok".to_vec(), long];
    let at_two = OprfError::BatchItem {
        index: 2,
        source: Box::new(too_long),
    };
    assert_eq!(key.evaluate_batch(&inputs), Err(at_two.clone()));
    assert_eq!(blind_batch(&inputs, &mut rng).err(), Some(at_two.clone()));
    let (blinds, blinded) = blind_batch(&inputs[..2], &mut rng).expect("blind_batch");
    let mut evaluated = key.blind_evaluate_batch(&blinded);
    let (b3, e3) = super::blind(b"third", &mut rng).expect("blind");
    let blinds: Vec<Blind> = blinds.into_iter().chain([b3]).collect();
    evaluated.push(key.blind_evaluate(&e3));
    assert_eq!(finalize_batch(&inputs, &blinds, &evaluated), Err(at_two));
}

#[test]
fn finalize_batch_rejects_mismatched_lengths() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    let inputs = [b"a", b"b"];
    let (blinds, blinded) = blind_batch(&inputs, &mut rng).expect("blind_batch");
    let evaluated = key.blind_evaluate_batch(&blinded);
    assert_eq!(
        finalize_batch(&inputs, &blinds, &evaluated[..1]),
        Err(OprfError::BatchLengthMismatch {
            inputs: 2,
            blinds: 2,
            evaluated: 1
        })
    );
    assert!(finalize_batch(&inputs[..1], &blinds, &evaluated).is_err());
}

#[test]
fn a_wrong_blind_gives_a_wrong_output() {
    let mut rng = rng();
    let key = ServerKey::generate(&mut rng);
    let (_, blinded) = super::blind(b"x", &mut rng).expect("blind");
    let (other_blind, _) = super::blind(b"x", &mut rng).expect("blind");
    let evaluated = key.blind_evaluate(&blinded);
    let output = finalize(b"x", &other_blind, &evaluated).expect("finalize");
    assert_ne!(output, key.evaluate(b"x").expect("evaluate"));
}

#[test]
fn debug_output_hides_secrets() {
    let key = rfc_key();
    let shown = format!("{key:?}");
    assert_eq!(shown, "ServerKey(<secret>)");
    assert!(!shown.contains(&SK_SM[..8]));

    let (blind, blinded) = blind_with_scalar_for_test(b"\x00", RFC_BLIND);
    let shown = format!("{blind:?}");
    assert_eq!(shown, "Blind(<secret>)");
    assert!(!shown.contains(&RFC_BLIND[..8]));
    // Wire elements are public and print as hex.
    assert_eq!(
        format!("{blinded:?}"),
        format!("BlindedElement({})", VECTORS[0].blinded)
    );
}

#[test]
fn errors_have_readable_messages() {
    let e = OprfError::BatchItem {
        index: 3,
        source: Box::new(OprfError::InputTooLong { len: 70000 }),
    };
    assert_eq!(
        e.to_string(),
        "batch item 3: OPRF input is 70000 bytes; at most 65535 bytes are allowed"
    );
    assert_eq!(
        OprfError::WrongLength {
            what: "blinded element",
            expected: 32,
            actual: 5
        }
        .to_string(),
        "blinded element must be 32 bytes, got 5"
    );
}
