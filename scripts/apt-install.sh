#!/usr/bin/env bash
# Installs the Debian packages given that are missing (as root, from apt);
# exits non-zero if it cannot.
set -euo pipefail
missing=()
for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "psikit: cannot install ${missing[*]}: needs apt-get as root" >&2
    exit 1
fi
echo "psikit: installing ${missing[*]} (apt)" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
