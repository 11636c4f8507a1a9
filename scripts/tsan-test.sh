#!/usr/bin/env bash
# Builds the thread tests (tests/threads) with ThreadSanitizer into build-tsan/ and runs them:
# 8 threads x 1000 calls of one compiled module, shapes changing meanwhile, without and with
# async compile, with the persistent caches off so that every graph compiles while the threads
# call. Fails on a wrong result or any ThreadSanitizer report.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DZC_SANITIZE=thread -DZC_CUDA=OFF \
  -DZC_WERROR=ON -DZC_BUILD_BENCH=OFF -DZC_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan --target zc_thread_tests
# Caches off: every graph compiles while the threads call.
ZC_FORCE_DISABLE_CACHES=1 TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" \
  ./build-tsan/tests/zc_thread_tests "${1:-1000}"
