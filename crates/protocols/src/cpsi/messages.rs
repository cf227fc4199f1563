//! Wire messages of circuit PSI (protocol id [`PROTOCOL_ID`]). The OT
//! layer's messages (silent VOLE and OT, IKNP) travel under its own id.
//!
//! | kind | direction | message |
//! |------|-----------|---------|
//! | 1 | both | [`Hello`]: the agreed run ([`Agreed`]: application, OT, EPC, outputs), own set size, its value columns, longest item (union), key format |
//! | 2 | R -> S | [`Seeds`]: the hashing seed of the tables and the OPRF's OKVS seed |
//! | 3 | R -> S | [`KIND_MASKED`]: the OPRF's OKVS masked by the VOLE, `⌈b/8⌉` bytes per entry for values of `b = opprf::oprf_bits` bits |
//! | 4 | S -> R | [`HintSeed`]: the OPPRF hint's OKVS seed |
//! | 5 | S -> R | [`KIND_HINT`]: the OPPRF hint, `⌈ℓ/8⌉` bytes per entry (`8 + 8·columns` with values) |
//! | 7 | both | [`KIND_OPEN`]: one GMW layer's openings |
//! | 8 | chooser -> OT sender | [`KIND_FLIPS`]: choice corrections of derandomised OTs |
//! | 9 | OT sender -> chooser | [`KIND_PADS`]: the weighted sums' correlated-OT corrections, one word per bin and vector (`apps`) |
//! | 10 | both | [`Share`]: a party's shares of results |
//! | 11 | R -> S | [`KIND_UNION`]: the union's encrypted items |
//! | 12 | S -> R | [`KIND_CORRECTIONS`]: the inner product's OT corrections (`product`) |
//! | 13 | R -> S | [`KIND_CHOSEN`]: the CGS equality's masked OT messages (`cgs`) |
//! | 14 | R -> S | [`KIND_SWITCH_FLIPS`]: the union's switching network, one bit per switch, the flip of its bit of its bundle's OT index (`osn`) |
//! | 15 | S -> R | [`KIND_SWITCH_MASKS`]: the network's masked inputs, 64 bits per bundle of four switches (its OT's masked table), then two planes of one bit per switch (`osn`) |
//! | 16 | S -> R | [`KIND_TRIPLE_FIXES`]: one bit per AND triple made from a small VOLE (`gmw`) |
//! | 20-22 | | EPC's public key, sender batches and replies (`epc::messages`) |
//!
//! Order: hellos, 2, the OPRF's silent VOLE, 3, 4, 5, EPC (20, then
//! 21 and 22 interleaved by groups), the OT extensions' base OTs and
//! extensions (then 16 after the triples' small VOLEs; the CGS leaves' 8
//! and 13), 7 per circuit layer, then the
//! application's 8, 9, 10 (the union: its switching network's forward
//! OTs, four switches to one, 14, 15, then 8 and 11). Every chunked transfer has a length both
//! parties know in advance, and [`recv_exact`] refuses any other.

use psikit_io::MAX_KEY_FORMAT;
use psikit_transport::{Channel, DecodeError, Message, ProtocolId, Reader, Writer};

use super::bits::Bits;
use super::vocabulary::{Agreed, App, Epc, OtKind, Reveal, MAX_VALUE_COLUMNS};
use crate::common::messages::{byte_array_message, wire_messages};
use crate::error::{Error, Violation};

pub const PROTOCOL_ID: ProtocolId = psikit_transport::ids::CIRCUIT_PSI;

pub const KIND_MASKED: u8 = 3;
pub const KIND_HINT: u8 = 5;
pub const KIND_OPEN: u8 = 7;
pub const KIND_FLIPS: u8 = 8;
pub const KIND_PADS: u8 = 9;
pub const KIND_UNION: u8 = 11;
pub const KIND_CORRECTIONS: u8 = 12;
pub const KIND_CHOSEN: u8 = 13;
pub const KIND_SWITCH_FLIPS: u8 = 14;
pub const KIND_SWITCH_MASKS: u8 = 15;
pub const KIND_TRIPLE_FIXES: u8 = 16;

