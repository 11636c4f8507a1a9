#!/usr/bin/env bash
# Builds zc (Release, into build/) and runs the seed64 example and `zc env`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target example_seed64 zc_cli
echo
echo "== build/examples/seed64"
./build/examples/seed64
echo
echo "== build/zc env"
./build/zc env
