//! Silent OT's small VOLEs as circuit PSI consumes them: a chunk of
//! random 1-out-of-`2^bits` OTs (made by [`super::rot::Rots`]) and the
//! bits of each message its consumer keeps.

use psikit_ot::gf128;
use zeroize::Zeroizing;

use super::bits::Bits;
use super::pads::{hashed_low_bits, hashed_lows, hashed_pads};

/// A chunk of silent small VOLEs (`c` of `bits ≤ 4` bits), each a random
/// 1-out-of-`2^bits` OT ([`psikit_ot::silent::SmallVoleOutput`]).
pub enum SmallChunk {
    /// Sender: `b` and `Δ`; message `j` of correlation `i` is
    /// `H(b[i] ⊕ j·Δ)`.
    Sent {
        b: Zeroizing<Vec<u128>>,
        delta: u128,
        bits: u32,
    },
    /// Receiver: its indices `c` and `a`; its message is `H(a[i])`.
    Received {
        c: Zeroizing<Vec<u8>>,
        a: Zeroizing<Vec<u128>>,
        bits: u32,
    },
}

/// The low `bits` bits of each message of a [`SmallChunk`]'s OTs
/// (`bits` ≤ 4: all of an OT's messages fit one word).
pub enum SmallMasks {
    /// Bits `bits·j .. bits·(j + 1)` of word `i`: message `j` of OT `i`.
    Sent(Vec<u64>),
    /// Each OT's index and the low bits of its message.
    Received { c: Vec<u8>, masks: Vec<u8> },
}

/// One bit of each message of a [`SmallChunk`]'s OTs.
pub enum SmallPads {
    /// Bit `j` of word `i`: bit 0 of message `j` of OT `i`.
    Sent(Vec<u16>),
    /// Each OT's index and bit 0 of its message.
    Received { c: Vec<u8>, pads: Bits },
}

impl SmallChunk {
    /// Bit 0 of every message: `2^bits` hashes per OT at the sender, one
    /// at the receiver.
    pub fn pads(self) -> SmallPads {
        match self {
            SmallChunk::Sent { b, delta, bits } => {
                SmallPads::Sent(hashed_pads(&b, &offsets(delta, bits), 1, |w| w as u16))
            }
            SmallChunk::Received { c, a, .. } => SmallPads::Received {
                c: c.to_vec(),
                pads: hashed_low_bits(&a, 0),
            },
        }
    }

    /// The low `bits` bits of every message (the OT's own width): `2^bits`
    /// hashes per OT at the sender, one at the receiver.
    pub fn masks(self) -> SmallMasks {
        match self {
            SmallChunk::Sent { b, delta, bits } => {
                SmallMasks::Sent(hashed_pads(&b, &offsets(delta, bits), bits, |w| w))
            }
            SmallChunk::Received { c, a, bits } => SmallMasks::Received {
                c: c.to_vec(),
                masks: hashed_lows(&a, bits),
            },
        }
    }
}

/// The offsets `j·Δ` of a small VOLE's `2^bits` messages.
fn offsets(delta: u128, bits: u32) -> Vec<u128> {
    (0..1u128 << bits).map(|j| gf128::mul(j, delta)).collect()
}
