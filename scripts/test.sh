#!/usr/bin/env bash
# Builds everything (Release, into build/) and runs every test through CTest. Extra
# arguments go to ctest (for example -R install).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./scripts/deps.sh
# Test-only Python packages, from PyPI when missing: ONNX Runtime (the reference the ONNX import
# tests compare with), onnx and numpy (the ONNX models the tests and the example write).
if ! python3 -c "import onnxruntime, onnx, numpy" >/dev/null 2>&1; then
  echo "test.sh: installing onnxruntime, onnx and numpy for the tests (pip)"
  python3 -m pip install --quiet --disable-pip-version-check onnxruntime onnx numpy
fi
# Warnings are errors here (CI): a fresh build prints none.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DZC_WERROR=ON >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure -j2 "$@"
# The full run also builds the thread tests with ThreadSanitizer (docs/serving.md, "Calls from
# many threads"): 8 threads x 1000 calls with recompiles and async compile, and no report.
if [ $# -eq 0 ]; then
  ./scripts/tsan-test.sh
fi
