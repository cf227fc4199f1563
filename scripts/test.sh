#!/usr/bin/env bash
# Runs every check and test of psikit: formatting, lints, unit, property and
# end-to-end tests. This is the command README gives and CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Each protocol family builds alone (the features small deployments use),
# with its tests.
for family in filter he rr16 vole cpsi; do
    cargo clippy -p psikit-cli --no-default-features --features "$family" --locked -- -D warnings
    cargo clippy -p psikit-protocols --no-default-features --features "net,$family" --all-targets --locked -- -D warnings
done
# The filter client without sockets, threads or files: what the
# WebAssembly client (crates/wasm) builds on.
cargo clippy -p psikit-protocols --no-default-features --features filter --locked -- -D warnings
cargo test --workspace --locked
# The fuzz corpus replayed through the fuzz targets' entry points (the
# fuzzers themselves need nightly: see docs/reliability.md).
cargo clippy -p psikit-protocols --all-targets --features fuzzing --locked -- -D warnings
cargo test -p psikit-protocols --features fuzzing --locked --test fuzz_corpus
# The portable kernels end to end, as on a CPU without vector extensions.
PSIKIT_PORTABLE=1 cargo test -p psikit-ot --locked
# The OPRF on curve25519-dalek (the reference), where the run above took
# the multi-buffer kernel on a CPU with AVX-512 IFMA.
PSIKIT_PORTABLE=1 cargo test -p psikit-primitives --locked
# The browser client: built to WebAssembly and tested in headless
# Chromium (unit tests and the page against `psikit serve --ws-listen`).
bash scripts/test-web.sh
# The Python package: its wheel built and installed into a fresh virtual
# environment, and its pytest suite run against the installed wheel.
bash scripts/test-python.sh
