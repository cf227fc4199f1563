#!/usr/bin/env bash
# Runs every check and test of psikit: formatting, lints, unit, property and
# end-to-end tests. This is the command README gives and CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
