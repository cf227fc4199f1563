#!/usr/bin/env bash
# The Python package's tests, as CI runs them: build the abi3 wheel with
# maturin, install it into a fresh virtual environment, and run the pytest
# suite (python/tests) against the installed wheel from outside the source
# tree. Called by scripts/test.sh; runs alone too.
#
# Needs python3 (3.9+, with venv) and access to PyPI for maturin, pytest
# and, optionally, pandas, pyarrow, tqdm and ray (their tests are skipped
# without them). PSIKIT_WHEEL_PROFILE picks the cargo profile of the wheel
# (default: release, what `pip install ./python` builds).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
profile=${PSIKIT_WHEEL_PROFILE:-release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check "maturin>=1.9.4,<2" "pytest>=7" prometheus_client
if ! "$py" -m pip install -q --disable-pip-version-check pandas pyarrow tqdm; then
    echo "psikit: could not install pandas, pyarrow and tqdm; their tests will be skipped" >&2
fi
# Ray for psikit.scale (the sharded HE database on a local single-node
# cluster); PSIKIT_NO_RAY=1 skips it (a big download).
if [ -z "${PSIKIT_NO_RAY:-}" ] && ! "$py" -m pip install -q --disable-pip-version-check "ray[data]>=2.40" aiohttp; then
    echo "psikit: could not install ray; psikit.scale's tests will be skipped" >&2
fi

start=$(date +%s)
(cd python && "$work/venv/bin/maturin" build --quiet --locked --profile "$profile" \
    --interpreter "$py" --out "$work/wheels")
echo "psikit: wheel built in $(( $(date +%s) - start )) s: $(cd "$work/wheels" && ls)"
"$py" -m pip install -q --disable-pip-version-check --no-index --find-links "$work/wheels" psikit

# The CLI for the interoperability tests (built by `cargo test` above in
# scripts/test.sh; built here when run alone).
cli="$target/debug/psikit"
[ -x "$cli" ] || cargo build --locked -p psikit-cli
start=$(date +%s)
(cd "$work" && PSIKIT_CLI="$cli" "$py" -m pytest -q -p no:cacheprovider "$root/python/tests")
(cd "$work" && "$py" "$root/python/examples/end_to_end.py" --server-items 5000 --client-items 500)
echo "psikit: Python tests and example ran in $(( $(date +%s) - start )) s"
