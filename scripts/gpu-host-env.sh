# Sourced by bench/gpu-host.sh and scripts/gpu-test.sh on a GPU host that has no package
# registry: unpacks the Debian packages that `bench/gpu-host.sh prepare` downloaded into
# .gpu-deps/ into a private prefix (dpkg-deb -x: no install, no root needed, nothing of the host
# changed), points the build at them, and sets `zc_gpu_cmake_args` for configuring zc there.
# Debian 12's glibc is older than the host's (Ubuntu 24.04), so its libraries run there; the
# host's g++ compiles zc and, at run time, the generated C++ code.

zc_gpu_deps="$root/.gpu-deps"
zc_gpu_prefix=/tmp/zc-gpu-deps
if [[ ! -d "$zc_gpu_deps" ]]; then
  echo "no $zc_gpu_deps: run 'bench/gpu-host.sh prepare' on a Debian 12 machine first" >&2
  exit 2
fi
rm -rf "$zc_gpu_prefix"
for f in "$zc_gpu_deps"/*.deb; do dpkg-deb -x "$f" "$zc_gpu_prefix"; done
zc_gpu_lib="$zc_gpu_prefix/usr/lib/x86_64-linux-gnu"
# The packages' .pc files name /usr (some paths absolute, not under ${prefix}): point them at
# the private prefix. Some name /usr/lib where the library is in the multiarch directory,
# which Debian's linker searches by default and this host's does not: -L below.
find "$zc_gpu_prefix" -name '*.pc' -exec sed -i "s|/usr|$zc_gpu_prefix/usr|g" {} +
export PKG_CONFIG_PATH="$zc_gpu_lib/openblas-openmp/pkgconfig:$zc_gpu_lib/pkgconfig"
export LD_LIBRARY_PATH="$zc_gpu_lib:$zc_gpu_lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$zc_gpu_prefix/usr/bin:$PATH"  # redis-server
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
# cuDNN, which zc opens at run time for convolutions on the GPU (src/cuda/cudnn.h): the host's
# toolkit has none, its Python has pip's nvidia-cudnn (torch's), whose lib directory zc finds
# through LD_LIBRARY_PATH.
zc_cudnn_lib="$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.cudnn"); print(next(iter(s.submodule_search_locations)) + "/lib")' 2>/dev/null || true)"
if [[ -n "$zc_cudnn_lib" && -d "$zc_cudnn_lib" ]]; then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$zc_cudnn_lib"
fi
# The host's default CXX is a shell-script wrapper, which zc must ask for its version on every
# start (docs/adr/0005); the compiler it wraps is named by its file.
if [[ -z "${ZC_CXX:-}" && -x /usr/bin/x86_64-linux-gnu-g++-13 ]]; then
  export ZC_CXX=/usr/bin/x86_64-linux-gnu-g++-13
fi
# NVRTC 12.9 and later keep a cache of their own programs (the CUDA JIT cache, ~/.nv/ComputeCache)
# that an empty ZC_CACHE_DIR does not empty: a "cold" measurement after another found its
# programs compiled there. Off on the measuring host, so that cold is cold.
export CUDA_CACHE_DISABLE=1
zc_gpu_cmake_args=(
  -DZC_OPENBLAS_OPENMP_DIR="$zc_gpu_lib/openblas-openmp"
  -DOPENSSL_INCLUDE_DIR="$zc_gpu_prefix/usr/include"
  -DOPENSSL_CRYPTO_LIBRARY="$zc_gpu_lib/libcrypto.so"
  -DOPENSSL_SSL_LIBRARY="$zc_gpu_lib/libssl.so"
  # The test and benchmark packages by their CMake files alone: a prefix path would also make
  # find_library prefer the packages' static libzstd.a (its shared library is the host's).
  -DGTest_DIR="$zc_gpu_lib/cmake/GTest"
  -Dbenchmark_DIR="$zc_gpu_lib/cmake/benchmark"
  -DZC_DNNL_ROOT="$zc_gpu_prefix/usr"
  -DZC_ONNX_ROOT="$zc_gpu_prefix/usr"
  -DCMAKE_CXX_FLAGS="-I$zc_gpu_prefix/usr/include/x86_64-linux-gnu"
  -DCMAKE_SHARED_LINKER_FLAGS="-L$zc_gpu_lib"
  -DCMAKE_EXE_LINKER_FLAGS="-L$zc_gpu_lib"
)
