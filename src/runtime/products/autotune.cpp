#include "runtime/products/autotune.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "cache/cache.h"
#include "cpu/blas.h"
#include "cpu/threads.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/records/codec.h"
#include "toolchain/target.h"
#include "util/bytes.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"

namespace zc::runtime {

namespace {

// Warm-up: at least kWarmups runs, then more until kWarmupMs have passed or kMaxWarmups ran.
constexpr int kWarmups = 2, kMaxWarmups = 32, kTimed = 5;
constexpr double kWarmupMs = 50;
// A candidate whose first run is this many times slower than the best so far stops there.
constexpr double kHopeless = 3;
// A later candidate must beat the best so far by this much: near-equal ones keep the earlier.
constexpr double kMargin = 0.97;
constexpr uint64_t kMaxCandidates = 64, kMaxBatchDims = 16;

[[noreturn]] void malformed(const std::string& what) {
  throw Error(std::string(kTuningFormat.name) + ": " + what);
}

}  // namespace

cache::Key tuning_record_key(const cpu::GemmProblem& p, const TuningHost& host) {
  return cpu_gemm_choice_key(p.str(), host.threads, tuning_provenance(host));
}

namespace {

// Fills `count` elements of `dtype` at `data` with values in [-1, 1), a function of the index
// alone, on the calling thread's OpenMP team.
void fill(void* data, DType dtype, int64_t count) {
  auto value = [](int64_t i) {
    return static_cast<double>((static_cast<uint64_t>(i) * 2654435761u >> 8) & 0xffff) / 32768.0 -
           1;
  };
  if (dtype == DType::f64) {
    auto* d = static_cast<double*>(data);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) d[i] = value(i);
  } else {
    auto* f = static_cast<float*>(data);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) f[i] = static_cast<float>(value(i));
  }
}

// Buffers laid out as `p`'s operands (f64 storage, so an f32 buffer is aligned as well).
struct Operands {
  std::vector<double> a, b, c;
  DType dtype;
  int64_t a_count;
  explicit Operands(const cpu::GemmProblem& p) : dtype(p.dtype), a_count(p.extents()[0]) {
    const auto e = p.extents();
    auto doubles = [&](int64_t count) {
      return static_cast<size_t>(count * static_cast<int64_t>(dtype_size(dtype)) + 7) / 8;
    };
    a.resize(doubles(e[0]));
    b.resize(doubles(e[1]));
    c.resize(doubles(e[2]));
    fill(a.data(), dtype, e[0]);
    fill(b.data(), dtype, e[1]);
  }
  // What runs before a product in a graph: the kernel that computes its left operand, a
  // parallel loop of zc's over it.
  void produce_a() { fill(a.data(), dtype, a_count); }
};

// A candidate's median over kTimed runs after its warm-up. The warm-up is long because a
// library's first products of a shape can be much slower than its steady ones: oneDNN's
// 512x768x256 here ran its first ~30 calls in 1.6 ms each and the rest in 1.06 ms (OpenBLAS
// 1.13 ms throughout), so two warm-up runs chose OpenBLAS where the model ran faster with
// oneDNN. A candidate whose first run takes more than kHopeless times the best median so far
// (`best`, 0 for none) cannot win: that run is its time, and it runs no more.
double median_us(const cpu::GemmProblem& p, cpu::GemmChoice choice, Operands& o, double best) {
  // B stays put across the runs, so a packed choice is timed on its kept copy, as it runs.
  const cpu::GemmRun run(p, choice);
  if (choice.library == cpu::GemmChoice::Library::onednn_packed) {
    // Its conversion, outside the timings: a call site makes it once per weight.
    o.produce_a();
    run(o.a.data(), o.b.data(), o.c.data());
  }
  Timer warm;
  for (int i = 0; i < kMaxWarmups && (i < kWarmups || warm.ms() < kWarmupMs); ++i) {
    o.produce_a();
    Timer t;
    run(o.a.data(), o.b.data(), o.c.data());
    if (i == 0 && best > 0 && t.ms() * 1e3 > kHopeless * best) return t.ms() * 1e3;
  }
  std::vector<double> us;
  for (int i = 0; i < kTimed; ++i) {
    o.produce_a();
    Timer t;
    run(o.a.data(), o.b.data(), o.c.data());
    us.push_back(t.ms() * 1e3);
  }
  std::nth_element(us.begin(), us.begin() + kTimed / 2, us.end());
  return us[kTimed / 2];
}

TunedProduct time_candidates(const cpu::GemmProblem& p) {
  // Timed as a call would run it: one call's share of the pool, all of it when none is in
  // flight.
  cpu::CpuCallShare share;
  TunedProduct t;
  t.problem = p;
  t.team = share.refresh();
  t.timed = true;
  Operands operands(p);
  double best = 0;
  for (const cpu::GemmChoice& c : cpu::gemm_candidates(p, t.team)) {
    const double us = median_us(p, c, operands, t.medians_us.empty() ? 0 : best);
    t.medians_us.emplace_back(c, us);
    if (t.medians_us.size() == 1 || us < best * kMargin) {
      best = us;
      t.choice = c;
    }
  }
  return t;
}

void write_problem(ByteWriter& w, const cpu::GemmProblem& p) {
  w.u8(static_cast<uint8_t>(p.dtype));
  w.u8(p.ta);
  w.u8(p.tb);
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc}) w.i64(v);
  w.u64(p.batch.size());
  for (const auto& d : p.batch) {
    for (int64_t v : d) w.i64(v);
  }
  w.u8(p.b_weight);
}

