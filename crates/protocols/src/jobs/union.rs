//! Circuit PSI's union as a job. Both sides spool their encoded keys with
//! the item keys (keyed spool files), and each bucket runs the union on
//! the item keys: the provider (the receiver) reveals the encoded keys of
//! its items outside the intersection in slots as wide as its longest key
//! over the whole job, and its padding never opens (`cpsi::UnionItems`),
//! so the learner (the sender) sees per bucket only the keys it learns,
//! as a one-shot run over the whole sets would show them. The learner's
//! journal keeps, per bucket, its own distinct keys and the keys it
//! learned; the end of the job writes them all as one CSV (`key`), bucket
//! by bucket: the union, each key once (buckets split the keys by their
//! hash, and a learned key is outside the learner's set).

use std::io::Write;
use std::path::Path;

use super::journal::JobDir;
use crate::common::files::AtomicFile;
use crate::error::Error;

/// Keys as journal words: their count, then each key's length and its
/// bytes, eight to a word (little-endian, zero-padded).
pub(super) fn pack<'a>(keys: impl Iterator<Item = &'a [u8]>) -> Vec<u64> {
    let mut words = vec![0u64];
    for key in keys {
        words[0] += 1;
        words.push(key.len() as u64);
        words.extend(key.chunks(8).map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        }));
    }
    words
}

/// The keys [`pack`] made, or an error naming bucket `b` if the words are
/// not such keys.
pub(super) fn unpack(words: &[u64], b: u64) -> Result<Vec<Vec<u8>>, Error> {
    let bad = || Error::Job(format!("bucket {b}'s union keys are malformed"));
    let (&count, mut rest) = words.split_first().ok_or_else(bad)?;
    // Each key takes a word at least: the count cannot pass the words.
    if count > rest.len() as u64 {
        return Err(bad());
    }
    let mut keys = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (&len, tail) = rest.split_first().ok_or_else(bad)?;
        let len = usize::try_from(len).map_err(|_| bad())?;
        let body = tail.get(..len.div_ceil(8)).ok_or_else(bad)?;
        let mut key: Vec<u8> = body.iter().flat_map(|w| w.to_le_bytes()).collect();
        key.truncate(len);
        keys.push(key);
        rest = &tail[body.len()..];
    }
    match rest.is_empty() {
        true => Ok(keys),
        false => Err(bad()),
    }
}

/// Writes the union from the journal to `path`, bucket by bucket; returns
/// the keys written.
pub(super) fn write(dir: &JobDir, buckets: u64, path: &Path) -> Result<u64, Error> {
    let mut out = AtomicFile::create(path)?;
    let io = |e| Error::io(path, e);
    writeln!(out.writer(), "key").map_err(io)?;
    let (mut written, mut field) = (0u64, Vec::new());
    for b in 0..buckets {
        for key in unpack(&dir.result(b)?, b)? {
            field.clear();
            psikit_io::encode_label(&[&key[..]], &mut field);
            field.push(b'\n');
            out.writer().write_all(&field).map_err(io)?;
            written += 1;
        }
    }
    out.commit()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pack_and_unpack_and_damage_is_refused() {
        let keys: Vec<Vec<u8>> = (0..40usize).map(|i| vec![i as u8 ^ 0x5a; i]).collect();
        let words = pack(keys.iter().map(Vec::as_slice));
        assert_eq!(unpack(&words, 0).expect("unpack"), keys);
        assert_eq!(
            unpack(&pack(std::iter::empty()), 0).expect("none"),
            Vec::<Vec<u8>>::new()
        );
        for damaged in [
            &words[..words.len() - 1],
            &[u64::MAX][..],
            &[1, u64::MAX][..],
            &[],
        ] {
            assert!(unpack(damaged, 3).is_err());
        }
        let mut longer = words.clone();
        longer.push(0);
        assert!(unpack(&longer, 3).is_err(), "words past the keys");
    }
}
