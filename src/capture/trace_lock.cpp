#include "capture/trace_lock.h"

#include <condition_variable>
#include <mutex>

namespace zc::capture {

namespace {

// A readers-writer lock that lets a waiting writer in before new readers (glibc's rwlock
// prefers readers, and eager runs arrive in a steady stream while a compile waits).
class Lock {
 public:
  void lock_shared() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return !writer_ && writers_waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard l(mu_);
    if (--readers_ == 0) cv_.notify_all();
  }
  void lock() {
    std::unique_lock l(mu_);
    ++writers_waiting_;
    cv_.wait(l, [&] { return !writer_ && readers_ == 0; });
    --writers_waiting_;
    writer_ = true;
  }
  void unlock() {
    std::lock_guard l(mu_);
    writer_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int readers_ = 0;
  int writers_waiting_ = 0;
  bool writer_ = false;
};

Lock& trace_lock() {
  static Lock* lock = new Lock;  // never destroyed: threads may still unlock during exit
  return *lock;
}

// What this thread holds: the outermost scope takes the lock, nested ones nothing.
thread_local int t_captures = 0;
thread_local int t_eager = 0;
// Whether the innermost scope of this thread is an eager one.
thread_local bool t_eager_innermost = false;

}  // namespace

CaptureScope::CaptureScope() {
  if (t_captures++ == 0 && t_eager == 0) trace_lock().lock();
  saved_ = t_eager_innermost;
  t_eager_innermost = false;
}

CaptureScope::~CaptureScope() {
  t_eager_innermost = saved_;
  if (--t_captures == 0 && t_eager == 0) trace_lock().unlock();
}

EagerScope::EagerScope() {
  if (t_eager++ == 0 && t_captures == 0) trace_lock().lock_shared();
  saved_ = t_eager_innermost;
  t_eager_innermost = true;
}

EagerScope::~EagerScope() {
  t_eager_innermost = saved_;
  if (--t_eager == 0 && t_captures == 0) trace_lock().unlock_shared();
}

bool in_eager_scope() {
  return t_eager_innermost;
}

}  // namespace zc::capture