cpu::GemmProblem read_problem(RecordReader& r) {
  cpu::GemmProblem p;
  const uint8_t dt = r.u8();
  if (dt != static_cast<uint8_t>(DType::f32) && dt != static_cast<uint8_t>(DType::f64)) {
    r.fail("dtype code " + std::to_string(dt) + ", expected f32 or f64");
  }
  p.dtype = static_cast<DType>(dt);
  p.ta = r.u8() != 0;
  p.tb = r.u8() != 0;
  for (int64_t* v : {&p.m, &p.n, &p.k, &p.lda, &p.ldb, &p.ldc}) *v = r.i64();
  p.batch.resize(r.count(kMaxBatchDims, "batch dims"));
  for (auto& d : p.batch) {
    for (int64_t& v : d) v = r.i64();
  }
  p.b_weight = r.u8() != 0;
  return p;
}

// What this process chose, for compiler::autotune_choices(): by problem.
struct Chosen {
  std::mutex mu;
  std::map<std::string, TunedProduct> by_problem;
};
Chosen& chosen() {
  static Chosen c;
  return c;
}

}  // namespace

TuningHost this_host() {
  return TuningHost{toolchain::host_cpu_fingerprint(), cpu::gemm_library_versions(),
                    cpu::cpu_threads()};
}

cache::Provenance tuning_provenance(const TuningHost& host) {
  return cache::Provenance{"", host.cpu, host.libraries};
}

std::vector<uint8_t> encode_tuned(const TunedProduct& t) {
  RecordWriter w(kTuningFormat);
  write_problem(w, t.problem);
  w.u8(t.choice.code());
  w.u32(static_cast<uint32_t>(t.team));
  w.u64(t.medians_us.size());
  for (const auto& [c, us] : t.medians_us) {
    w.u8(c.code());
    w.f64(us);
  }
  return w.take();
}

TunedProduct decode_tuned(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kTuningFormat);
  TunedProduct t;
  t.problem = read_problem(r);
  t.choice = cpu::GemmChoice::from_code(r.u8());
  t.team = static_cast<int>(r.u32());
  if (t.team < 1) r.fail("a team of " + std::to_string(t.team) + " threads");
  const uint64_t n = r.count(kMaxCandidates, "candidates");
  for (uint64_t i = 0; i < n; ++i) {
    const cpu::GemmChoice c = cpu::GemmChoice::from_code(r.u8());
    t.medians_us.emplace_back(c, r.f64());
  }
  r.finish("candidate");
  return t;
}

std::string describe_tuned(const TunedProduct& t) {
  std::string s = t.problem.str() + " -> " + t.choice.str(t.team);
  char buf[96];
  for (const auto& [c, us] : t.medians_us) {
    if (c == t.choice) {
      std::snprintf(buf, sizeof buf, " (%.1f us", us);
      s += buf;
    }
  }
  if (!t.medians_us.empty()) {
    std::snprintf(buf, sizeof buf, "; default %.1f us)", t.medians_us.front().second);
    s += buf;
  }
  return s;
}

std::vector<TunedProduct> tune_products(std::span<const cpu::GemmProblem> problems,
                                        CompileContext& ctx, const TuningHost& host) {
  static std::mutex turns;  // timings that overlap would measure each other
  cache::Cache* store = ctx.store();
  std::vector<TunedProduct> out;
  for (const cpu::GemmProblem& p : problems) {
    const cache::Key key = tuning_record_key(p, host);
    std::optional<TunedProduct> found;
    if (store) {
      if (auto e = store->get(key, ctx.lookups())) {
        try {
          found = decode_tuned(e->payload);
          if (!(found->problem == p)) malformed("it is for " + found->problem.str());
        } catch (const Error& err) {
          ZC_LOG(cache) << "autotune record for " << p.str() << " unusable (" << err.what()
                        << "); timing again";
          found.reset();
        }
      }
    }
    if (found) {
      ctx.count(stats::Counter::autotune_hits);
      out.push_back(std::move(*found));
      continue;
    }
    std::lock_guard lock(turns);
    Timer t;
    TunedProduct tuned = time_candidates(p);
    ctx.count(stats::Counter::autotune_timings);
    ZC_LOG(timing) << "autotune " << describe_tuned(tuned) << ": " << tuned.medians_us.size()
                   << " candidates in " << t.ms() << " ms";
    if (store) store->put(key, encode_tuned(tuned), t.ms(), ctx.lookups());
    out.push_back(std::move(tuned));
  }
  return out;
}

std::shared_ptr<const codegen::Executable> autotuned(
    std::shared_ptr<const codegen::Executable> exec, CompileContext& ctx) {
  const std::vector<codegen::LibraryProduct> products = exec->library_products();
  if (products.empty()) return exec;
  Timer t;
  std::vector<cpu::GemmProblem> distinct;
  for (const auto& lp : products) {
    if (std::find(distinct.begin(), distinct.end(), lp.problem) == distinct.end()) {
      distinct.push_back(lp.problem);
    }
  }
  const std::vector<TunedProduct> tuned = tune_products(distinct, ctx, this_host());
  std::vector<uint8_t> choices = exec->product_choices();
  for (const auto& lp : products) {
    const size_t at = std::find(distinct.begin(), distinct.end(), lp.problem) - distinct.begin();
    choices.at(static_cast<size_t>(lp.site)) = tuned[at].choice.code();
  }
  {
    Chosen& c = chosen();
    std::lock_guard lock(c.mu);
    for (const TunedProduct& x : tuned) c.by_problem[x.problem.str()] = x;
  }
  auto out = exec->with_product_choices(std::move(choices));
  ctx.add_time(stats::Stage::autotune, t.ms());
  return out;
}

std::vector<TunedProduct> chosen_products() {
  Chosen& c = chosen();
  std::lock_guard lock(c.mu);
  std::vector<TunedProduct> out;
  for (const auto& [k, v] : c.by_problem) out.push_back(v);
  return out;
}

}  // namespace zc::runtime
