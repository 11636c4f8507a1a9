#include "ops/onednn_matmul.h"

#include <omp.h>

#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/onednn_common.h"
#endif

#include "ops/blas.h"
#include "util/stats.h"

namespace zc::ops {

namespace {

// Whether the [rows, cols] matrices at p (leading dim lp) and q (lq) share memory.
bool overlap(const float* p, int64_t rows_p, int64_t cols_p, int64_t lp, const float* q,
             int64_t rows_q, int64_t cols_q, int64_t lq) {
  if (!p || !q || rows_p <= 0 || rows_q <= 0 || cols_p <= 0 || cols_q <= 0) return false;
  const float* p_end = p + (rows_p - 1) * lp + cols_p;
  const float* q_end = q + (rows_q - 1) * lq + cols_q;
  return p < q_end && q < p_end;
}

float activate(float x, GemmEpilogue::Act act) {
  switch (act) {
    case GemmEpilogue::Act::none:
      return x;
    case GemmEpilogue::Act::relu:
      return x > 0 ? x : 0;
    case GemmEpilogue::Act::gelu_tanh:
      return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case GemmEpilogue::Act::gelu_erf:
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
  }
  return x;
}

}  // namespace

void apply_epilogue(int64_t m, int64_t n, const float* src, int64_t lds, float* dst, int64_t ldd,
                    const GemmEpilogue& e) {
  if (e.empty() && src == dst && lds == ldd) return;
#pragma omp parallel for schedule(static) if (m * n >= 32768)
  for (int64_t i = 0; i < m; ++i) {
    const float* from = src + i * lds;
    const float* res = e.residual ? e.residual + i * e.ldr : nullptr;
    float* to = dst + i * ldd;
    for (int64_t j = 0; j < n; ++j) {
      float v = from[j];
      if (e.bias) v += e.bias[j];
      if (res) v += res[j];
      to[j] = activate(v, e.act);
    }
  }
}

bool output_is_read(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* c, int64_t ldc,
                    const GemmEpilogue& e) {
  return overlap(c, m, n, ldc, a, ta ? k : m, ta ? m : k, lda) ||
         overlap(c, m, n, ldc, b, tb ? n : k, tb ? k : n, ldb) ||
         (e.residual && overlap(c, m, n, ldc, e.residual, m, n, e.ldr));
}

#ifdef ZC_WITH_DNNL

bool onednn_matmul_available() {
  return true;
}

namespace {

using dnnl::memory;

// The problem, the epilogue's shape (bias, residual, activation) and whether B is kept.
using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool,
                       uint8_t, bool>;

// One problem's matmul with its epilogue as bias and post-ops, on B as given or on B in the
// layout the primitive chose (`b_kept`, with the reorder that converts B into it).
struct Plan {
  memory::desc a, b_user, b_kept, c, bias;
  dnnl::reorder to_kept;
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
  // took oneDNN 2.6's convolutions off their brgemm kernels (ops/onednn_conv.h).
  dnnl::post_ops post;
  if (residual) post.append_sum(1.f);
  const auto a_act = static_cast<GemmEpilogue::Act>(act);
  if (a_act != GemmEpilogue::Act::none) post.append_eltwise(1.f, eltwise_of(a_act), 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(post);
  const dnnl::matmul::desc d =
      bias ? dnnl::matmul::desc(p->a, b, p->bias, p->c) : dnnl::matmul::desc(p->a, b, p->c);
  const dnnl::matmul::primitive_desc pd(d, attr, dnnl_engine());
  p->b_kept = pd.weights_desc();
  if (kept) {
    p->to_kept = dnnl::reorder(
        dnnl::reorder::primitive_desc(dnnl_engine(), p->b_user, dnnl_engine(), p->b_kept));
  }
  p->product = dnnl::matmul(pd);
  return p;
}

// What one B address was last seen holding, and its kept copy once made.
struct Seen {
  WeightIdentity id;
  memory::desc layout;
  memory data;  // empty until kept
  uint64_t last_use = 0;
};

// A call site meets one problem (its sizes are constants) or, for code serving many sizes, one
// per size: past this many, the oldest plan goes.
constexpr size_t kMaxPlans = 64;
// B copies per call site: one per weight of each instance of a repeated block it serves.
constexpr size_t kMaxKept = 256;

}  // namespace

struct OnednnMatmul::State {
  Keep keep;
  mutable std::mutex mu;
  mutable std::map<Key, std::shared_ptr<const Plan>> plans;
  mutable std::unordered_map<const void*, std::shared_ptr<Seen>> seen;
  mutable uint64_t clock = 0;
  mutable int64_t conversions = 0;

