//! What every protocol's message tests check on each of its messages.

use std::fmt::Debug;

use psikit_transport::Message;

/// Checks that `message` travels in a frame of its protocol and kind whose
/// payload is exactly `payload` (the layout on the wire), that it decodes
/// back to itself within `bounds`, and that the payload cut short or with
/// a trailing byte is refused.
pub(crate) fn check_message<M>(message: &M, bounds: M::Bounds<'_>, payload: &[u8])
where
    M: Message + PartialEq + Debug,
{
    let name = std::any::type_name::<M>();
    let frame = message.to_frame();
    assert_eq!(
        (frame.protocol, frame.kind),
        (M::PROTOCOL, M::KIND),
        "{name}"
    );
    assert_eq!(frame.payload, payload, "layout of {name}");
    assert_eq!(&M::decode(payload, bounds).expect(name), message);
    // Every prefix of a short payload, about 64 of a long one, and always
    // the payload less its last byte.
    let step = payload.len().div_ceil(64).max(1);
    for cut in (0..payload.len())
        .step_by(step)
        .chain(payload.len().checked_sub(1))
    {
        assert!(
            M::decode(&payload[..cut], bounds).is_err(),
            "{name} cut to {cut} bytes"
        );
    }
    let mut long = payload.to_vec();
    long.push(0);
    assert!(
        M::decode(&long, bounds).is_err(),
        "{name} with a trailing byte"
    );
}

/// `n` valid blinded elements and their evaluations, from a fixed seed
/// (for the messages of the families with an OPRF server).
#[cfg(feature = "unbalanced")]
pub(crate) fn oprf_elements(
    n: usize,
) -> (
    Vec<psikit_primitives::oprf::BlindedElement>,
    Vec<psikit_primitives::oprf::EvaluatedElement>,
) {
    use psikit_primitives::oprf::{self, ServerKey};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    let mut rng = StdRng::seed_from_u64(7);
    let inputs: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 3]).collect();
    let (_, blinded) = oprf::blind_batch(&inputs, &mut rng).expect("blinding");
    let evaluated = ServerKey::generate(&mut rng).blind_evaluate_batch(&blinded);
    (blinded, evaluated)
}
