#include "runtime/driver/compile_context.h"

#include "cache/cache.h"

namespace zc::runtime {

int64_t CompileReport::hits(cache::Level level) const {
  int64_t n = 0;
  for (cache::TierKind t : cache::kTierKinds) n += cache.at({level, t}).hits;
  return n;
}

void CompileReport::merge(const CompileReport& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  for (size_t i = 0; i < ms.size(); ++i) ms[i] += other.ms[i];
  cache.add(other.cache);
  cold = cold || other.cold;
}

std::string CompileReport::str() const {
  auto plural = [](int64_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  std::string s = plural(compiler_runs(), "compiler run");
  if (int64_t k = count(stats::Counter::kernels_generated)) s += ", " + plural(k, "kernel");
  if (int64_t t = count(stats::Counter::template_hits)) {
    s += ", " + plural(t, "graph") + " from size templates";
  }
  if (int64_t r = count(stats::Counter::template_refusals)) {
    s += ", " + plural(r, "size template refusal");
  }
  // Per level: hits by tier, then the lookups that missed in every tier: those are the
  // misses of the slowest tier any lookup reached (every lookup asks the tiers in one order).
  for (cache::Level level : cache::kLevels) {
    std::string hit_tiers;
    int64_t hit = 0, misses = 0;
    for (cache::TierKind t : cache::kTierKinds) {
      const cache::TierCounters& c = cache.at({level, t});
      if (c.hits) {
        hit += c.hits;
        hit_tiers += std::string(hit_tiers.empty() ? "" : ", ") + cache::tier_kind_name(t) + " " +
                     std::to_string(c.hits);
      }
      if (c.hits || c.misses || c.errors) misses = c.misses;
    }
    if (!hit && !misses) continue;
    s += std::string("; ") + cache::level_name(level) + ": ";
    if (hit) s += plural(hit, "hit") + " (" + hit_tiers + ")";
    if (misses)
      s += std::string(hit ? ", " : "") + std::to_string(misses) +
           (misses == 1 ? " miss" : " misses");
  }
  return s;
}

void CompileProgress::note_cold() {
  std::vector<std::weak_ptr<CompileProgress>> waiters;
  {
    std::lock_guard lock(mu_);
    if (cold_) return;
    cold_ = true;
    waiters = waiters_;
  }
  cv_.notify_all();
  for (const auto& w : waiters) {
    if (auto p = w.lock()) p->note_cold();
  }
}

void CompileProgress::note_finished() {
  {
    std::lock_guard lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
}

bool CompileProgress::cold() const {
  std::lock_guard lock(mu_);
  return cold_;
}

bool CompileProgress::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

void CompileProgress::wait_until_finished_or_cold() const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return finished_ || cold_; });
}

void CompileProgress::forward_cold_to(const std::shared_ptr<CompileProgress>& waiter) {
  if (!waiter || waiter.get() == this) return;
  {
    std::lock_guard lock(mu_);
    if (!cold_) {
      waiters_.push_back(waiter);
      return;
    }
  }
  waiter->note_cold();
}

CompileContext::CompileContext()
    : process_store_(true), progress_(std::make_shared<CompileProgress>()) {}

CompileContext::CompileContext(cache::Cache* store)
    : store_(store), progress_(std::make_shared<CompileProgress>()) {}

CompileContext::CompileContext(PartOf, const CompileContext& parent)
    : process_store_(parent.process_store_),
      store_(parent.store_.load()),
      who_(parent.who_),
      progress_(parent.progress_) {}

cache::Cache* CompileContext::store() {
  cache::Cache* s = store_.load(std::memory_order_acquire);
  if (!s && process_store_) {
    s = &cache::process_cache();
    store_.store(s, std::memory_order_release);
  }
  return s;
}

void CompileContext::count(stats::Counter c, int64_t n) {
  counts_[static_cast<size_t>(c)].fetch_add(n, std::memory_order_relaxed);
  stats::add(c, n);
}

void CompileContext::add_time(stats::Stage s, double ms) {
  ns_[static_cast<size_t>(s)].fetch_add(static_cast<int64_t>(ms * 1e6), std::memory_order_relaxed);
  stats::add_time(s, ms);
}

void CompileContext::note_cold_work() {
  progress_->note_cold();
}

void CompileContext::merge(const CompileReport& part) {
  std::lock_guard lock(mu_);
  merged_.merge(part);
  if (part.cold) progress_->note_cold();
}

CompileReport CompileContext::report() const {
  CompileReport r;
  for (size_t i = 0; i < r.counts.size(); ++i) r.counts[i] = counts_[i].load();
  for (size_t i = 0; i < r.ms.size(); ++i) r.ms[i] = static_cast<double>(ns_[i].load()) / 1e6;
  r.cache = lookups_.snapshot();
  r.cold = progress_->cold();
  std::lock_guard lock(mu_);
  r.merge(merged_);
  return r;
}

}  // namespace zc::runtime
