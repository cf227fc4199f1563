//! Circuit PSI's shares application as a job. Each bucket's run ends with
//! both parties' XOR shares of each bin's membership (and additive shares
//! of the sender's value columns), nothing opened; the journal keeps them
//! as words, and the end of the job writes them as one CSV, bucket by
//! bucket, for a computation that goes on from the shares:
//! `bucket,bin,share[,value_share_j...][,row]`. The receiver's `row` is
//! the input row (1-based, the header not counted) of the bin's item, its
//! first when the key repeats; empty for an empty bin or a padding dummy.
//! A one-shot run writes the same columns without `bucket`, and the key
//! instead of the row.

use std::io::Write;
use std::path::Path;

use super::journal::JobDir;
use super::prepare::Bucket;
use crate::common::files::AtomicFile;
use crate::cpsi::Shares;
use crate::error::Error;

/// A bucket's shares as journal words: the sender's value columns `k`,
/// then per bin its membership share with the receiver's row + 1 above it
/// (0: no row), then the bin's `k` value shares.
pub(super) fn encode(bucket: &Bucket, shares: &Shares) -> Result<Vec<u64>, Error> {
    let bins = shares.membership.len();
    let k = shares.sender_values.len();
    if shares.sender_values.iter().any(|c| c.len() != bins) {
        return Err(Error::Internal("one value share per bin"));
    }
    let mut words = Vec::with_capacity(1 + bins * (1 + k));
    words.push(k as u64);
    for bin in 0..bins {
        let item = shares.item_of_bin.as_ref().and_then(|items| items[bin]);
        let row = item.and_then(|i| bucket.first_row(i as usize));
        words.push(u64::from(shares.membership.get(bin)) | row.map_or(0, |r| (r + 1) << 1));
        words.extend(shares.sender_values.iter().map(|c| c[bin]));
    }
    Ok(words)
}

/// Writes every bucket's shares from the journal to `path` (the row column
/// at the receiver); returns the bins written.
pub(super) fn write(dir: &JobDir, buckets: u64, path: &Path, receiver: bool) -> Result<u64, Error> {
    let mut out = AtomicFile::create(path)?;
    let io = |e| Error::io(path, e);
    let mut bins = 0u64;
    for b in 0..buckets {
        let words = dir.result(b)?;
        let (k, per_bin) = columns(&words, b)?;
        let w = out.writer();
        if b == 0 {
            write!(w, "bucket,bin,share").map_err(io)?;
            for j in 1..=k {
                write!(w, ",value_share_{j}").map_err(io)?;
            }
            writeln!(w, "{}", if receiver { ",row" } else { "" }).map_err(io)?;
        }
        for (bin, cells) in words[1..].chunks_exact(per_bin).enumerate() {
            write!(w, "{b},{bin},{}", cells[0] & 1).map_err(io)?;
            for v in &cells[1..] {
                write!(w, ",{v}").map_err(io)?;
            }
            match (receiver, cells[0] >> 1) {
                (false, _) => writeln!(w),
                (true, 0) => writeln!(w, ","),
                (true, row) => writeln!(w, ",{}", row - 1),
            }
            .map_err(io)?;
            bins += 1;
        }
    }
    out.commit()?;
    Ok(bins)
}

/// The value columns of bucket `b`'s words and the words per bin.
fn columns(words: &[u64], b: u64) -> Result<(usize, usize), Error> {
    let bad = || Error::Job(format!("bucket {b}'s shares are malformed"));
    let k = usize::try_from(*words.first().ok_or_else(bad)?).map_err(|_| bad())?;
    let per_bin = k.checked_add(1).filter(|&p| p <= 256).ok_or_else(bad)?;
    match (words.len() - 1) % per_bin {
        0 => Ok((k, per_bin)),
        _ => Err(bad()),
    }
}
