//! The state's tag set, kept sorted and unique so that an update works by
//! merges and binary searches over a set of millions, and its on-disk
//! form.

use psikit_transport::{Reader, Writer};

use super::Tag;
use crate::error::Error;

/// Sorts and deduplicates tags, returning how many duplicates were dropped.
/// Equal items have equal tags; distinct items collide with probability
/// about n^2 / 2^129, which is negligible.
pub(super) fn sort_unique(tags: &mut Vec<Tag>) -> u64 {
    let before = tags.len();
    tags.sort_unstable();
    tags.dedup();
    (before - tags.len()) as u64
}

/// Splits `wanted` (sorted) into those present in `set` (sorted) and the
/// count of those absent.
pub(super) fn partition_by_membership(wanted: &[Tag], set: &[Tag]) -> (Vec<Tag>, usize) {
    let present: Vec<Tag> = wanted
        .iter()
        .filter(|t| set.binary_search(t).is_ok())
        .copied()
        .collect();
    let absent = wanted.len() - present.len();
    (present, absent)
}

/// `a \ b` for sorted, unique slices, in one linear merge (an update
/// touches a few tags of a set of millions).
pub(super) fn sorted_difference(a: &[Tag], b: &[Tag]) -> Vec<Tag> {
    let mut out = Vec::with_capacity(a.len());
    let mut b = b.iter().peekable();
    for t in a {
        while b.next_if(|x| *x < t).is_some() {}
        if b.peek() != Some(&t) {
            out.push(*t);
        }
    }
    out
}

/// Whether every tag of `removed` is in `set` and no tag of `added` is
/// (all sorted and unique), in one linear walk.
pub(super) fn fits(set: &[Tag], removed: &[Tag], added: &[Tag]) -> bool {
    let found = |wanted: &[Tag]| {
        let mut set = set.iter().peekable();
        wanted
            .iter()
            .filter(|w| {
                while set.next_if(|t| t < w).is_some() {}
                set.peek() == Some(w)
            })
            .count()
    };
    found(removed) == removed.len() && found(added) == 0
}

/// `set \ removed ∪ added` in place, for sorted, unique slices that
/// [`fits`]: a 1% change of a set of millions moves tags within the one
/// vector instead of writing a second copy (fresh pages cost more here
/// than the merge).
pub(super) fn replace_fitting(set: &mut Vec<Tag>, removed: &[Tag], added: &[Tag]) {
    let mut removed = removed.iter().peekable();
    set.retain(|t| removed.next_if(|r| *r == t).is_none());
    // Merge `added` in from the back, into room made at the end.
    let (mut kept, mut next) = (set.len(), added.len());
    set.resize(kept + added.len(), [0; 16]);
    for w in (0..set.len()).rev() {
        if next == 0 {
            break;
        }
        if kept > 0 && set[kept - 1] > added[next - 1] {
            set[w] = set[kept - 1];
            kept -= 1;
        } else {
            set[w] = added[next - 1];
            next -= 1;
        }
    }
}

/// Tags as a `u64` count and 16 bytes each.
pub(super) fn write_tags(w: &mut Writer, tags: &[Tag]) {
    w.u64(tags.len() as u64);
    for t in tags {
        w.bytes(t);
    }
}

/// Tags written by [`write_tags`], bounded by the bytes present; they
/// must be sorted and unique (every merge relies on it).
pub(super) fn read_tags(r: &mut Reader, field: &'static str) -> Result<Vec<Tag>, Error> {
    let n = r.u64(field)?;
    let len = n
        .checked_mul(16)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Error::StateFile(format!("{field}: count overflows")))?;
    let tags: Vec<Tag> = r
        .bytes(len, field)?
        .chunks_exact(16)
        .map(|c| c.try_into().expect("chunks of 16"))
        .collect();
    if !tags.windows(2).all(|w| w[0] < w[1]) {
        return Err(Error::StateFile(format!("{field} out of order")));
    }
    Ok(tags)
}
