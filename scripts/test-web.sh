#!/usr/bin/env bash
# The browser client's tests, as CI runs them: crates/wasm built to
# WebAssembly (scripts/build-web.sh), then web/test/run.mjs in headless
# Chromium over WebDriver against a release `psikit serve --ws-listen`:
# unit tests in WebAssembly and the page end to end (openssl makes the
# wss:// test's certificate). Called by scripts/test.sh; runs alone too.
# Installs chromium, chromium-driver, node and openssl from apt if they
# are missing; skips, saying so, only where they cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null \
    || ! command -v node >/dev/null || ! command -v openssl >/dev/null; then
    if ! bash scripts/apt-install.sh chromium chromium-driver nodejs openssl; then
        echo "psikit: SKIPPED the browser tests: no Chromium, chromedriver or node could be installed" >&2
        exit 0
    fi
fi
bash scripts/build-web.sh
cargo build --release --locked -p psikit-cli
node web/test/run.mjs "$target/release/psikit"
