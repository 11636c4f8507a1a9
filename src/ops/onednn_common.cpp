#include "ops/onednn_common.h"

#ifdef ZC_WITH_DNNL
namespace zc::ops {

const dnnl::engine& dnnl_engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& dnnl_thread_stream() {
  thread_local dnnl::stream s(dnnl_engine());
  return s;
}

dnnl::memory::desc dnnl_f32_matrix(bool trans, int64_t rows, int64_t cols, int64_t ld) {
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32,
                            trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

}  // namespace zc::ops
#endif
