#include "cuda/blaslt_start.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "cuda/blaslt.h"
#include "cuda/blaslt_library.h"
#include "cuda/blaslt_warm.h"
#include "cuda/device.h"
#include "util/env.h"
#include "zc/cuda.h"

namespace zc::cuda {

namespace {

struct Starts {
  explicit Starts(int devices)
      : state(std::make_unique<std::atomic<BlasLtStart>[]>(static_cast<size_t>(devices))),
        error(static_cast<size_t>(devices)) {
    for (int d = 0; d < devices; ++d) state[d].store(BlasLtStart::idle);
  }
  std::mutex mu;
  std::condition_variable finished;
  // Read without the lock on every call of a compiled graph; written under it.
  std::unique_ptr<std::atomic<BlasLtStart>[]> state;
  std::vector<std::string> error;
  // Background starts not yet finished, their warm-ups included. Written under the lock (the
  // waits on `finished` read it there); blaslt_start_state reads it without.
  std::atomic<int> running{0};
};

// Never destroyed: a start may still be finishing (returning, past its last library call)
// while the process exits.
Starts& starts() {
  static Starts* const s = new Starts(device_count());
  return *s;
}

// The library's opening ahead of any device (preload_blaslt). Apart from Starts, which counts
// the devices: the preload begins while they are being found.
struct Preload {
  std::once_flag once;
  std::mutex mu;
  std::condition_variable finished;
  bool running = false;
};

Preload& preload() {
  static Preload* const p = new Preload();  // never destroyed, as Starts
  return *p;
}

// Waits for the preload, then for every background start, warm-ups included. The preload makes
// a single GPU's context, which starts cuBLASLt there: once it is over, that start is counted.
void wait_for_background_work() {
  {
    Preload& p = preload();
    std::unique_lock<std::mutex> lock(p.mu);
    p.finished.wait(lock, [&] { return !p.running; });
  }
  Starts& s = starts();
  std::unique_lock<std::mutex> lock(s.mu);
  s.finished.wait(lock, [&] { return s.running == 0; });
}

// Waits for every background start when the thread that holds it ends, exit() included (a
// thread's thread_local destructors run before the process's exit handlers).
struct WaitAtThreadEnd {
  ~WaitAtThreadEnd() { wait_for_background_work(); }
};

void wait_at_thread_end() {
  thread_local WaitAtThreadEnd wait;
  (void)wait;
}

// prepare_blaslt, and its outcome recorded; the caller holds no lock.
void prepare(int device) {
  std::string error;
  try {
    prepare_blaslt(device);
  } catch (const std::exception& e) {
    error = e.what();
  }
  Starts& s = starts();
  std::lock_guard<std::mutex> lock(s.mu);
  s.error[device] = error;
  s.state[device].store(error.empty() ? BlasLtStart::ready : BlasLtStart::failed,
                        std::memory_order_release);
  s.finished.notify_all();
}

// The background start: the library, then the previous process's products (blaslt_warm.h).
// It counts as running until both are done, so threads told so wait for the warm-up too at
// their end; gemm() waits only for the library.
void run_start(int device) {
  prepare(device);
  Starts& s = starts();
  const WarmSource source = warm_source();
  if (source && s.state[device].load(std::memory_order_acquire) == BlasLtStart::ready) {
    try {
      std::vector<GemmUse> products = source(device);
      if (!products.empty()) warm_products(device, products);
    } catch (const std::exception&) {
      // A warm-up is an optimization: whatever failed, products plan and load as they come.
    }
  }
  std::lock_guard<std::mutex> lock(s.mu);
  --s.running;
  s.finished.notify_all();
}

std::atomic<bool> prestart_disabled{false};

void run_preload() {
  bool mapped = false;
  try {
    (void)blaslt();  // maps the library; a failure is kept and raised by whoever uses it
    mapped = true;
  } catch (const std::exception&) {
  }
  // On a machine that shows one GPU, that GPU is the one the process will use: its context
  // (100-115 ms) is made now, which starts cuBLASLt on it (primary_context calls
  // prestart_blaslt), while the process builds or reads its model on the host. With several
  // GPUs the process may use any of them, and a context on one it does not use would hold its
  // memory: they wait for their first tensor, as before. (This thread asks for the devices
  // only after discovery, which started it, has returned: devices() waits for that.)
  if (mapped) {
    try {
      if (device_count() == 1) (void)primary_context(0);
    } catch (const std::exception&) {
      // The same failure meets the first tensor moved there, which reports it.
    }
  }
  Preload& p = preload();
  std::lock_guard<std::mutex> lock(p.mu);
  p.running = false;
  p.finished.notify_all();
}

}  // namespace

// ZC_CUDA_PRESTART=0 (or disable_prestart) leaves cuBLASLt alone until a compiled graph needs it.
bool prestart_enabled() {
  if (prestart_disabled.load(std::memory_order_relaxed)) return false;
  return env::flag(env::Var::cuda_prestart, true);
}

void disable_prestart() {
  prestart_disabled.store(true, std::memory_order_relaxed);
}

void preload_blaslt() {
  if (!prestart_enabled() || !blaslt_found()) return;
  Preload& p = preload();
  std::call_once(p.once, [&] {
    std::lock_guard<std::mutex> lock(p.mu);
    try {
      std::thread(run_preload).detach();
    } catch (const std::system_error&) {
      return;  // no thread to spare: the first start opens the library itself
    }
    p.running = true;
    wait_at_thread_end();
  });
}

void prestart_blaslt(int device) {
  if (!prestart_enabled() || !blaslt_found()) return;
  start_blaslt(device);
  (void)blaslt_start_state(device);  // this thread waits for it at its end if still starting
}

void start_blaslt(int device) {
  check_device(device);
  Starts& s = starts();
  if (s.state[device].load(std::memory_order_acquire) != BlasLtStart::idle) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.state[device].load(std::memory_order_relaxed) != BlasLtStart::idle) return;
  try {
    std::thread(run_start, device).detach();
  } catch (const std::system_error&) {
    return;  // no thread to spare: the first product starts the library itself
  }
  ++s.running;  // first: a thread that sees `starting` sees it running
  s.state[device].store(BlasLtStart::starting, std::memory_order_release);
}

