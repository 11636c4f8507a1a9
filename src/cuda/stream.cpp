#include "cuda/stream.h"

#include <memory>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"

namespace zc::cuda {

namespace {

struct Override {
  bool set = false;
  CUstream stream = nullptr;  // may be the legacy default stream, hence `set`
};
thread_local std::vector<Override> tl_overrides;

}  // namespace

DeviceStreams::DeviceStreams(std::string purpose) : purpose_(std::move(purpose)) {
  for (int i = 0; i < device_count(); ++i) slots_.push_back(std::make_unique<Slot>());
}

CUstream DeviceStreams::get(int device) {
  check_device(device);
  Slot& slot = *slots_[device];
  if (CUstream s = slot.stream.load(std::memory_order_acquire)) [[likely]]
    return s;
  std::call_once(slot.create_once, [&] {
    use_device(device);
    CUstream s = nullptr;
    check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
          "cuStreamCreate(" + purpose_ + ", cuda:" + std::to_string(device) + ")");
    slot.stream.store(s, std::memory_order_release);
  });
  return slot.stream.load(std::memory_order_acquire);
}

CUstream current_stream(int device) {
  if (device >= 0 && static_cast<size_t>(device) < tl_overrides.size() &&
      tl_overrides[device].set) {
    return tl_overrides[device].stream;
  }
  // Never destroyed (nor are the streams), so work queued while the process exits still has a
  // stream.
  static DeviceStreams* const defaults = new DeviceStreams("the default stream");
  return defaults->get(device);
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
