#!/usr/bin/env bash
# zerocompile next to torch.compile on a GPU host that has no package registry.
#
#   bench/gpu-host.sh prepare               here (Debian 12, with its archive): downloads the
#                                           Debian packages the host lacks into .gpu-deps/
#   bench/gpu-host.sh run OUT_DIR [ANCHOR]  on the host: unpacks them into a private prefix,
#                                           builds zc there with the host's own compiler, runs
#                                           `zc bench` and then torch_anchor.py on the CPU, and
#                                           prints zerocompile/torch.compile ratios
#
# Dependencies travel as Debian packages (scripts/gpu-host-env.sh unpacks them): OpenBLAS's
# OpenMP build (and libgfortran, which it needs), the zstd, OpenSSL and hiredis headers and
# libraries, redis-server for the remote and fleet scenarios (a private server on 127.0.0.1, as
# on the development machine), and GoogleTest and Google Benchmark for scripts/gpu-test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
deps="$root/.gpu-deps"
packages=(libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libzstd-dev libssl-dev libssl3
          libhiredis-dev libhiredis0.14 redis-server redis-tools libjemalloc2 liblzf1
          libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian)

case "${1:-}" in
  prepare)
    mkdir -p "$deps"
    (cd "$deps" && apt-get download "${packages[@]}")
    ls -l "$deps"
    ;;
  run)
    out="${2:?usage: $0 run OUT_DIR [ANCHOR]}"
    anchor="${3:-$root/../shared/anchors/torch_anchor.py}"
    mkdir -p "$out"
    source "$root/scripts/gpu-host-env.sh"
    rm -rf build-gpu  # a fresh configure: pkg-config results are cached
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DZC_BUILD_TESTS=OFF \
      -DZC_BUILD_BENCH=OFF -DZC_BUILD_EXAMPLES=OFF "${zc_gpu_cmake_args[@]}" >"$out/configure.log"
    cmake --build build-gpu --target zc_cli >"$out/build.log"
    build-gpu/zc env | tee "$out/zc-env.txt"
    build-gpu/zc bench --repeats 3 --json "$out/zc-bench.json" | tee "$out/zc-bench.txt"
    if [[ -f "$anchor" ]]; then
      DEVS=cpu python3 "$anchor" seed64 | tee "$out/torch-anchor.jsonl"
      python3 "$root/bench/ratios.py" "$out/zc-bench.json" "$out/torch-anchor.jsonl" | tee "$out/ratios.txt"
    else
      echo "no torch anchor at $anchor: zerocompile figures only"
    fi
    ;;
  *)
    echo "usage: $0 prepare | run OUT_DIR [ANCHOR]" >&2
    exit 2
    ;;
esac
