//! Packed bit vectors: the Boolean shares of circuit-PSI, one bit per bin,
//! 64 bins per word, so that a GMW layer is a few word operations per 64
//! gates. Written here rather than taken from a crate because the shares
//! need exactly these operations (XOR, AND, slicing by word) and a byte
//! format for the wire.

/// `len` bits packed little-endian into `u64` words; bits past `len` in
/// the last word are zero.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl std::fmt::Debug for Bits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Shares are secret: never print them.
        write!(f, "Bits({} bits, hidden)", self.len)
    }
}

impl Bits {
    /// `len` zero bits.
    pub fn zeros(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// From words, clearing the bits past `len`.
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        words.resize(len.div_ceil(64), 0);
        let mut bits = Self { words, len };
        bits.clear_tail();
        bits
    }

    /// Bit `j` of each of `xs`: bit `i` is bit `j` of `xs[i]` (the OT and
    /// network code works on a byte or word per item, the wire and the
    /// circuits on 64 bits a word).
    pub fn plane<T: Copy + Into<u64>>(xs: &[T], j: u32) -> Self {
        let words = xs
            .chunks(64)
            .map(|c| (c.iter().enumerate()).fold(0, |w, (i, &x)| w | (x.into() >> j & 1) << i))
            .collect();
        Self::from_words(words, xs.len())
    }

    /// From one bool per bit.
    pub fn from_bools(bools: impl IntoIterator<Item = bool>) -> Self {
        let mut bits = Self::default();
        for b in bools {
            bits.push(b);
        }
        bits
    }

    /// Appends one bit.
    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.words[self.len / 64] |= u64::from(bit) << (self.len % 64);
        self.len += 1;
    }

    /// Appends all of `other`.
    pub fn extend(&mut self, other: &Bits) {
        if self.len.is_multiple_of(64) {
            self.words.extend_from_slice(&other.words);
            self.len += other.len;
            return;
        }
        for i in 0..other.len {
            self.push(other.get(i));
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> bool {
        debug_assert!(i < self.len);
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    pub fn set(&mut self, i: usize, bit: bool) {
        debug_assert!(i < self.len);
        let mask = 1u64 << (i % 64);
        match bit {
            true => self.words[i / 64] |= mask,
            false => self.words[i / 64] &= !mask,
        }
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Bits `start..start + len` (`start` a multiple of 64).
    pub fn slice_words(&self, start: usize, len: usize) -> Bits {
        debug_assert!(start.is_multiple_of(64) && start + len <= self.len);
        let first = start / 64;
        Bits::from_words(self.words[first..first + len.div_ceil(64)].to_vec(), len)
    }

    /// `self ⊕= other` (same length).
    pub fn xor_assign(&mut self, other: &Bits) {
        debug_assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a ^= b;
        }
    }

    /// Flips every bit.
    pub fn not_assign(&mut self) {
        for w in &mut self.words {
            *w = !*w;
        }
        self.clear_tail();
    }

    /// Number of ones.
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Iterates the bits.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.get(i))
    }

    /// The bytes sent for these bits: `ceil(len / 8)` little-endian bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.truncate(self.len.div_ceil(8));
        out
    }

    /// Reads `len` bits from exactly `ceil(len / 8)` bytes; `None` if the
    /// byte count is wrong or a bit past `len` is set (a well-formed peer
    /// never sends one).
    pub fn from_bytes(bytes: &[u8], len: usize) -> Option<Bits> {
        if bytes.len() != len.div_ceil(8) {
            return None;
        }
        let words = bytes
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        let bits = Bits { words, len };
        let tail = len % 64;
        match bits.words.last() {
            Some(&last) if tail != 0 && last >> tail != 0 => None,
            _ => Some(bits),
        }
    }

    fn clear_tail(&mut self) {
        let tail = self.len % 64;
        if let (true, Some(last)) = (tail != 0, self.words.last_mut()) {
            *last &= (1u64 << tail) - 1;
        }
    }
}

/// Nibble `g` of packed words (bits `4g .. 4g + 4`): the 4-bit index or
/// flip of a 1-out-of-16 OT, sixteen to a word.
pub fn nibble(words: &[u64], g: usize) -> u8 {
    (words[g / 16] >> (4 * (g % 16))) as u8 & 15
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_reject_stray_bits() {
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 200] {
            let bits = Bits::from_bools((0..len).map(|i| i % 3 == 0));
            let bytes = bits.to_bytes();
            assert_eq!(bytes.len(), len.div_ceil(8));
            assert_eq!(Bits::from_bytes(&bytes, len), Some(bits.clone()));
            assert_eq!(Bits::from_bytes(&bytes, len + 8), None);
            if len % 8 != 0 {
                let mut bad = bytes.clone();
                *bad.last_mut().expect("non-empty") |= 0x80;
                assert_eq!(Bits::from_bytes(&bad, len), None, "len {len}");
            }
        }
    }

    #[test]
    fn extend_and_not_keep_the_tail_clear() {
        let mut a = Bits::from_bools([true, false, true]);
        a.extend(&Bits::from_bools([true; 70]));
        assert_eq!(a.len(), 73);
        assert_eq!(a.count_ones(), 72);
        a.not_assign();
        assert_eq!(a.count_ones(), 1);
        assert!(a.get(1));
    }
}
