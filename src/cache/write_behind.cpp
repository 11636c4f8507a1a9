#include "cache/write_behind.h"

#include <pthread.h>
#include <unistd.h>

#include <new>
#include <vector>

namespace zc::cache {

// The live writers, for the fork handlers: each one's lock is taken before fork() and released
// after it, in parent and child alike; the child also gets fresh condition variables.
struct WriteBehind::ForkGuard {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<WriteBehind*>& live() {
    static std::vector<WriteBehind*> writers;
    return writers;
  }
  static void add(WriteBehind* w) {
    static std::once_flag registered;
    std::call_once(registered, [] { ::pthread_atfork(&before, &in_parent, &in_child); });
    std::lock_guard lock(mu());
    live().push_back(w);
  }
  static void remove(WriteBehind* w) {
    std::lock_guard lock(mu());
    std::erase(live(), w);
  }
  static void before() {
    mu().lock();
    for (WriteBehind* w : live()) w->mu_.lock();
  }
  static void in_parent() {
    for (WriteBehind* w : live()) w->mu_.unlock();
    mu().unlock();
  }
  static void in_child() {
    for (WriteBehind* w : live()) {
      // The parent's thread, idle, was waiting on cv_: the copy here still counts that waiter,
      // which does not exist in the child, and glibc's notify then waits for it to wake,
      // forever. The child gets a fresh one; the old is not destroyed (its destructor would
      // wait too) but reused in place, which nothing else can be touching under mu_.
      new (&w->cv_) std::condition_variable;
      w->mu_.unlock();
    }
    mu().unlock();
  }
};

WriteBehind::WriteBehind(Tier& target) : target_(target) {
  ForkGuard::add(this);
}

WriteBehind::~WriteBehind() {
  stop();
  ForkGuard::remove(this);
}

void WriteBehind::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopped_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopped, nothing left
    Entry next = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    lock.unlock();
    target_.put(next);
    lock.lock();
    writing_ = false;
    cv_.notify_all();
  }
}

void WriteBehind::ensure_thread_locked() {
  if (thread_ && thread_pid_ == ::getpid()) return;
  if (thread_) {
    // Forked: the thread is the parent's. Its handle is dropped, not joined (the thread does
    // not exist here); an entry it was writing at the fork is the parent's to finish.
    (void)thread_.release();
    writing_ = false;
  }
  thread_pid_ = ::getpid();
  thread_ = std::make_unique<std::thread>([this] { loop(); });
}

void WriteBehind::write(Entry e) {
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      pending_.push_back(std::move(e));
      ensure_thread_locked();
      cv_.notify_all();
      return;
    }
  }
  target_.put(e);
}

void WriteBehind::drain() {
  std::unique_lock lock(mu_);
  if (pending_.empty() && !writing_) return;
  if (!stopped_) ensure_thread_locked();
  cv_.wait(lock, [&] { return pending_.empty() && !writing_; });
}

void WriteBehind::stop() {
  std::deque<Entry> orphans;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    if (thread_ && thread_pid_ != ::getpid()) {
      (void)thread_.release();  // the parent's thread, see ensure_thread_locked
      writing_ = false;
      orphans.swap(pending_);
    }
  }
  cv_.notify_all();
  for (const Entry& e : orphans) target_.put(e);
  // The thread empties the queue before it ends.
  if (thread_ && thread_->joinable()) thread_->join();
}

}  // namespace zc::cache
