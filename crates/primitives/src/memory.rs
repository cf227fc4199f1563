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

/// Makes the allocator keep freed memory for later allocations instead of
/// returning it to the kernel: every block comes from the heap (no
/// per-block `mmap`) and the heap is never trimmed.
///
/// For processes that run one job and exit (the CLI's one-shot commands):
/// the resident size then stays at its high-water mark until the process
/// ends, which a long-running server should not do. Peak memory grows by
/// the heap's fragmentation (VOLE-PSI: 7-11%, 322 -> 359 MiB at the
/// receiver at 2^20). A no-op on platforms other than Linux with glibc.
pub fn reuse_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only changes glibc's allocation policy for later
    // calls and takes plain integers; glibc documents both settings (-1 as
    // the trim threshold disables trimming).
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
    }
}
