#![no_main]
//! See `psikit_protocols::fuzzing::key_file`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| psikit_protocols::fuzzing::key_file(data));
