#!/usr/bin/env bash
# Builds everything (Release, into build/) and runs every test through CTest. Extra
# arguments go to ctest (for example -R install).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure -j2 "$@"
