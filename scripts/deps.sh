#!/usr/bin/env bash
# Installs the Debian packages that building and testing zc needs, and only those missing:
# silent when everything is present, so the other scripts can run it every time.
set -euo pipefail

# Build: compiler, CMake + Ninja, pkg-config (finds OpenBLAS). Library: OpenBLAS (large
# matmuls), oneDNN (f32 GEMMs on the CPU, src/cpu/blas.h), OpenSSL's libcrypto (SHA-256, HMAC),
# zstd (cache bundles), hiredis (the remote cache; redis-server for its tests), ONNX's
# protobuf classes and protobuf (ONNX import). Tests and
# benchmarks: GoogleTest/GoogleMock, Google Benchmark. Fuzz tests: clang with its sanitizer and
# libFuzzer runtime (only recommended by clang, so named here for --no-install-recommends).
packages=(
  g++
  cmake
  ninja-build
  pkg-config
  libopenblas-openmp-dev
  libdnnl-dev
  libssl-dev
  libzstd-dev
  libhiredis-dev
  libonnx-dev
  libprotobuf-dev
  redis-server
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  clang
  libclang-rt-dev
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: not a Debian system; install the equivalents of: ${packages[*]}" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "deps.sh: missing packages (${missing[*]}) and not root; install them as root" >&2
    exit 1
  fi
fi

echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
