#!/usr/bin/env bash
# Builds psikit's browser client: crates/wasm compiled to WebAssembly and
# its JavaScript glue (wasm-bindgen), into web/psikit/pkg. Installs what it
# needs on a fresh Debian machine (apt, crates.io), as root.
#
# rustup here may lack the wasm32 target (and cannot download it); then
# Debian's own compiler builds it: rustc-web with the standard library's
# sources (rust-web-src), built for wasm32 with -Zbuild-std. `lld-22` is
# what rustc-web's `rust-lld` links to without depending on it.
set -euo pipefail
cd "$(dirname "$0")/.."

BINDGEN_VERSION=0.2.130 # = the wasm-bindgen pin in crates/wasm/Cargo.toml
OUT=web/psikit/pkg
WASM=${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/psikit_wasm.wasm

if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    cargo build --locked --release --target wasm32-unknown-unknown -p psikit-wasm
else
    bash scripts/apt-install.sh rustc-web cargo-web rust-web-src lld-22
    PATH=/usr/bin:$PATH RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
        cargo build --locked --release -Zbuild-std=std,panic_abort \
        --target wasm32-unknown-unknown -p psikit-wasm
fi

if [[ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $BINDGEN_VERSION" ]]; then
    echo "build-web: installing wasm-bindgen-cli $BINDGEN_VERSION (crates.io)" >&2
    # Not --locked: its lock file pins a crate version the registry lacks.
    cargo install -q wasm-bindgen-cli --version "=$BINDGEN_VERSION"
fi
rm -rf "$OUT"
wasm-bindgen --target web --out-dir "$OUT" "$WASM"
echo "build-web: $OUT ($(gzip -9 -c "$OUT/psikit_wasm_bg.wasm" | wc -c) bytes of WebAssembly gzipped)" >&2
