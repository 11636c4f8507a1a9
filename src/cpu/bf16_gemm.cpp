#include "cpu/bf16_gemm.h"

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/onednn_common.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>
#endif

namespace zc::cpu {

#ifdef ZC_WITH_DNNL
namespace {

using dnnl::memory;

// One problem's primitives: A's and B's conversions to the layouts the matmul asks for, and
// the matmul (bf16 x bf16, accumulated in f32, into f32 C with C's leading dim).
struct Plan {
  memory::desc a_user, b_user, c_user, a_bf16, b_bf16;
  dnnl::reorder to_a, to_b;
  dnnl::matmul product;
};

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

std::unique_ptr<Plan> make_plan(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc] = key;
  auto p = std::make_unique<Plan>();
  p->a_user = dnnl_f32_matrix(ta, m, k, lda);
  p->b_user = dnnl_f32_matrix(tb, k, n, ldb);
  p->c_user = dnnl_f32_matrix(false, m, n, ldc);
  const memory::desc a_any({m, k}, memory::data_type::bf16, memory::format_tag::any);
  const memory::desc b_any({k, n}, memory::data_type::bf16, memory::format_tag::any);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_any, b_any, p->c_user),
                                        dnnl_kept_attr(), dnnl_engine());
  p->a_bf16 = pd.src_desc();
  p->b_bf16 = pd.weights_desc();
  p->to_a = dnnl::reorder(dnnl::reorder::primitive_desc(dnnl_engine(), p->a_user, dnnl_engine(),
                                                        p->a_bf16, dnnl_kept_attr()));
  p->to_b = dnnl::reorder(dnnl::reorder::primitive_desc(dnnl_engine(), p->b_user, dnnl_engine(),
                                                        p->b_bf16, dnnl_kept_attr()));
  p->product = dnnl::matmul(pd);
  return p;
}

// Plans by problem (cpu/onednn_common.h), for the process: code for many sizes meets a new
// problem at each new length.
std::shared_ptr<const Plan> plan_for(const Key& key) {
  static std::mutex mu;
  static PlanTable<Key, Plan> plans(512);
  std::lock_guard lock(mu);
  return plans.get(key, make_plan);
}

}  // namespace

bool bf16_gemm_available() {
  // A matmul oneDNN implements with bf16 kernels only on CPUs with AVX-512 (BF16 or AMX for
  // speed); elsewhere creating it fails.
  static const bool available = plan_for(Key{false, false, 16, 16, 16, 16, 16, 16}) != nullptr;
  return available;
}

bool sgemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0 || !bf16_gemm_available()) return false;
  const std::shared_ptr<const Plan> p = plan_for(Key{ta, tb, m, n, k, lda, ldb, ldc});
  if (!p) return false;
  // Per thread: concurrent products each convert into their own buffers.
  thread_local std::vector<char> a_buf, b_buf;
  try {
    memory a_in(p->a_user, dnnl_engine(), const_cast<float*>(a));
    memory b_in(p->b_user, dnnl_engine(), const_cast<float*>(b));
    memory a_op = dnnl_thread_memory(a_buf, p->a_bf16), b_op = dnnl_thread_memory(b_buf, p->b_bf16);
    memory c_out(p->c_user, dnnl_engine(), c);
    dnnl_run_kept(p->to_a, {{DNNL_ARG_FROM, a_in}, {DNNL_ARG_TO, a_op}});
    dnnl_run_kept(p->to_b, {{DNNL_ARG_FROM, b_in}, {DNNL_ARG_TO, b_op}});
    dnnl_run_kept(p->product,
                  {{DNNL_ARG_SRC, a_op}, {DNNL_ARG_WEIGHTS, b_op}, {DNNL_ARG_DST, c_out}});
  } catch (const dnnl::error&) {
    return false;  // the caller computes all of C again in f32
  }
  return true;
}

#else

bool bf16_gemm_available() {
  return false;
}

bool sgemm_bf16(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
                float*, int64_t) {
  return false;
}

#endif

}  // namespace zc::cpu
