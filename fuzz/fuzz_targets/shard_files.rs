#![no_main]
//! See `psikit_protocols::fuzzing::shard_files`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| psikit_protocols::fuzzing::shard_files(data));
