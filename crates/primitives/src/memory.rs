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
