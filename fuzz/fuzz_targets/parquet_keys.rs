#![no_main]
//! See `psikit_protocols::fuzzing::parquet_keys`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| psikit_protocols::fuzzing::parquet_keys(data));
