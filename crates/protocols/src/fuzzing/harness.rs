//! What the fuzz targets and their seeds share: the fuzzed channel and its
//! limits, the selector split, the round-trip check, and the fixed keys
//! and parameters decoders are run against.

use std::future::Future;
use std::io::Cursor;
use std::pin::pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use psikit_he::HeParams;
use psikit_primitives::oprf::ServerKey;
use psikit_transport::{Channel, Limits};

pub(crate) use crate::common::messages::round_trip;

use crate::cpsi::epc::{EpcParams, EpcReceiver, EpcSender};
use crate::he_psi::params::PsiParams;

/// Frame limit of the fuzzed channel: large enough for every seed, small
/// enough that a frame announcing the limit costs little per run.
pub(crate) const MAX_FRAME: u32 = 1 << 20;
/// Largest chunked transfer the fuzzed channel accepts.
pub(crate) const MAX_TRANSFER: u64 = 1 << 20;
/// Items per OPRF request the fuzzed decoders accept.
pub(crate) const MAX_ITEMS: u32 = 8;
/// OPRF answers the fuzzed client expects (the seeds carry this many).
pub(crate) const EXPECTED_ANSWERS: usize = 3;
/// Slots of the filter a fuzzed delta is decoded against.
pub(crate) const DELTA_SLOTS: u64 = 4096;
/// Largest filter the fuzzed decoders accept, in bytes.
pub(crate) const MAX_FILTER: usize = 1 << 20;

/// The first byte (which decoder) and the rest (its input).
pub(crate) fn split(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(&which, rest)| (which, rest))
}

/// Runs a future over in-memory data to completion. Nothing it awaits can
/// be pending (an unclocked channel over a buffer), so one poll does.
pub(crate) fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("an in-memory channel never waits"),
    }
}

/// A channel whose peer sent `stream` and then closed.
pub(crate) fn channel(stream: &[u8]) -> Channel {
    let limits = Limits {
        max_frame_bytes: MAX_FRAME,
        ..Limits::default()
    };
    Channel::unclocked(Cursor::new(stream.to_vec()), limits)
}

/// The OPRF key filter states are decoded under (a state holds its key's
/// digest, so the seeds are built under the same key).
pub(crate) fn filter_key() -> ServerKey {
    ServerKey::from_bytes(&[1; 32]).expect("a valid scalar")
}

/// The parameters the HE messages are decoded against (APSI's 256K-1024
/// set: n = 4096).
pub(crate) fn he_params() -> &'static HeParams {
    static PARAMS: OnceLock<HeParams> = OnceLock::new();
    PARAMS.get_or_init(|| {
        let json = crate::he_psi::presets::apsi_preset("256K-1024").expect("a preset");
        PsiParams::from_apsi_json(json)
            .and_then(|p| p.he_params())
            .expect("the preset's parameters")
    })
}

/// The EPC parameters (ℓ = 8, ℓ_c = 16: `u = 2`, the smallest batches)
/// and the two parties the EPC messages are decoded against.
pub(crate) fn epc_parties() -> &'static (EpcParams, EpcSender, EpcReceiver) {
    static PARTIES: OnceLock<(EpcParams, EpcSender, EpcReceiver)> = OnceLock::new();
    PARTIES.get_or_init(|| {
        let params = EpcParams::new(8, 16, 4096, 40).expect("EPC parameters");
        let (sender, key) = EpcSender::new(&params).expect("an EPC key pair");
        let receiver = EpcReceiver::new(&params, &key).expect("the EPC public key");
        (params, sender, receiver)
    })
}
