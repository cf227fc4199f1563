//! Label encryption (paper section 4.2). Before a label enters the sender
//! database it is encrypted under the item's OPRF-derived [`LabelKey`], so
//! the interpolation polynomials only ever hold ciphertext: a client that
//! learns a label fragment of an item it does not hold (a false-positive
//! slot match, or the polynomial's value at a random point) learns nothing.
//!
//! Layout: `nonce (16) || AES-256-CTR(key, nonce)(len (2, LE) || label ||
//! zero padding to max_len)`. Every label has the same encrypted size for a
//! database, so labels of different lengths cost the same fragments and the
//! length stays hidden. A fresh random nonce on every insert and every
//! overwrite matters: with a repeated nonce, a client that saw an item's old
//! and new label could XOR them (section 4.2).

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes256;
use rand::{CryptoRng, RngCore};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::error::{Error, Violation};

/// The key that encrypts an item's label: only a client that holds the item
/// (and so its OPRF output) can derive it.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct LabelKey(pub [u8; 32]);

/// Bytes of the random nonce in front of every encrypted label.
pub const NONCE_LEN: usize = 16;
/// The longest label a database may be configured for: the length prefix is
/// two bytes.
pub const MAX_LABEL_BYTES: usize = u16::MAX as usize;

/// Size of an encrypted label for a database whose labels have at most
/// `max_len` bytes.
pub fn encrypted_len(max_len: usize) -> usize {
    NONCE_LEN + 2 + max_len
}

/// Encrypts `label` (at most `max_len` bytes) under `key` with a fresh
/// nonce from `rng`.
pub fn encrypt_label<R: RngCore + CryptoRng>(
    key: &LabelKey,
    label: &[u8],
    max_len: usize,
    rng: &mut R,
) -> Result<Vec<u8>, Error> {
    if label.len() > max_len || max_len > MAX_LABEL_BYTES {
        return Err(Error::Config(format!(
            "a label has {} bytes but the database allows at most {max_len}",
            label.len()
        )));
    }
    let mut out = vec![0u8; encrypted_len(max_len)];
    let (nonce, body) = out.split_at_mut(NONCE_LEN);
    rng.fill_bytes(nonce);
    body[..2].copy_from_slice(&(label.len() as u16).to_le_bytes());
    body[2..2 + label.len()].copy_from_slice(label);
    let nonce: [u8; NONCE_LEN] = out[..NONCE_LEN].try_into().expect("split at NONCE_LEN");
    apply_keystream(key, &nonce, &mut out[NONCE_LEN..]);
    Ok(out)
}

/// Decrypts what [`encrypt_label`] produced. Garbage (a false positive, or a
/// malicious server) yields an error or a wrong label, never a panic.
pub fn decrypt_label(key: &LabelKey, encrypted: &[u8]) -> Result<Vec<u8>, Error> {
    if encrypted.len() < NONCE_LEN + 2 {
        return Err(Violation::Invalid("encrypted label: too short").into());
    }
    let (nonce, body) = encrypted.split_at(NONCE_LEN);
    let nonce: [u8; NONCE_LEN] = nonce.try_into().expect("split at NONCE_LEN");
    let mut body = body.to_vec();
    apply_keystream(key, &nonce, &mut body);
    let len = usize::from(u16::from_le_bytes([body[0], body[1]]));
    if len > body.len() - 2 {
        return Err(Violation::Invalid("label: its length exceeds the label field").into());
    }
    body.copy_within(2..2 + len, 0);
    body.truncate(len);
    Ok(body)
}

/// XORs `data` with AES-256 in counter mode, the nonce being the initial
/// 128-bit big-endian counter block. Written here rather than pulling in
/// the `ctr` crate for a dozen lines.
fn apply_keystream(key: &LabelKey, nonce: &[u8; NONCE_LEN], data: &mut [u8]) {
    let cipher = Aes256::new(&key.0.into());
    let start = u128::from_be_bytes(*nonce);
    for (i, chunk) in data.chunks_mut(16).enumerate() {
        let mut block = start.wrapping_add(i as u128).to_be_bytes().into();
        cipher.encrypt_block(&mut block);
        for (d, k) in chunk.iter_mut().zip(block.iter()) {
            *d ^= k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::OsRng;

    #[test]
    fn round_trip_at_several_lengths() {
        let key = LabelKey([7u8; 32]);
        for (len, max) in [(0, 0), (0, 16), (1, 16), (16, 16), (32, 32), (1024, 1024)] {
            let label: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
            let enc = encrypt_label(&key, &label, max, &mut OsRng).unwrap();
            assert_eq!(enc.len(), encrypted_len(max));
            assert_eq!(decrypt_label(&key, &enc).unwrap(), label);
        }
    }

    #[test]
    fn fresh_nonce_every_time_and_wrong_key_fails() {
        let key = LabelKey([1u8; 32]);
        let a = encrypt_label(&key, b"secret", 16, &mut OsRng).unwrap();
        let b = encrypt_label(&key, b"secret", 16, &mut OsRng).unwrap();
        assert_ne!(a[..NONCE_LEN], b[..NONCE_LEN]);
        assert_ne!(a[NONCE_LEN..], b[NONCE_LEN..]);
        let other = LabelKey([2u8; 32]);
        match decrypt_label(&other, &a) {
            Ok(l) => assert_ne!(l, b"secret"),
            Err(e) => assert!(e.to_string().contains("label")),
        }
    }

    #[test]
    fn too_long_label_and_short_input_are_errors() {
        let key = LabelKey([3u8; 32]);
        assert!(encrypt_label(&key, &[0u8; 17], 16, &mut OsRng).is_err());
        assert!(decrypt_label(&key, &[0u8; 17]).is_err());
    }
}
