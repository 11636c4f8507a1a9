// The elementwise loop every pointwise eager kernel runs on.
//
// Operands are broadcast to the output shape (stride 0 on broadcast dims), adjacent dims that
// are contiguous for every operand are merged, and the innermost dim becomes a plain loop:
// unit-stride when possible, so the compiler vectorizes the op's functor. Large loops are
// split over OpenMP threads, which is what a fair eager baseline does (torch does the same).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "cpu/threads.h"
#include "util/check.h"
#include "zc/tensor.h"

namespace zc::ops {

inline constexpr int kMaxDims = 16;
// Below this many elements a loop runs on one thread: waking a team costs more.
inline constexpr int64_t kParallelGrain = 32768;

// N operands: [0] is the output (contiguous), the rest inputs viewed at the output's shape.
template <int N>
struct LoopPlan {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  int64_t numel = 1;
};

template <int N>
LoopPlan<N> make_loop_plan(const Shape& out_shape, const std::array<const Tensor*, N>& operands) {
  LoopPlan<N> p;
  int nd = static_cast<int>(out_shape.size());
  ZC_CHECK(nd <= kMaxDims, "too many dims: " << nd);
  // Broadcast strides, dropping size-1 dims, then merging contiguous neighbours.
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];
  int k = 0;
  for (int d = 0; d < nd; ++d) {
    if (out_shape[d] == 1) continue;
    sizes[k] = out_shape[d];
    for (int o = 0; o < N; ++o) {
      const Tensor& t = *operands[o];
      int off = nd - static_cast<int>(t.dim());
      int64_t st = 0;
      if (d >= off && t.shape()[d - off] != 1) st = t.strides()[d - off];
      strides[o][k] = st;
    }
    ++k;
  }
  p.numel = 1;
  for (int d = 0; d < nd; ++d) p.numel *= out_shape[d];
  if (k == 0) {  // a single element
    p.ndim = 1;
    p.sizes[0] = p.numel;
    for (int o = 0; o < N; ++o) p.strides[o][0] = 1;
    return p;
  }
  int m = 0;
  for (int d = 0; d < k; ++d) {
    bool merge = m > 0;
    for (int o = 0; o < N && merge; ++o) {
      merge = p.strides[o][m - 1] == strides[o][d] * sizes[d];
    }
    if (merge) {
      p.sizes[m - 1] *= sizes[d];
      for (int o = 0; o < N; ++o) p.strides[o][m - 1] = strides[o][d];
    } else {
      p.sizes[m] = sizes[d];
      for (int o = 0; o < N; ++o) p.strides[o][m] = strides[o][d];
      ++m;
    }
  }
  p.ndim = m;
  return p;
}

namespace detail {
template <int N>
inline void offsets_of(const LoopPlan<N>& p, int64_t row, int64_t (&off)[N]) {
  for (int o = 0; o < N; ++o) off[o] = 0;
  for (int d = p.ndim - 2; d >= 0; --d) {
    int64_t i = row % p.sizes[d];
    row /= p.sizes[d];
    for (int o = 0; o < N; ++o) off[o] += i * p.strides[o][d];
  }
}

template <class Out, class... In, class F, size_t... I>
inline void inner_loop(Out* __restrict out, std::tuple<const In*...> in, int64_t n,
                       const int64_t* stride, bool unit, F& f, std::index_sequence<I...>) {
  if (unit) {
    for (int64_t j = 0; j < n; ++j) out[j] = f(std::get<I>(in)[j]...);
  } else {
    for (int64_t j = 0; j < n; ++j) out[j * stride[0]] = f(std::get<I>(in)[j * stride[I + 1]]...);
  }
}
}  // namespace detail

// Runs out[i] = f(in0[i], in1[i], ...) over the plan. `out` and `in` point at element 0 of
// each operand (storage + offset).
template <int N, class Out, class... In, class F>
void run_loop(const LoopPlan<N>& p, Out* out, std::tuple<const In*...> in, F f) {
  static_assert(sizeof...(In) + 1 == N);
  constexpr auto seq = std::index_sequence_for<In...>{};
  if (p.numel == 0) return;
  int64_t inner = p.sizes[p.ndim - 1];
  int64_t stride[N];
  bool unit = true;
  for (int o = 0; o < N; ++o) {
    stride[o] = p.strides[o][p.ndim - 1];
    unit = unit && stride[o] == 1;
  }
  auto row_at = [&](int64_t row, int64_t begin, int64_t count) {
    int64_t off[N];
    detail::offsets_of(p, row, off);
    auto shifted = [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<const In*...>((std::get<I>(in) + off[I + 1] + begin * stride[I + 1])...);
    }
    (seq);
    detail::inner_loop(out + off[0] + begin * stride[0], shifted, count, stride, unit, f, seq);
  };
  int64_t rows = p.numel / inner;
  bool parallel = p.numel >= kParallelGrain && omp_get_max_threads() > 1;
  if (rows == 1) {
    // One long row: split it into chunks.
    int64_t chunk = 8192;
    int64_t chunks = (inner + chunk - 1) / chunk;
    cpu::parallel_for_if(parallel, chunks, [&](int64_t c) {
      row_at(0, c * chunk, std::min(chunk, inner - c * chunk));
    });
  } else {
    cpu::parallel_for_if(parallel, rows, [&](int64_t r) { row_at(r, 0, inner); });
  }
}

// Pointer to element 0 of a tensor as T.
template <class T>
inline T* elem_ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace zc::ops