/// Longest item the union carries (bytes).
pub const MAX_UNION_ITEM: u16 = 1024;

/// First message of each party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub agreed: Agreed,
    pub set_size: u64,
    /// Value columns this party brings (sums).
    pub value_columns: u8,
    /// Its longest item in bytes (the union pads items to the provider's).
    pub max_item_len: u16,
    /// `psikit_io::KeySpec::key_format`, or empty.
    pub key_format: String,
}

impl Message for Hello {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 1;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        self.agreed.write(w);
        w.u64(self.set_size)
            .u8(self.value_columns)
            .u16(self.max_item_len)
            .string(&self.key_format);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        let agreed = Agreed::read(r)?;
        let set_size = r.u64("set size")?;
        let value_columns = r.u8("value columns")?;
        if usize::from(value_columns) > MAX_VALUE_COLUMNS {
            return Err(DecodeError::invalid("value columns", value_columns));
        }
        let max_item_len = r.u16("longest item")?;
        if max_item_len > MAX_UNION_ITEM {
            return Err(DecodeError::invalid("longest item", max_item_len));
        }
        Ok(Self {
            agreed,
            set_size,
            value_columns,
            max_item_len,
            key_format: r.string(MAX_KEY_FORMAT, "key format")?,
        })
    }
}

impl Agreed {
    /// The terms as the hellos carry them (a job's hello too).
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u8(self.app.code())
            .u64(self.app.threshold())
            .u8(match self.ot {
                OtKind::Iknp => 0,
                OtKind::Silent => 1,
                OtKind::Kk13 => 2,
            })
            .u8(self.epc.code())
            .u8(self.reveal.code())
            .u64(self.min_intersection)
            .u8(self.product_bits);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let code = r.u8("application")?;
        let threshold = r.u64("threshold")?;
        let app = App::from_code(code, threshold)
            .ok_or_else(|| DecodeError::invalid("application", code))?;
        let ot = match r.u8("OT kind")? {
            0 => OtKind::Iknp,
            1 => OtKind::Silent,
            2 => OtKind::Kk13,
            other => return Err(DecodeError::invalid("OT kind", other)),
        };
        let code = r.u8("EPC setting")?;
        let epc = Epc::from_code(code).ok_or_else(|| DecodeError::invalid("EPC setting", code))?;
        let code = r.u8("reveal setting")?;
        let reveal =
            Reveal::from_code(code).ok_or_else(|| DecodeError::invalid("reveal setting", code))?;
        let min_intersection = r.u64("minimum intersection")?;
        let product_bits = r.u8("product bits")?;
        if product_bits > 64 {
            return Err(DecodeError::invalid("product bits", product_bits));
        }
        Ok(Self {
            app,
            ot,
            epc,
            reveal,
            min_intersection,
            product_bits,
        })
    }
}

/// The receiver's fresh seeds: the tables' hashing seed, then the OPRF's
/// OKVS seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seeds {
    pub hashing: u128,
    pub okvs: [u8; 16],
}

impl Message for Seeds {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 2;
    type Bounds<'a> = ();

    fn write(&self, w: &mut Writer) {
        w.bytes(&self.hashing.to_le_bytes()).bytes(&self.okvs);
    }

    fn read(r: &mut Reader<'_>, (): ()) -> Result<Self, DecodeError> {
        Ok(Self {
            hashing: u128::from_le_bytes(r.array("hashing seed")?),
            okvs: r.array("OKVS seed")?,
        })
    }
}

byte_array_message!(
    /// The sender's OKVS seed for the OPPRF hints.
    HintSeed: [u8; 16], PROTOCOL_ID, 4, "hint seed"
);

/// A party's shares of results (a count, sums, a bit), sent to the party
/// that learns them; the reader expects exactly as many as it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share(pub Vec<u64>);

