#!/usr/bin/env bash
# Builds zc (Release, into build/) and runs the seed64 example twice in fresh processes: cold
# (an empty cache) and warm (the same cache again), then shows the cache and `zc env`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target example_seed64 zc_cli
# A cache of the demo's own, so "cold" really starts empty.
export ZC_CACHE_DIR="$root/build/demo-cache"
rm -rf "$ZC_CACHE_DIR"
echo
echo "== seed64, cold: nothing cached"
./build/examples/seed64
echo
echo "== seed64, warm: a fresh process, same cache"
./build/examples/seed64
echo
echo "== zc cache stats"
./build/zc cache stats
echo
echo "== zc env"
./build/zc env
