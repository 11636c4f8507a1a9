#include "util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include "util/env.h"

namespace zc::logging {

namespace {
constexpr std::string_view kNames[] = {"cache",   "graph",  "output_code", "timing", "recompiles",
                                       "regions", "fusion", "kernels",     "roi",    "accuracy"};
static_assert(std::size(kNames) == static_cast<size_t>(Topic::count));

struct Config {
  std::atomic<bool> on[static_cast<int>(Topic::count)];
  Config() {
    for (auto& b : on) b = false;
    const std::optional<std::string> value = env::get(env::Var::logs);
    if (!value) return;
    const std::string& s = *value;
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t end = s.find(',', pos);
      if (end == std::string::npos) end = s.size();
      std::string_view item(s.data() + pos, end - pos);
      bool matched = false;
      for (size_t i = 0; i < std::size(kNames); ++i) {
        // `all` leaves out kernels and roi, which change how calls run (log.h).
        const bool in_all =
            static_cast<Topic>(i) != Topic::kernels && static_cast<Topic>(i) != Topic::roi;
        if (item == kNames[i] || (item == "all" && in_all)) {
          on[i] = true;
          matched = true;
        }
      }
      if (!matched && !item.empty()) {
        std::fprintf(stderr,
                     "[zc] ZC_LOGS: unknown topic '%.*s' (known: cache, graph, "
                     "output_code, timing, recompiles, regions, fusion, kernels, roi, accuracy, "
                     "all)\n",
                     static_cast<int>(item.size()), item.data());
      }
      pos = end + 1;
    }
  }
};
Config& config() {
  static Config c;
  return c;
}
// The timing topic's clock: set while the library is initialized, before main, so its lines
// say when (ms into the process) as well as how long, and overlapping work shows as such.
const std::chrono::steady_clock::time_point kProcessStart = std::chrono::steady_clock::now();

// Never destroyed: what is logged while the process exits (the kernel profile) still has it.
std::mutex& out_mutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}
}  // namespace

bool enabled(Topic t) {
  return config().on[static_cast<int>(t)].load(std::memory_order_relaxed);
}
void set_enabled(Topic t, bool on) {
  config().on[static_cast<int>(t)] = on;
}
std::string_view topic_name(Topic t) {
  return kNames[static_cast<int>(t)];
}

void write(Topic t, std::string_view message) {
  char when[32] = "";
  if (t == Topic::timing) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - kProcessStart)
            .count();
    std::snprintf(when, sizeof when, "[%.2f ms] ", ms);
  }
  std::lock_guard lock(out_mutex());
  // Prefix every line so that multi-line blocks (graphs, source) stay greppable.
  size_t pos = 0;
  do {
    size_t end = message.find('\n', pos);
    if (end == std::string_view::npos) end = message.size();
    std::fprintf(stderr, "[zc:%.*s] %s%.*s\n", static_cast<int>(topic_name(t).size()),
                 topic_name(t).data(), when, static_cast<int>(end - pos), message.data() + pos);
    pos = end + 1;
  } while (pos < message.size());
}

}  // namespace zc::logging
