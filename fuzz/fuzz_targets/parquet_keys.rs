#![no_main]
//! See `psikit_protocols::fuzzing::parquet_keys`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        // The parquet crate panics on some malformed metadata; psikit-io
        // catches those panics and reports an error (`io/src/records.rs`).
        // libfuzzer-sys's hook would abort on them anyway, so a quiet hook
        // replaces it here. A panic that escapes still counts as a crash:
        // libfuzzer-sys catches it around each input and aborts.
        std::panic::set_hook(Box::new(|_| {}));
    },
    |data: &[u8]| psikit_protocols::fuzzing::parquet_keys(data)
);
