//! How the process's allocator treats freed memory, for one-shot runs that
//! allocate and free big vectors phase after phase.
//!
//! glibc serves every block above its mmap threshold (at most 32 MiB,
//! whatever `M_MMAP_THRESHOLD` says) with a fresh `mmap` and unmaps it on
//! `free`, so each big vector costs the kernel a page fault and a zeroed
//! page per 4 KiB, every time: on the development VM 0.45 s per GiB,
//! against 0.02 s per GiB to overwrite memory the process already has.
//! VOLE-PSI at 2^24 touched 8.8 GiB of fresh pages at the receiver (4.3
//! GiB peak), a fifth to a quarter of its time.
//!
//! Pages a process touches for the first time still cost a fault each:
//! [`HugePages`], the front ends' global allocator, asks the kernel for
//! 2 MiB transparent huge pages in every big block, one fault where there
//! were 512.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::{Mutex, PoisonError};

/// Who wants freed memory kept: the process for good
/// ([`reuse_freed_memory`]), and how many jobs running now
/// ([`reuse_freed_memory_during`]).
struct Keepers {
    for_good: bool,
    jobs: usize,
}

static KEEPERS: Mutex<Keepers> = Mutex::new(Keepers {
    for_good: false,
    jobs: 0,
});

/// Makes the allocator keep freed memory for later allocations instead of
/// returning it to the kernel: every block comes from the heap (no
/// per-block `mmap`) and the heap is never trimmed.
///
/// For processes that run one job and exit (the CLI's one-shot commands):
/// the resident size then stays at its high-water mark until the process
/// ends, which a long-running server should not do. Peak memory grows by
/// the heap's fragmentation (VOLE-PSI: 7-11%, 322 -> 359 MiB at the
/// receiver at 2^20). A no-op on platforms other than Linux with glibc.
///
/// Call it first thing, before other threads allocate: it also puts every
/// thread on one malloc arena. glibc gives threads arenas of their own
/// (up to 8 per core), and memory kept in one arena serves only that
/// arena's threads: a VOLE-PSI party at 2^20 then peaked 6-11% higher
/// (the OKVS's grouping runs on rayon's threads, the VOLE on tokio's),
/// both parties at 2^24 0.4 GiB higher. Big blocks dominate these runs, so the shared
/// arena's lock is rarely taken (blocks up to 1 KiB come from each
/// thread's cache without it).
pub fn reuse_freed_memory() {
    let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
    keepers.for_good = true;
    keep_freed_memory(true);
    one_arena();
}

/// Later threads share the main malloc arena (glibc's `M_ARENA_MAX`).
fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes glibc's allocation policy for later
    // calls; `M_ARENA_MAX` bounds the arenas created from now on.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Keeps freed memory as [`reuse_freed_memory`] does, but only while the
/// returned guard (and any other one alive) lives: for one big job in a
/// process that goes on afterwards (a Python interpreter). When the last
/// guard drops, glibc's initial settings come back (`M_MMAP_MAX` 65536,
/// `M_TRIM_THRESHOLD` 128 KiB; glibc's dynamic raising of the mmap and trim
/// thresholds stays off, as after any `mallopt` of them) and the kept
/// memory is returned to the kernel (`malloc_trim`), unless
/// [`reuse_freed_memory`] was called meanwhile.
pub fn reuse_freed_memory_during() -> FreedMemoryReused {
    let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
    keepers.jobs += 1;
    if keepers.jobs == 1 && !keepers.for_good {
        keep_freed_memory(true);
    }
    FreedMemoryReused { _private: () }
}

/// Freed memory is kept while this lives (see
/// [`reuse_freed_memory_during`]).
#[must_use = "freed memory is kept only while the guard lives"]
pub struct FreedMemoryReused {
    _private: (),
}

impl Drop for FreedMemoryReused {
    fn drop(&mut self) {
        let mut keepers = KEEPERS.lock().unwrap_or_else(PoisonError::into_inner);
        keepers.jobs = keepers.jobs.saturating_sub(1);
        if keepers.jobs == 0 && !keepers.for_good {
            keep_freed_memory(false);
        }
    }
}

/// Sets glibc's policy: keep freed memory, or glibc's initial settings and
/// the kept memory returned.
#[cfg_attr(
    not(all(target_os = "linux", target_env = "gnu")),
    allow(unused_variables)
)]
fn keep_freed_memory(keep: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes glibc's allocation policy for later
    // calls and takes plain integers; glibc documents both settings (-1 as
    // the trim threshold disables trimming, 65536 and 128 KiB are its
    // defaults); `malloc_trim` only returns free memory to the kernel.
    #[allow(unsafe_code)]
    unsafe {
        if keep {
            libc::mallopt(libc::M_MMAP_MAX, 0);
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        } else {
            libc::mallopt(libc::M_MMAP_MAX, 65536);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
            libc::malloc_trim(0);
        }
    }
}

