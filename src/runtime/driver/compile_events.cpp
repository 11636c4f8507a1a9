#include "runtime/driver/compile_events.h"

#include <condition_variable>
#include <mutex>

namespace zc::runtime {

namespace {
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t cold = 0;
};
Events& events() {
  static Events* e = new Events;  // never destroyed: background compiles may end during exit
  return *e;
}
}  // namespace

void note_cold_work() {
  Events& e = events();
  {
    std::lock_guard lock(e.mu);
    ++e.cold;
  }
  e.cv.notify_all();
}

uint64_t cold_work_count() {
  Events& e = events();
  std::lock_guard lock(e.mu);
  return e.cold;
}

void note_compile_finished() {
  Events& e = events();
  { std::lock_guard lock(e.mu); }  // a waiter between its check and its sleep sees the change
  e.cv.notify_all();
}

void wait_until_done_or_cold(uint64_t since, const std::function<bool()>& done) {
  Events& e = events();
  std::unique_lock lock(e.mu);
  e.cv.wait(lock, [&] { return e.cold > since || done(); });
}

}  // namespace zc::runtime
