#include "cuda/stream.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"

namespace zc::cuda {

namespace {

struct DefaultStream {
  std::once_flag create_once;
  std::atomic<CUstream> stream{nullptr};
};

// One per device; never destroyed (nor are the streams), so work queued while the process
// exits still has a stream.
DefaultStream& default_stream_slot(int device) {
  static auto* const slots = [] {
    auto* s = new std::vector<std::unique_ptr<DefaultStream>>();
    for (int i = 0; i < device_count(); ++i) s->push_back(std::make_unique<DefaultStream>());
    return s;
  }();
  check_device(device);
  return *(*slots)[device];
}

CUstream default_stream(int device) {
  DefaultStream& slot = default_stream_slot(device);
  if (CUstream s = slot.stream.load(std::memory_order_acquire)) [[likely]]
    return s;
  std::call_once(slot.create_once, [&] {
    use_device(device);
    CUstream s = nullptr;
    check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate(cuda:" + std::to_string(device) + ")");
    slot.stream.store(s, std::memory_order_release);
  });
  return slot.stream.load(std::memory_order_acquire);
}

struct Override {
  bool set = false;
  CUstream stream = nullptr;  // may be the legacy default stream, hence `set`
};
thread_local std::vector<Override> tl_overrides;

}  // namespace

CUstream current_stream(int device) {
  if (device >= 0 && static_cast<size_t>(device) < tl_overrides.size() &&
      tl_overrides[device].set) {
    return tl_overrides[device].stream;
  }
  return default_stream(device);
}

StreamGuard::StreamGuard(int device, CUstream stream) : device_(device) {
  check_device(device);
  if (tl_overrides.size() <= static_cast<size_t>(device)) tl_overrides.resize(device + 1);
  Override& o = tl_overrides[device];
  had_previous_ = o.set;
  previous_ = o.stream;
  o = Override{true, stream};
}

StreamGuard::~StreamGuard() {
  tl_overrides[device_] = Override{had_previous_, previous_};
}

void synchronize(int device) {
  use_device(device);
  check(driver().cuCtxSynchronize(), "synchronizing cuda:" + std::to_string(device));
}

void synchronize() {
  for (int device : used_devices()) synchronize(device);
}

}  // namespace zc::cuda
