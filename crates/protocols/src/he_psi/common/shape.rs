//! The numbers that fix how a sender database is laid out, derived once from
//! the protocol parameters and the label length.

use crate::error::Error;
use crate::he_psi::common::label;
use crate::he_psi::params::PsiParams;

/// Layout of a sender database (and of the client's query) in SIMD slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbShape {
    /// SIMD slots per plaintext, the BFV ring degree `n`.
    pub slots: usize,
    /// `f`: felts (slots) per item.
    pub felts_per_item: usize,
    /// `b`: bits of an item value per felt, `floor(log2 t)`.
    pub bits_per_felt: u32,
    /// `t`: the plaintext modulus, a prime below 2^32.
    pub plain_modulus: u64,
    /// `h`: cuckoo hash functions; the sender puts every item in all of them.
    pub hash_funcs: u32,
    /// Bins of the cuckoo table, a multiple of `bins_per_bundle`.
    pub table_size: u32,
    /// `B`: items per bin of one bin bundle.
    pub max_items_per_bin: usize,
    /// Longest label in bytes; 0 means an unlabeled database.
    pub max_label_bytes: usize,
}

impl DbShape {
    /// The shape of a database with these (validated) parameters and
    /// labels of at most `max_label_bytes` bytes.
    pub fn new(params: &PsiParams, max_label_bytes: usize) -> Result<Self, Error> {
        params.validate()?;
        let t = params.seal.plain_modulus;
        if t >= 1 << 32 {
            return Err(Error::Params(format!(
                "plain_modulus {t} has more than 32 bits; psikit supports up to 32"
            )));
        }
        if max_label_bytes > label::MAX_LABEL_BYTES {
            return Err(Error::Params(format!(
                "labels of up to {max_label_bytes} bytes requested; the limit is {}",
                label::MAX_LABEL_BYTES
            )));
        }
        let b = params.table.max_items_per_bin as usize;
        if b > usize::from(u16::MAX) {
            return Err(Error::Params(format!(
                "max_items_per_bin {b} is above the supported {}",
                u16::MAX
            )));
        }
        Ok(Self {
            slots: params.seal.poly_modulus_degree as usize,
            felts_per_item: params.item.felts_per_item as usize,
            bits_per_felt: params.bits_per_felt(),
            plain_modulus: t,
            hash_funcs: params.table.hash_func_count,
            table_size: params.table.table_size,
            max_items_per_bin: b,
            max_label_bytes,
        })
    }

    pub fn labeled(&self) -> bool {
        self.max_label_bytes > 0
    }

    /// Bins in one bundle: `floor(n / f)`.
    pub fn bins_per_bundle(&self) -> usize {
        self.slots / self.felts_per_item
    }

    /// Bundle indices: one ciphertext's worth of bins each.
    pub fn bundle_idx_count(&self) -> usize {
        self.table_size as usize / self.bins_per_bundle()
    }

    /// Bits of an item (or label fragment) per bin: `f * b`.
    pub fn item_bits(&self) -> usize {
        self.felts_per_item * self.bits_per_felt as usize
    }

    /// `c`: item-sized fragments of an encrypted label (0 when unlabeled).
    pub fn label_fragments(&self) -> usize {
        if !self.labeled() {
            return 0;
        }
        (8 * label::encrypted_len(self.max_label_bytes)).div_ceil(self.item_bits())
    }

    /// Polynomials per slot: the matching one plus one per label fragment.
    pub fn polys(&self) -> usize {
        1 + self.label_fragments()
    }

    /// `u32`s stored per item and bin: its felts and its label's felts.
    pub fn entry_width(&self) -> usize {
        self.felts_per_item * self.polys()
    }

    /// Bundle index and bin within the bundle of cuckoo table bin `bin`.
    pub fn split_bin(&self, bin: u32) -> (usize, usize) {
        let per = self.bins_per_bundle();
        (bin as usize / per, bin as usize % per)
    }
}
