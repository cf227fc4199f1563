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

/// RFC 9496 Appendix A.1: the encodings of `0·B` to `15·B`.
const GENERATOR_MULTIPLES: [&str; 16] = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76",
    "6a493210f7499cd17fecb510ae0cea23a110e8d5b901f8acadd3095c73a3b919",
    "94741f5d5d52755ece4f23f044ee27d5d1ea1e2bd196b462166b16152a9d0259",
    "da80862773358b466ffadfe0b3293ab3d9fd53c5ea6c955358f568322daf6a57",
    "e882b131016b52c1d3337080187cf768423efccbb517bb495ab812c4160ff44e",
    "f64746d3c92b13050ed8d80236a7f0007c3b3f962f5ba793d19a601ebb1df403",
    "44f53520926ec81fbd5a387845beb7df85a96a24ece18738bdcfa6a7822a176d",
    "903293d8f2287ebe10e2374dc1a53e0bc887e592699f02d077d5263cdd55601c",
    "02622ace8f7303a31cafc63f8fc48fdc16e1c8c8d234b2f0d6685282a9076031",
    "20706fd788b2720a1ed2a5dad4952b01f413bcf0e7564de8cdc816689e2db95f",
    "bce83f8ba5dd2fa572864c24ba1810f9522bc6004afe95877ac73241cafdab42",
    "e4549ee16b9aa03099ca208c67adafcafa4c3f3e4e5303de6026e3ca8ff84460",
    "aa52e000df2e16f55fb1032fc33bc42742dad6bd5a8fc0be0167436c5948501f",
    "46376b80f409b29dc2b5f6f0c52591990896e5716f41477cd30085ab7f10301e",
    "e0c418f7c8d9c4cdd7395b93ea124f3ad99021bb681dfc3302a9d99a2e53e64e",
];

/// RFC 9496 Appendix A.2: encodings every decoder must refuse
/// (non-canonical field elements, negative ones, non-square `x^2`, negative
/// `x·y`, and `s = -1`).
const INVALID_ENCODINGS: [&str; 29] = [
    "00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "f3ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "ed57ffd8c914fb201471d1c3d245ce3c746fcbe63a3679d51b6a516ebebe0e20",
    "c34c4e1826e5d403b78e246e88aa051c36ccf0aafebffe137d148a2bf9104562",
    "c940e5a4404157cfb1628b108db051a8d439e1a421394ec4ebccb9ec92a8ac78",
    "47cfc5497c53dc8e61c91d17fd626ffb1c49e2bca94eed052281b510b1117a24",
    "f1c6165d33367351b0da8f6e4511010c68174a03b6581212c71c0e1d026c3c72",
    "87260f7a2f12495118360f02c26a470f450dadf34a413d21042b43b9d93e1309",
    "26948d35ca62e643e26a83177332e6b6afeb9d08e4268b650f1f5bbd8d81d371",
    "4eac077a713c57b4f4397629a4145982c661f48044dd3f96427d40b147d9742f",
    "de6a7b00deadc788eb6b6c8d20c0ae96c2f2019078fa604fee5b87d6e989ad7b",
    "bcab477be20861e01e4a0e295284146a510150d9817763caf1a6f4b422d67042",
    "2a292df7e32cababbd9de088d1d1abec9fc0440f637ed2fba145094dc14bea08",
    "f4a9e534fc0d216c44b218fa0c42d99635a0127ee2e53c712f70609649fdff22",
    "8268436f8c4126196cf64b3c7ddbda90746a378625f9813dd9b8457077256731",
    "2810e5cbc2cc4d4eece54f61c6f69758e289aa7ab440b3cbeaa21995c2f4232b",
    "3eb858e78f5a7254d8c9731174a94f76755fd3941c0ac93735c07ba14579630e",
    "a45fdc55c76448c049a1ab33f17023edfb2be3581e9c7aade8a6125215e04220",
    "d483fe813c6ba647ebbfd3ec41adca1c6130c2beeee9d9bf065c8d151c5f396e",
    "8a2e1d30050198c65a54483123960ccc38aef6848e1ec8f5f780e8523769ba32",
    "32888462f8b486c68ad7dd9610be5192bbeaf3b443951ac1a8118419d9fa097b",
    "227142501b9d4355ccba290404bde41575b037693cef1f438c47f8fbf35d1165",
    "5c37cc491da847cfeb9281d407efc41e15144c876e0170b499a96a22ed31e01e",
    "445425117cb8c90edcbc7c1cc0e74f747f2c1efa5630a967c64f287792a48a4b",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
];