impl Message for Share {
    const PROTOCOL: ProtocolId = PROTOCOL_ID;
    const KIND: u8 = 10;
    type Bounds<'a> = usize;

    fn write(&self, w: &mut Writer) {
        w.count(self.0.len());
        for x in &self.0 {
            w.u64(*x);
        }
    }

    fn read(r: &mut Reader<'_>, count: usize) -> Result<Self, DecodeError> {
        let n = r.count(count as u64, 8, "result shares")?;
        if n != count {
            return Err(DecodeError::invalid("result shares", n));
        }
        (0..n)
            .map(|_| r.u64("result share"))
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// Sends a chunked transfer of `kind`.
pub async fn send(ch: &mut Channel, kind: u8, bytes: &[u8]) -> Result<(), Error> {
    ch.send_chunked(PROTOCOL_ID, kind, bytes).await?;
    Ok(())
}

/// Receives a chunked transfer of `kind` that must be exactly `len` bytes.
pub async fn recv_exact(ch: &mut Channel, kind: u8, len: usize) -> Result<Vec<u8>, Error> {
    let bytes = ch.recv_chunked(PROTOCOL_ID, kind, len as u64).await?;
    if bytes.len() != len {
        return Err(Violation::Count {
            what: "bytes in a circuit-PSI transfer",
            got: bytes.len() as u64,
            expected: len as u64,
        }
        .into());
    }
    Ok(bytes)
}

/// Sends bit vectors as one chunked transfer of `kind`: each in its
/// [`Bits::to_bytes`] form, one after the other.
pub async fn send_bits(ch: &mut Channel, kind: u8, parts: &[&Bits]) -> Result<(), Error> {
    let bytes: Vec<u8> = parts.iter().flat_map(|b| b.to_bytes()).collect();
    send(ch, kind, &bytes).await
}

/// Receives what [`send_bits`] sent for bit vectors of `lens` bits: exactly
/// their bytes (bounded before anything is allocated), and no bit set past
/// a vector's length.
pub async fn recv_bits<const K: usize>(
    ch: &mut Channel,
    kind: u8,
    lens: [usize; K],
) -> Result<[Bits; K], Error> {
    let total = lens.iter().map(|l| l.div_ceil(8)).sum();
    let bytes = recv_exact(ch, kind, total).await?;
    let mut at = 0;
    let mut parts = lens.map(|_| Bits::default());
    for (part, len) in parts.iter_mut().zip(lens) {
        let end = at + len.div_ceil(8);
        *part = Bits::from_bytes(&bytes[at..end], len)
            .ok_or(Violation::Invalid("bit vector (a bit set past its length)"))?;
        at = end;
    }
    Ok(parts)
}

/// `width`-byte little-endian truncations of 128-bit blocks.
pub fn pack_blocks(blocks: &[u128], width: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks.len() * width);
    for b in blocks {
        out.extend_from_slice(&b.to_le_bytes()[..width]);
    }
    out
}

/// The inverse of [`pack_blocks`] (upper bytes zero); `bytes` must hold a
/// whole number of entries (checked by the caller's exact length).
pub fn unpack_blocks(bytes: &[u8], width: usize) -> Vec<u128> {
    bytes
        .chunks_exact(width)
        .map(|c| {
            let mut b = [0u8; 16];
            b[..width].copy_from_slice(c);
            u128::from_le_bytes(b)
        })
        .collect()
}

wire_messages! {
    messages: Hello, Seeds, HintSeed, Share;
    others:
        KIND_MASKED, KIND_HINT, KIND_OPEN, KIND_FLIPS, KIND_PADS, KIND_UNION, KIND_CORRECTIONS,
        KIND_CHOSEN, KIND_SWITCH_FLIPS, KIND_SWITCH_MASKS, KIND_TRIPLE_FIXES,
        super::epc::KIND_PUBLIC_KEY, super::epc::KIND_SENDER_BATCH, super::epc::KIND_REPLY;
}
