// What zc's oneDNN call sites share (built with oneDNN only): the process's one CPU engine, a
// stream per thread, and the memory descriptor of a matrix as BLAS passes it.
#pragma once

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>

namespace zc::ops {

const dnnl::engine& dnnl_engine();
// The calling thread's stream on dnnl_engine() (a stream is not shared between threads).
dnnl::stream& dnnl_thread_stream();
// An f32 matrix [rows, cols] as BLAS passes it: row-major with leading dim ld, or its transpose
// stored so (column-major).
dnnl::memory::desc dnnl_f32_matrix(bool trans, int64_t rows, int64_t cols, int64_t ld);

}  // namespace zc::ops
#endif
