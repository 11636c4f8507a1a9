#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace zc {

void run_indexed(size_t n, const std::function<void(size_t)>& fn, size_t max_threads) {
  if (n == 0) return;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr first;
  size_t first_index = n;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mu);
        if (i < first_index) {
          first = std::current_exception();
          first_index = i;
        }
      }
    }
  };
  size_t hw = std::max<size_t>(1, std::thread::hardware_concurrency());
  if (max_threads > 0) hw = std::min(hw, max_threads);
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min(n, hw); ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones running (and this one) take the rest
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace zc