  std::shared_ptr<const Plan> plan_for(const Key& key) const {
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    std::shared_ptr<const Plan> p;
    try {
      p = make_plan(key);
    } catch (const dnnl::error&) {
      p = nullptr;  // refused: the product runs as dnnl_sgemm and the epilogue
    }
    if (plans.size() >= kMaxPlans) plans.erase(plans.begin());
    return plans.emplace(key, std::move(p)).first->second;
  }

  // B's kept copy in `plan`'s layout, made now if this is the sight that keeps it; null to run
  // on B as given this time.
  std::shared_ptr<Seen> kept_for(const Plan& plan, const float* b, WeightIdentity id) const {
    ++clock;
    auto it = seen.find(b);
    if (it != seen.end() && it->second->id == id && it->second->layout == plan.b_kept &&
        it->second->data) {
      it->second->last_use = clock;
      return it->second;
    }
    const bool again = it != seen.end() && it->second->id == id;
    if (!again && keep == Keep::second_sight) {
      remember(b, std::make_shared<Seen>(Seen{id, plan.b_kept, memory(), clock}));
      return nullptr;
    }
    auto s = std::make_shared<Seen>(Seen{id, plan.b_kept, memory(), clock});
    try {
      s->data = memory(plan.b_kept, dnnl_engine());
      memory user(plan.b_user, dnnl_engine(), const_cast<float*>(b));
      plan.to_kept.execute(dnnl_thread_stream(), user, s->data);
      dnnl_thread_stream().wait();
    } catch (const dnnl::error&) {
      return nullptr;  // no memory for the copy: B as given
    }
    ++conversions;
    zc::stats::add(zc::stats::Counter::weights_kept);
    remember(b, s);
    return s;
  }

  void remember(const float* b, std::shared_ptr<Seen> s) const {
    if (seen.size() >= kMaxKept && seen.find(b) == seen.end()) {
      // The address not met for the longest time goes (a weight freed long ago).
      auto oldest = seen.begin();
      for (auto i = seen.begin(); i != seen.end(); ++i) {
        if (i->second->last_use < oldest->second->last_use) oldest = i;
      }
      seen.erase(oldest);
    }
    seen[b] = std::move(s);
  }
};

OnednnMatmul::OnednnMatmul(Keep keep) : state_(std::make_unique<State>()) {
  state_->keep = keep;
}

OnednnMatmul::~OnednnMatmul() = default;

int64_t OnednnMatmul::conversions() const {
  std::lock_guard lock(state_->mu);
  return state_->conversions;
}

int64_t OnednnMatmul::kept() const {
  std::lock_guard lock(state_->mu);
  int64_t n = 0;
  for (const auto& [b, s] : state_->seen) n += s->data ? 1 : 0;
  return n;
}

void OnednnMatmul::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                       const GemmEpilogue& e, WeightIdentity keep_b) const {
  // The fused product writes C while it reads A and B: C sharing memory with either (a buffer
  // reused once they are dead), or partly with the residual, takes the path through a
  // separate product. A residual that is C itself is summed in place.
  const bool in_place = e.residual == c && e.ldr == ldc;
  const bool shared = in_place ? output_is_read(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, {})
                               : output_is_read(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, e);
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<Seen> kept;
  if (!shared && m > 0 && n > 0 && k > 0) {
    std::lock_guard lock(state_->mu);
    plan =
        state_->plan_for(Key{ta, tb, m, n, k, lda, ldb, ldc, e.bias != nullptr,
                             e.residual != nullptr, static_cast<uint8_t>(e.act), keep_b.known()});
    if (plan && keep_b.known()) {
      kept = state_->kept_for(*plan, b, keep_b);
      // Not kept yet: this call reads B as given, through the plan that does.
      if (!kept)
        plan = state_->plan_for(Key{ta, tb, m, n, k, lda, ldb, ldc, e.bias != nullptr,
                                    e.residual != nullptr, static_cast<uint8_t>(e.act), false});
    }
  }
  if (plan) {
    try {
      if (e.residual && e.residual != c) {
#pragma omp parallel for schedule(static) if (m * n >= 32768)
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = e.residual[i * e.ldr + j];
        }
      }
      const dnnl::engine& en = dnnl_engine();
      memory am(plan->a, en, const_cast<float*>(a)), cm(plan->c, en, c);
      memory bm = kept ? kept->data : memory(plan->b_user, en, const_cast<float*>(b));
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
      if (e.bias) args.emplace(DNNL_ARG_BIAS, memory(plan->bias, en, const_cast<float*>(e.bias)));
      plan->product.execute(dnnl_thread_stream(), args);
      dnnl_thread_stream().wait();
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

}  // namespace zc::ops
