#include "codegen/backends/cuda/support.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "cuda/tensors.h"
#include "util/check.h"
#include "zc/cuda.h"

namespace zc::codegen::cuda {

using zc::cuda::check;
using zc::cuda::driver;

namespace {

constexpr int kMaxDims = 16;

// The parameter block of the strided copy, passed by value (the layout matches the kernel's).
struct StridedParams {
  int64_t ndim;
  int64_t numel;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

struct Support {
  std::mutex mu;
  std::vector<uint8_t> cubin;
  // Per device: the module and its four copy kernels (element sizes 1, 2, 4, 8).
  struct Loaded {
    CUmodule module = nullptr;
    CUfunction copy[4] = {};
  };
  std::vector<Loaded> loaded;
};

Support& support() {
  static Support* s = new Support();
  return *s;
}

const Support::Loaded& loaded_on(int device) {
  Support& s = support();
  std::lock_guard lock(s.mu);
  ZC_CHECK(!s.cubin.empty(), "the CUDA support kernels were used before they were built");
  if (s.loaded.size() <= static_cast<size_t>(device)) s.loaded.resize(device + 1);
  Support::Loaded& l = s.loaded[device];
  if (!l.module) {
    zc::cuda::use_device(device);
    check(driver().cuModuleLoadData(&l.module, s.cubin.data()), "loading the support kernels");
    const char* names[4] = {"zc_strided_copy1", "zc_strided_copy2", "zc_strided_copy4",
                            "zc_strided_copy8"};
    for (int i = 0; i < 4; ++i) {
      check(driver().cuModuleGetFunction(&l.copy[i], l.module, names[i]),
            std::string("finding ") + names[i]);
    }
  }
  return l;
}

}  // namespace

const std::string& support_source() {
  // 64-bit index arithmetic: a view may span more than 2^31 elements. The dims loop is not
  // unrolled, which keeps NVRTC's time for this module small.
  static const std::string source = R"SRC(// zerocompile support kernels.
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
struct ZcStrided {
  int64_t ndim, numel;
  int64_t size[16];
  int64_t stride[16];
};
template <class T>
static __device__ void zc_strided_copy(const T* __restrict__ src, T* __restrict__ dst,
                                       const ZcStrided& p) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.numel;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i, off = 0;
#pragma unroll 1
    for (int d = (int)p.ndim - 1; d >= 0; --d) {
      const int64_t q = r % p.size[d];
      r /= p.size[d];
      off += q * p.stride[d];
    }
    dst[i] = src[off];
  }
}
extern "C" __global__ void zc_strided_copy1(const uint8_t* s, uint8_t* d, const ZcStrided p) {
  zc_strided_copy(s, d, p);
}
extern "C" __global__ void zc_strided_copy2(const uint16_t* s, uint16_t* d, const ZcStrided p) {
  zc_strided_copy(s, d, p);
}
extern "C" __global__ void zc_strided_copy4(const uint32_t* s, uint32_t* d, const ZcStrided p) {
  zc_strided_copy(s, d, p);
}
extern "C" __global__ void zc_strided_copy8(const uint64_t* s, uint64_t* d, const ZcStrided p) {
  zc_strided_copy(s, d, p);
}
)SRC";
  return source;
}

void set_support_binary(std::span<const uint8_t> cubin) {
  Support& s = support();
  std::lock_guard lock(s.mu);
  s.cubin.assign(cubin.begin(), cubin.end());
}

Tensor dense_copy(const Tensor& t) {
  const int device = t.device().index;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  const int64_t n = t.numel();
  if (n == 0) return out;
  const size_t esize = dtype_size(t.dtype());
  CUdeviceptr dst = zc::cuda::device_address(out);
  CUdeviceptr src = zc::cuda::device_address(t);
  if (t.is_contiguous()) {
    zc::cuda::copy_device_to_device(dst, src, static_cast<size_t>(n) * esize, device);
    return out;
  }
  // Size-1 dims dropped and neighbours that are contiguous with each other merged: most views
  // become one to three dims.
  StridedParams p{};
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t size = t.shape()[d], stride = t.strides()[d];
    if (size == 1) continue;
    if (p.ndim > 0 && p.stride[p.ndim - 1] == stride * size) {
      p.size[p.ndim - 1] *= size;
      p.stride[p.ndim - 1] = stride;
      continue;
    }
    if (p.ndim == kMaxDims) throw Error("a CUDA tensor view of more than 16 dims cannot be copied");
    p.size[p.ndim] = size;
    p.stride[p.ndim] = stride;
    ++p.ndim;
  }
  p.numel = n;
  const int which = esize == 1 ? 0 : esize == 2 ? 1 : esize == 4 ? 2 : 3;
  const Support::Loaded& l = loaded_on(device);
  zc::cuda::use_device(device);
  void* params[] = {&src, &dst, &p};
  const int threads = 256;
  const int sms = zc::cuda::device_properties(device).multiprocessor_count;
  const unsigned blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, int64_t{sms} * 32)));
  check(driver().cuLaunchKernel(l.copy[which], blocks, 1, 1, threads, 1, 1, 0,
                                zc::cuda::current_stream(device), params, nullptr),
        "launching a strided copy");
  return out;
}

}  // namespace zc::codegen::cuda