/// RFC 9496 Appendix A.3: the element derived from SHA-512 of each string.
const DERIVED_ELEMENTS: [(&str, &str); 7] = [
    (
        "Ristretto is traditionally a short shot of espresso coffee",
        "3066f82a1a747d45120d1740f14358531a8f04bbffe6a819f86dfe50f44a0a46",
    ),
    (
        "made with the normal amount of ground coffee but extracted with",
        "f26e5b6f7d362d2d2a94c5d0e7602cb4773c95a2e5c31a64f133189fa76ed61b",
    ),
    (
        "about half the amount of water in the same amount of time",
        "006ccd2a9e6867e6a2c5cea83d3302cc9de128dd2a9a57dd8ee7b9d7ffe02826",
    ),
    (
        "by using a finer grind.",
        "f8f0c87cf237953c5890aec3998169005dae3eca1fbb04548c635953c817f92a",
    ),
    (
        "This produces a concentrated shot of coffee per volume.",
        "ae81e7dedf20a497e10c304a765c1767a42d6e06029758d2d7e8ef7cc4c41179",
    ),
    (
        "Just pulling a normal shot short will produce a weaker shot",
        "e2705652ff9f5e44d3e841bf1c251cf7dddb77d140870d1ab2ed64f1a9ce8628",
    ),
    (
        "and is not a Ristretto as some believe.",
        "80bd07262511cdde4863f8a7434cef696750681cb9510eea557088f76d9e5065",
    ),
];

#[test]
fn rfc9496_generator_multiples_decode_and_encode_through_the_wire_decoder() {
    use curve25519_dalek::constants::RISTRETTO_BASEPOINT_POINT;
    // 0·B is the identity, which RFC 9497's DeserializeElement refuses.
    assert!(matches!(
        BlindedElement::from_bytes(&unhex(GENERATOR_MULTIPLES[0])),
        Err(OprfError::IdentityElement)
    ));
    for (i, hex) in GENERATOR_MULTIPLES.iter().enumerate().skip(1) {
        let want = RISTRETTO_BASEPOINT_POINT * Scalar::from(i as u64);
        let decoded = BlindedElement::from_bytes(&unhex(hex)).expect("a valid element");
        assert_eq!(decoded.point(), want, "{i}·B");
        assert_eq!(
            hex::encode(BlindedElement::from_point(want).to_bytes()),
            *hex,
            "{i}·B"
        );
    }
}

#[test]
fn rfc9496_invalid_encodings_are_refused_one_by_one_and_concatenated() {
    let valid = unhex(GENERATOR_MULTIPLES[1]);
    for hex in INVALID_ENCODINGS {
        assert!(
            matches!(
                BlindedElement::from_bytes(&unhex(hex)),
                Err(OprfError::InvalidElement)
            ),
            "{hex}"
        );
        // Between two valid elements, a batch names the bad one's index.
        let batch = [valid.clone(), unhex(hex), valid.clone()].concat();
        assert!(
            matches!(
                BlindedElement::decode_concatenated(&batch),
                Err(OprfError::BatchItem { index: 1, .. })
            ),
            "{hex}"
        );
    }
}

#[test]
fn rfc9496_element_derivation_matches_map_to_group() {
    use sha2::{Digest, Sha512};
    for (text, want) in DERIVED_ELEMENTS {
        let uniform: [u8; 64] = Sha512::digest(text.as_bytes()).into();
        let got = map_to_group(&uniform).compress();
        assert_eq!(hex::encode(got.as_bytes()), want, "{text}");
    }
}
