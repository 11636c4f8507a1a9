#include "runtime/driver/code_cache.h"

#include <atomic>
#include <future>
#include <mutex>
#include <unordered_map>

#include "cache/cache.h"
#include "util/stats.h"
#include "zc/compile.h"

namespace zc::runtime {

namespace {
struct Entry {
  std::shared_future<std::shared_ptr<const Executable>> exec;
  std::shared_ptr<CompileProgress> owner;  // the compile that makes it
};
struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;
  std::atomic<uint64_t> generation{1};
};
Cache& cache() {
  static Cache c;
  return c;
}
}  // namespace

std::shared_ptr<const Executable> code_cache_get(const std::string& key, const CompileFn& compile,
                                                 CompileContext& ctx) {
  Cache& c = cache();
  for (;;) {
    std::promise<std::shared_ptr<const Executable>> promise;
    std::shared_future<std::shared_ptr<const Executable>> future;
    bool owner = false;
    {
      std::lock_guard lock(c.mu);
      auto it = c.entries.find(key);
      if (it != c.entries.end()) {
        future = it->second.exec;
        // The wait lasts as long as the owner's work: a caller waiting only while the caches
        // serve its compile stops waiting when the owner's compile goes cold.
        if (it->second.owner) it->second.owner->forward_cold_to(ctx.progress());
      } else {
        future = promise.get_future().share();
        c.entries.emplace(key, Entry{future, ctx.progress()});
        owner = true;
      }
    }
    if (!owner) {
      // Null: the owner only tried to load (a preload that found nothing); try again, which
      // finds the entry gone and compiles.
      if (auto exec = future.get()) {  // rethrows the owner's error, if any
        ctx.count(stats::Counter::code_cache_hits);
        return exec;
      }
      continue;
    }
    std::shared_ptr<const Executable> exec;
    try {
      exec = compile();
    } catch (...) {
      // A failed compile must not stay cached: the next call tries again.
      {
        std::lock_guard lock(c.mu);
        c.entries.erase(key);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
    {
      std::lock_guard lock(c.mu);
      if (!exec) {
        c.entries.erase(key);
      } else if (auto it = c.entries.find(key);
                 it != c.entries.end() && it->second.owner == ctx.progress()) {
        it->second.owner.reset();  // made: nobody waits on its work any more
      }
    }
    if (exec) ctx.count(stats::Counter::code_cache_misses);
    promise.set_value(exec);
    return exec;
  }
}

bool code_cache_contains(const std::string& key) {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.entries.count(key) != 0;
}

void code_cache_clear() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.entries.clear();
  c.generation.fetch_add(1);
}

uint64_t code_cache_generation() {
  return cache().generation.load(std::memory_order_acquire);
}

}  // namespace zc::runtime

namespace zc::compiler {
void reset() {
  runtime::code_cache_clear();
}
}  // namespace zc::compiler