BlasLtStart blaslt_start_state(int device) {
  check_device(device);
  Starts& s = starts();
  const BlasLtStart st = s.state[device].load(std::memory_order_acquire);
  // Starting, or warming up (blaslt_warm.h): a background start is running either way.
  if (s.running.load(std::memory_order_acquire) > 0) wait_at_thread_end();
  return st;
}

BlasLtStart wait_for_blaslt(int device) {
  start_blaslt(device);
  Starts& s = starts();
  std::unique_lock<std::mutex> lock(s.mu);
  s.finished.wait(lock, [&] {
    return s.state[device].load(std::memory_order_relaxed) != BlasLtStart::starting;
  });
  if (s.state[device].load(std::memory_order_relaxed) == BlasLtStart::idle) {
    lock.unlock();  // no thread could be made: start it here (without a warm-up)
    prepare(device);
    lock.lock();
  }
  return s.state[device].load(std::memory_order_relaxed);
}

void wait_for_blaslt_warmup(int device) {
  start_blaslt(device);
  wait_for_background_work();
}

std::string blaslt_start_error(int device) {
  check_device(device);
  Starts& s = starts();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.error[device];
}

bool prepare_matmul_library(int device, std::string* why) {
  if (!is_available()) {
    if (why) *why = unavailable_reason();
    return false;
  }
  if (wait_for_blaslt(device) == BlasLtStart::ready) return true;
  if (why) *why = blaslt_start_error(device);
  return false;
}

}  // namespace zc::cuda
