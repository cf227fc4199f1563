#![no_main]
//! See `psikit_protocols::fuzzing::job_files`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| psikit_protocols::fuzzing::job_files(data));
