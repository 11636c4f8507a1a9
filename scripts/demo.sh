#!/usr/bin/env bash
# Builds zc (Release, into build/) and runs the demo: seed64 cold, warm and from a bundle, each
# in a fresh process; automatic, manual and no regional compilation; compiled vs eager. Then
# what the cache holds, and the machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target example_demo zc_cli
./build/examples/demo ./build/zc
echo
echo "== zc cache stats (your cache: $(./build/zc cache stats --json | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p'))"
./build/zc cache stats
echo
echo "== zc env"
./build/zc env
