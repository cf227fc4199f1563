//! Reads from large tables at random positions, with the reads issued a
//! few positions ahead so that their cache misses overlap.
//!
//! RR16 reads its OTs through a random permutation: both the permutation
//! (4 bytes per Bloom filter position) and the OT rows (16 bytes per OT)
//! outgrow the caches, so each read is a cache and TLB miss. The plain loop
//! waits for one miss at a time beyond what the out-of-order window
//! overlaps; prefetching keeps several in flight.

/// How many positions ahead to prefetch: enough to cover a DRAM miss at a
/// few nanoseconds per element.
const AHEAD: usize = 48;

/// Calls `each(j, values[index(&keys[j])])` for every key in order,
/// prefetching the values of later keys. Panics if an index is out of
/// range.
#[inline]
pub fn gather<T: Copy, K>(
    values: &[T],
    keys: &[K],
    index: impl Fn(&K) -> usize,
    mut each: impl FnMut(usize, T),
) {
    for (j, key) in keys.iter().enumerate() {
        if let Some(next) = keys.get(j + AHEAD) {
            prefetch(values, index(next));
        }
        each(j, values[index(key)]);
    }
}

/// Hints the CPU to fetch `values[i]` into the cache (no effect if `i` is
/// out of range or elsewhere than x86_64).
#[inline]
fn prefetch<T>(values: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = values.get(i) {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint (it cannot fault or change
        // memory), SSE is part of x86_64, and the pointer comes from a
        // live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((v as *const T).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (values, i);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_in_key_order() {
        let values: Vec<u64> = (0..1000).map(|v| v * 3).collect();
        let keys: Vec<u32> = (0..500).map(|k| (k * 7919) % 1000).collect();
        let mut out = Vec::new();
        gather(&values, &keys, |&k| k as usize, |j, v| out.push((j, v)));
        let want: Vec<(usize, u64)> = keys
            .iter()
            .enumerate()
            .map(|(j, &k)| (j, u64::from(k) * 3))
            .collect();
        assert_eq!(out, want);
    }
}
