#include "cpu/onednn_matmul.h"

#include <mutex>
#include <tuple>
#include <unordered_map>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/onednn_common.h"
#include "cpu/threads.h"
#endif

#include "cpu/blas.h"

namespace zc::cpu {

#ifdef ZC_WITH_DNNL

bool onednn_matmul_available() {
  return true;
}

namespace {

using dnnl::memory;

// The problem, the epilogue's shape (bias, residual, activation) and whether B is kept.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool,
                       uint8_t, bool>;

// One problem's matmul with its epilogue as bias and post-ops, on B as given (`b_user`) or on
// B in the layout the primitive chose (`b_kept`).
struct Plan {
  memory::desc a, b_user, b_kept, c, bias;
  dnnl::matmul product;
};

dnnl::algorithm eltwise_of(GemmEpilogue::Act act) {
  switch (act) {
    case GemmEpilogue::Act::relu:
      return dnnl::algorithm::eltwise_relu;
    case GemmEpilogue::Act::gelu_tanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case GemmEpilogue::Act::gelu_erf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case GemmEpilogue::Act::none:
      break;
  }
  return dnnl::algorithm::undef;
}

std::shared_ptr<const Plan> make_plan(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, bias, residual, act, kept] = key;
  auto p = std::make_shared<Plan>();
  p->a = dnnl_f32_matrix(ta, m, k, lda);
  p->b_user = dnnl_f32_matrix(tb, k, n, ldb);
  p->c = dnnl_f32_matrix(false, m, n, ldc);
  p->bias = memory::desc({1, n}, memory::data_type::f32, memory::dims{n, 1});
  const memory::desc b_any({k, n}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc& b = kept ? b_any : p->b_user;
  // The residual is copied into C first and summed there: a binary post-op reading it in place
  // took oneDNN 2.6's convolutions off their brgemm kernels (cpu/onednn_conv.h).
  dnnl::post_ops post;
  if (residual) post.append_sum(1.f);
  const auto a_act = static_cast<GemmEpilogue::Act>(act);
  if (a_act != GemmEpilogue::Act::none) post.append_eltwise(1.f, eltwise_of(a_act), 0.f, 0.f);
  dnnl::primitive_attr attr = dnnl_kept_attr();
  attr.set_post_ops(post);
  const dnnl::matmul::desc d =
      bias ? dnnl::matmul::desc(p->a, b, p->bias, p->c) : dnnl::matmul::desc(p->a, b, p->c);
  const dnnl::matmul::primitive_desc pd(d, attr, dnnl_engine());
  p->b_kept = pd.weights_desc();
  p->product = dnnl::matmul(pd);
  return p;
}

// A call site meets one problem (its sizes are constants) or, for code serving many sizes, one
// per size.
constexpr size_t kMaxPlans = 64;

KeptWeights::Keep kept_weights_policy(OnednnMatmul::Keep keep) {
  return keep == OnednnMatmul::Keep::first_sight ? KeptWeights::Keep::first_sight
                                                 : KeptWeights::Keep::second_sight;
}

}  // namespace

struct OnednnMatmul::State {
  explicit State(Keep keep) : weights(kept_weights_policy(keep)) {}
  std::mutex mu;
  PlanTable<Key, Plan> plans{kMaxPlans};
  KeptWeights weights;  // B copies by B's address
};

OnednnMatmul::OnednnMatmul(Keep keep) : state_(std::make_unique<State>(keep)) {}

OnednnMatmul::~OnednnMatmul() = default;

int64_t OnednnMatmul::conversions() const {
  std::lock_guard lock(state_->mu);
  return state_->weights.conversions();
}

int64_t OnednnMatmul::kept() const {
  std::lock_guard lock(state_->mu);
  return state_->weights.kept();
}

void OnednnMatmul::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       const GemmEpilogue& e, WeightIdentity keep_b) const {
  // The fused product writes C while it reads A and B: C sharing memory with either (a buffer
  // reused once they are dead), or partly with the residual, takes the path through a
  // separate product. A residual that is C itself is summed in place.
  const bool in_place = e.residual == c && e.ldr == ldc;
  const bool shared =
      output_is_read(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, in_place ? GemmEpilogue{} : e);
  std::shared_ptr<const Plan> plan;
  memory kept;
  if (!shared && m > 0 && n > 0 && k > 0) {
    Key key{ta,
            tb,
            m,
            n,
            k,
            lda,
            ldb,
            ldc,
            e.bias != nullptr,
            e.residual != nullptr,
            static_cast<uint8_t>(e.act),
            keep_b.known()};
    std::lock_guard lock(state_->mu);
    plan = state_->plans.get(key, make_plan);
    if (plan && keep_b.known()) {
      try {
        kept = state_->weights.get(b, keep_b, plan->b_user, plan->b_kept);
      } catch (const dnnl::error&) {
        // No memory for the copy: B as given.
      }
      if (!kept) {  // not kept (yet): this call reads B as given, through the plan that does
        std::get<11>(key) = false;
        plan = state_->plans.get(key, make_plan);
      }
    }
  }
  if (plan) {
    try {
      if (e.residual && e.residual != c) {
        cpu::parallel_for_if(m * n >= 32768, m, [&](int64_t i) {
          for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = e.residual[i * e.ldr + j];
        });
      }
      // B kept in the plan's layout is passed per run; B as given is an argument like A's.
      const std::pair<int, memory::desc> src{DNNL_ARG_SRC, plan->a}, dst{DNNL_ARG_DST, plan->c},
          user_b{DNNL_ARG_WEIGHTS, plan->b_user}, bias{DNNL_ARG_BIAS, plan->bias};
      KeptArgs& args = kept
                           ? (e.bias ? dnnl_kept_args(plan, plan->product, {src, dst, bias})
                                     : dnnl_kept_args(plan, plan->product, {src, dst}))
                           : (e.bias ? dnnl_kept_args(plan, plan->product, {src, dst, user_b, bias})
                                     : dnnl_kept_args(plan, plan->product, {src, dst, user_b}));
      args.set(DNNL_ARG_SRC, a);
      args.set(DNNL_ARG_DST, c);
      if (e.bias) args.set(DNNL_ARG_BIAS, e.bias);
      if (!kept) args.set(DNNL_ARG_WEIGHTS, b);
      args.run(plan->product, kept ? &kept : nullptr);
      return;
    } catch (const dnnl::error&) {
      // Its scratch could not be had: the product apart, below. A residual copied into C is
      // read from C, where it now is.
      if (e.residual && e.residual != c) {
        GemmEpilogue from_c = e;
        from_c.residual = c;
        from_c.ldr = ldc;
        return product_then_epilogue(GemmLibrary::onednn, false, ta, tb, m, n, k, a, lda, b, ldb, c,
                                     ldc, from_c);
      }
    }
  }
  product_then_epilogue(GemmLibrary::onednn, false, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e);
}

#else  // no oneDNN in this build: onednn_matmul_available() is false.

bool onednn_matmul_available() {
  return false;
}
struct OnednnMatmul::State {};
OnednnMatmul::OnednnMatmul(Keep) {}
OnednnMatmul::~OnednnMatmul() = default;
int64_t OnednnMatmul::conversions() const {
  return 0;
}
int64_t OnednnMatmul::kept() const {
  return 0;
}
void OnednnMatmul::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       const GemmEpilogue& e, WeightIdentity) const {
  product_then_epilogue(GemmLibrary::openblas, false, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e);
}

#endif

}  // namespace zc::cpu