/// The size of a transparent huge page on x86-64 and most aarch64 kernels.
const HUGE_PAGE: usize = 2 << 20;

/// The system allocator, with every block of [`HUGE_PAGE`] or more advised
/// to the kernel as wanting transparent huge pages (`MADV_HUGEPAGE`), for
/// the front ends to install as their `#[global_allocator]`.
///
/// The protocols fill vectors of tens to thousands of MiB once each (VOLE
/// outputs, OKVS tables, hash tables), and a fresh 4 KiB page costs a
/// fault: at 2^20 items a VOLE-PSI party faulted 35,000 times, about a
/// fifth of its run. Most distributions ship transparent huge pages in
/// `madvise` mode, where only advised memory gets them; with the advice a
/// 2 MiB range inside a block faults once. Only whole aligned 2 MiB ranges
/// inside the block are advised, so no page outside it is ever mapped for
/// it, and the advice only changes how memory is mapped, never what it
/// holds. Where the kernel has no transparent huge pages (or not Linux)
/// the advice is skipped or refused and nothing changes.
pub struct HugePages;

// SAFETY: every call goes to `System` with the caller's arguments
// unchanged; `advise` only gives the kernel advice about pages inside the
// block `System` returned, which changes neither its contents nor its
// bounds.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = System.alloc(layout);
        advise(block, layout.size());
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh memory is not touched by `calloc`, so the advice still
        // comes before the first fault (std zeroes blocks aligned above
        // 16 bytes itself, touching them first: none of psikit's big
        // vectors is).
        let block = System.alloc_zeroed(layout);
        advise(block, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        System.dealloc(block, layout)
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = System.realloc(block, layout, new_size);
        advise(moved, new_size);
        moved
    }
}

/// The whole [`HUGE_PAGE`]s inside `len` bytes from `start`, as (first
/// byte, length), or `None` if there is none.
fn huge_interior(start: usize, len: usize) -> Option<(usize, usize)> {
    let first = start.checked_add(HUGE_PAGE - 1)? & !(HUGE_PAGE - 1);
    let end = start.checked_add(len)? & !(HUGE_PAGE - 1);
    (end > first).then(|| (first, end - first))
}

/// Advises the huge pages inside a block (see [`HugePages`]); a failure
/// (no transparent huge pages in this kernel) changes nothing and is
/// ignored.
#[cfg_attr(
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )),
    allow(unused_variables)
)]
fn advise(block: *mut u8, len: usize) {
    #[cfg(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    if let (false, Some((first, len))) = (block.is_null(), huge_interior(block as usize, len)) {
        // SAFETY: `[first, first + len)` lies inside a block the allocator
        // just returned (not null: the allocation succeeded), so it is
        // mapped memory this process owns; `MADV_HUGEPAGE` changes only
        // how its pages are mapped, not their contents.
        #[allow(unsafe_code)]
        unsafe {
            libc::madvise(first as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_aligned_huge_pages_are_advised() {
        let h = HUGE_PAGE;
        assert_eq!(huge_interior(0, h), Some((0, h)));
        assert_eq!(huge_interior(1, h), None);
        assert_eq!(huge_interior(1, 2 * h), Some((h, h)));
        assert_eq!(huge_interior(h - 1, 3 * h + 1), Some((h, 3 * h)));
        assert_eq!(huge_interior(h + 5, h - 5), None);
        assert_eq!(huge_interior(usize::MAX - 10, 4 * h), None);
    }

    /// The block's pages are marked as wanting huge pages (`hg` in the
    /// kernel's flags of its mapping), whatever the system's setting.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn big_blocks_are_advised() {
        let layout = Layout::from_size_align(8 * HUGE_PAGE, 64).expect("layout");
        // SAFETY: a nonzero layout; the block is freed below with it.
        #[allow(unsafe_code)]
        let block = unsafe { HugePages.alloc(layout) };
        assert!(!block.is_null());
        let at = block as usize + 4 * HUGE_PAGE;
        let flags = mapping_flags(at);
        // SAFETY: allocated above with this layout.
        #[allow(unsafe_code)]
        unsafe {
            HugePages.dealloc(block, layout)
        };
        let flags = flags.expect("the block's mapping in /proc/self/smaps");
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
        }
    }

    /// The `VmFlags` line of the mapping holding `at`.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn mapping_flags(at: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            if let Some((lo, hi)) = range {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&at);
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.to_string());
                }
            }
        }
        None
    }
}
