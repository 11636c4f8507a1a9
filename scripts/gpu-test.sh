#!/usr/bin/env bash
# The tests that need a GPU, on a GPU host without a package registry (as the device machines
# of this project are): builds zc, its tests and benchmarks there with the host's compiler and
# CUDA toolkit, runs the CUDA tests, then the CUDA benchmarks next to torch's eager ops.
#
#   bench/gpu-host.sh prepare              here, once: the Debian packages into .gpu-deps/
#   scripts/gpu-test.sh OUT_DIR [REGEX]    on the host: CTest for REGEX (default Cuda|Gpu, the
#                                          GPU tests: the CUDA suites, the *Gpu ones beside CPU
#                                          suites and OnnxZooCuda, the zoo on CUDA; '.' runs
#                                          every test) and the benchmarks
#                                          (cuda_ops, torch's eager ops, cuBLASLt's first use)
#
# OUT_DIR receives the logs, ctest.txt (the whole CTest output), ctest.xml (JUnit) and the
# benchmark figures as JSON.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:?usage: $0 OUT_DIR [REGEX]}"
regex="${2:-Cuda|Gpu}"
mkdir -p "$out"
source "$root/scripts/gpu-host-env.sh"
jobs="$(nproc)"

{ nvidia-smi || true; } >"$out/nvidia-smi.txt" 2>&1
rm -rf build-gpu  # a fresh configure: pkg-config results are cached
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DZC_BUILD_EXAMPLES=OFF \
  "${zc_gpu_cmake_args[@]}" >"$out/configure.log" 2>&1
grep "zc:" "$out/configure.log" || true
cmake --build build-gpu -j"$jobs" >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
build-gpu/zc env >"$out/zc-env.txt" 2>&1 || true

# The tests: each is its own process; those that compile many kernels run side by side.
export ZC_CACHE_DIR="$out/.zc-cache"
set +e
ctest --test-dir build-gpu -j"$jobs" -R "$regex" --output-on-failure --timeout 900 \
  --output-junit "$root/$out/ctest.xml" >"$out/ctest.txt" 2>&1
rc=$?
set -e
grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Failed  |Timeout" "$out/ctest.txt" | tail -40

# The benchmarks: NVRTC and first calls from an empty cache, then from a warm one, and torch.
rm -rf "$out/.zc-bench-cache"
ZC_CACHE_DIR="$out/.zc-bench-cache" build-gpu/bench/cuda_ops --json "$out/cuda-ops-cold.json" \
  >"$out/cuda-ops-cold.txt" 2>&1 || cat "$out/cuda-ops-cold.txt"
ZC_CACHE_DIR="$out/.zc-bench-cache" build-gpu/bench/cuda_ops --json "$out/cuda-ops-warm.json" \
  >"$out/cuda-ops-warm.txt" 2>&1 || cat "$out/cuda-ops-warm.txt"
python3 bench/torch_cuda_eager.py --json "$out/torch-eager.json" >"$out/torch-eager.txt" 2>&1 ||
  tail -5 "$out/torch-eager.txt"
# cuBLASLt's first product in a process: with its heuristic, then with the algorithms the first
# process stored (one JSON line each).
build-gpu/bench/cuda_blaslt_first_use --save "$out/blaslt-algos.bin" >"$out/blaslt-first-use.jsonl" &&
  build-gpu/bench/cuda_blaslt_first_use --load "$out/blaslt-algos.bin" >>"$out/blaslt-first-use.jsonl" ||
  true
rm -f "$out/blaslt-algos.bin"
paste "$out/cuda-ops-cold.txt" "$out/cuda-ops-warm.txt" | head -40
cat "$out/torch-eager.txt"
cat "$out/blaslt-first-use.jsonl" 2>/dev/null || true
rm -rf "$out/.zc-cache" "$out/.zc-bench-cache"
exit $rc
