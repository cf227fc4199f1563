//! The one run-time CPU dispatch of psikit's hot kernels.
//!
//! Every kernel with a vector fast path (OT matrix transposition, GF(2^128)
//! products, AES-based PRGs and hashes, SHA-256 of short items, and later
//! the HE and VOLE kernels) asks [`features`] which instructions it may use, instead of probing the
//! CPU itself. Detection runs once per process. Each fast path has a
//! portable reference that tests compare it against; setting the
//! environment variable `PSIKIT_PORTABLE=1` makes [`features`] report
//! nothing, so a whole run (tests, a benchmark) takes the portable paths,
//! as on a CPU without the extensions. `PSIKIT_CPU_DISABLE` turns off
//! the named extensions only (comma-separated field names of
//! [`Features`], e.g. `avx512ifma` to measure on an AVX-512 machine
//! what a CPU without IFMA gets).

use std::sync::OnceLock;

/// The instruction-set extensions psikit's kernels can use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// SSE2 (every x86_64 CPU).
    pub sse2: bool,
    /// AVX2 on 256-bit registers.
    pub avx2: bool,
    /// AES-NI.
    pub aes: bool,
    /// Carry-less multiplication (`PCLMULQDQ`).
    pub pclmulqdq: bool,
    /// Vector AES on 256-bit registers (with AVX2).
    pub vaes: bool,
    /// Vector carry-less multiplication (`VPCLMULQDQ`, with AVX2).
    pub vpclmulqdq: bool,
    /// AVX-512 Foundation.
    pub avx512f: bool,
    /// 52-bit integer multiply-add (`AVX512IFMA`).
    pub avx512ifma: bool,
    /// The SHA extensions (`sha256rnds2` ...), with SSE4.1.
    pub sha: bool,
}

/// Name of the environment variable that forces the portable paths.
pub const PORTABLE_ENV: &str = "PSIKIT_PORTABLE";

/// Name of the environment variable listing extensions to ignore.
pub const DISABLE_ENV: &str = "PSIKIT_CPU_DISABLE";

/// What this CPU supports (or nothing, under [`PORTABLE_ENV`]).
pub fn features() -> &'static Features {
    static DETECTED: OnceLock<Features> = OnceLock::new();
    DETECTED.get_or_init(|| {
        let portable = std::env::var_os(PORTABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        if portable {
            return Features::default();
        }
        let mut found = detect();
        if let Some(names) = std::env::var_os(DISABLE_ENV) {
            for name in names.to_string_lossy().split(',').map(str::trim) {
                if !found.disable(name) && !name.is_empty() {
                    eprintln!("psikit: {DISABLE_ENV} names no CPU feature {name:?}; ignored");
                }
            }
        }
        found
    })
}

impl Features {
    /// Turns off the extension named like its field; false for an
    /// unknown name. Turning off a base extension turns off what needs it.
    fn disable(&mut self, name: &str) -> bool {
        match name {
            "sse2" => self.sse2 = false,
            "avx2" => {
                self.avx2 = false;
                self.vaes = false;
                self.vpclmulqdq = false;
            }
            "aes" => {
                self.aes = false;
                self.vaes = false;
            }
            "pclmulqdq" => {
                self.pclmulqdq = false;
                self.vpclmulqdq = false;
            }
            "vaes" => self.vaes = false,
            "vpclmulqdq" => self.vpclmulqdq = false,
            "avx512f" => {
                self.avx512f = false;
                self.avx512ifma = false;
            }
            "avx512ifma" => self.avx512ifma = false,
            "sha" => self.sha = false,
            _ => return false,
        }
        true
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    let avx2 = is_x86_feature_detected!("avx2");
    let pclmulqdq = is_x86_feature_detected!("pclmulqdq");
    Features {
        sse2: is_x86_feature_detected!("sse2"),
        avx2,
        aes: is_x86_feature_detected!("aes"),
        pclmulqdq,
        vaes: avx2 && leaf7_ecx() & (1 << 9) != 0,
        vpclmulqdq: avx2 && pclmulqdq && leaf7_ecx() & (1 << 10) != 0,
        avx512f: is_x86_feature_detected!("avx512f"),
        avx512ifma: is_x86_feature_detected!("avx512ifma"),
        sha: is_x86_feature_detected!("sha") && is_x86_feature_detected!("sse4.1"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Features {
    Features::default()
}

/// ECX of CPUID leaf 7 (VAES is bit 9, VPCLMULQDQ bit 10). Read directly
/// because detecting them by name needed a newer compiler than the
/// workspace supported when VAES came in.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn leaf7_ecx() -> u32 {
    // `__cpuid_count` is an unsafe fn before Rust 1.88.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 7 is only asked for
    // once AVX2 (which implies it) was detected.
    let leaf7 = unsafe { std::arch::x86_64::__cpuid_count(7, 0) };
    leaf7.ecx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabling_a_base_extension_disables_what_needs_it() {
        let mut all = Features {
            sse2: true,
            avx2: true,
            aes: true,
            pclmulqdq: true,
            vaes: true,
            vpclmulqdq: true,
            avx512f: true,
            avx512ifma: true,
            sha: true,
        };
        assert!(all.disable("avx512f"));
        assert!(!all.avx512ifma && all.avx2);
        assert!(all.disable("pclmulqdq"));
        assert!(!all.vpclmulqdq && all.vaes);
        assert!(all.disable("avx2"));
        assert!(!all.vaes && all.aes);
        assert!(!all.disable("avx1024"));
    }

    #[test]
    fn detection_is_consistent() {
        let f = features();
        assert_eq!(f, features(), "detected once");
        if f.vaes {
            assert!(f.avx2 && f.aes, "VAES is used with AVX2 and AES-NI");
        }
        if f.vpclmulqdq {
            assert!(
                f.avx2 && f.pclmulqdq,
                "VPCLMULQDQ is used with AVX2 and PCLMULQDQ"
            );
        }
        if f.avx512ifma {
            assert!(f.avx512f);
        }
        #[cfg(target_arch = "x86_64")]
        if std::env::var_os(PORTABLE_ENV).is_none() {
            assert!(f.sse2, "SSE2 is part of x86_64");
        }
    }
}
