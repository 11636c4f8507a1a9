#include "ops/packed_gemm.h"

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "ops/blas.h"
#include "util/stats.h"

namespace zc::ops {

#ifdef ZC_WITH_DNNL

bool packed_gemm_available() {
  return true;
}

namespace {

using dnnl::memory;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// An f32 matrix [rows, cols] as BLAS passes it: row-major with leading dim ld, or its
// transpose stored so (column-major).
memory::desc f32_matrix(bool trans, int64_t rows, int64_t cols, int64_t ld) {
  return memory::desc({rows, cols}, memory::data_type::f32,
                      trans ? memory::dims{1, ld} : memory::dims{ld, 1});
}

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

// One problem's matmul, on B in the layout the primitive chose (`b_kept`), and the reorder
// that converts B from the caller's layout into it.
struct Plan {
  memory::desc a, b_user, b_kept, c;
  dnnl::reorder to_kept;
  dnnl::matmul product;
};

std::shared_ptr<const Plan> make_plan(const Key& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc] = key;
  auto p = std::make_shared<Plan>();
  p->a = f32_matrix(ta, m, k, lda);
  p->b_user = f32_matrix(tb, k, n, ldb);
  p->c = f32_matrix(false, m, n, ldc);
  const memory::desc b_any({k, n}, memory::data_type::f32, memory::format_tag::any);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p->a, b_any, p->c), engine());
  p->b_kept = pd.weights_desc();
  p->to_kept =
      dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p->b_user, engine(), p->b_kept));
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

// A call site meets one problem (its sizes are constants); the tuner and tests a few.
constexpr size_t kMaxPlans = 16;
// B copies per call site: one per weight of each instance of a repeated block it serves.
constexpr size_t kMaxKept = 256;

}  // namespace

struct PackedGemm::State {
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
      p = nullptr;  // refused: the product runs unpacked
    }
    if (plans.size() >= kMaxPlans) plans.erase(plans.begin());
    return plans.emplace(key, std::move(p)).first->second;
  }

  // B's kept copy in `plan`'s layout, made now if this is the sight that keeps it; null to run
  // unpacked this time.
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
      s->data = memory(plan.b_kept, engine());
      memory user(plan.b_user, engine(), const_cast<float*>(b));
      plan.to_kept.execute(thread_stream(), user, s->data);
      thread_stream().wait();
    } catch (const dnnl::error&) {
      return nullptr;  // no memory for the copy: unpacked
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

PackedGemm::PackedGemm(Keep keep) : state_(std::make_unique<State>()) {
  state_->keep = keep;
}

PackedGemm::~PackedGemm() = default;

int64_t PackedGemm::conversions() const {
  std::lock_guard lock(state_->mu);
  return state_->conversions;
}

int64_t PackedGemm::kept() const {
  std::lock_guard lock(state_->mu);
  int64_t n = 0;
  for (const auto& [b, s] : state_->seen) n += s->data ? 1 : 0;
  return n;
}

void PackedGemm::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc,
                     WeightIdentity b_id) const {
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<Seen> kept;
  if (b_id.known() && m > 0 && n > 0 && k > 0) {
    std::lock_guard lock(state_->mu);
    plan = state_->plan_for(Key{ta, tb, m, n, k, lda, ldb, ldc});
    if (plan) kept = state_->kept_for(*plan, b, b_id);
  }
  if (kept) {
    try {
      memory am(plan->a, engine(), const_cast<float*>(a)), cm(plan->c, engine(), c);
      plan->product.execute(
          thread_stream(),
          {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, kept->data}, {DNNL_ARG_DST, cm}});
      thread_stream().wait();
      return;
    } catch (const dnnl::error&) {
      // Its scratch could not be had: the same product unpacked.
    }
  }
  sgemm_on(GemmLibrary::onednn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

#else  // no oneDNN in this build: packed_gemm_available() is false, products run unpacked.

bool packed_gemm_available() {
  return false;
}
struct PackedGemm::State {};
PackedGemm::PackedGemm(Keep) {}
PackedGemm::~PackedGemm() = default;
int64_t PackedGemm::conversions() const {
  return 0;
}
int64_t PackedGemm::kept() const {
  return 0;
}
void PackedGemm::run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc, WeightIdentity) const {
  sgemm_on(GemmLibrary::openblas, ta, tb, m, n, k, a, lda, b, ldb, c, ldc);
}

#endif

}  // namespace zc::ops
