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
# The fuzz corpus replayed through the fuzz targets' entry points (the
# fuzzers themselves need nightly: see docs/reliability.md) runs with the
# rest: the feature only adds those entry points.
cargo clippy -p psikit-protocols --all-targets --features fuzzing --locked -- -D warnings
cargo test --workspace --features psikit-protocols/fuzzing --locked
# The portable kernels end to end, as on a CPU without vector extensions,
# and the OPRF on curve25519-dalek (the reference) where the run above took
# the multi-buffer kernel on a CPU with AVX-512 IFMA: psikit-ot's and
# psikit-primitives' test binaries from the run above, run again with
# PSIKIT_PORTABLE=1 (`cargo test -p` would resolve features for one
# package and rebuild most of its dependencies).
mapfile -t portable < <(cargo test --workspace --features psikit-protocols/fuzzing --locked \
    --no-run --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    unit = json.loads(line)
    if unit.get("reason") == "compiler-artifact" and unit["profile"]["test"] \
            and unit["target"]["name"] in ("psikit_ot", "psikit_primitives"):
        print(unit["executable"])')
if [ "${#portable[@]}" -ne 2 ]; then
    echo "psikit: expected the two portable test binaries, found: ${portable[*]}" >&2
    exit 1
fi
for binary in "${portable[@]}"; do
    PSIKIT_PORTABLE=1 "$binary"
done
# The browser client: built to WebAssembly and tested in headless
# Chromium (unit tests and the page against `psikit serve --ws-listen`).
bash scripts/test-web.sh
# The Python package: its wheel built and installed into a fresh virtual
# environment, and its pytest suite run against the installed wheel.
bash scripts/test-python.sh
