#include "cuda/device.h"

#include <atomic>
#include <memory>
#include <mutex>

#include "cuda/blaslt_start.h"
#include "cuda/driver.h"
#include "toolchain/nvrtc_workers.h"
#include "util/env.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

struct Slot {
  CUdevice handle = 0;
  DeviceProperties props;
  std::once_flag retain_once;
  std::atomic<CUcontext> context{nullptr};
};

struct Devices {
  std::string error;  // why there are none; empty when there are
  std::vector<std::unique_ptr<Slot>> slots;
};

int attribute(const Driver& d, CUdevice dev, CUdevice_attribute what, const char* name) {
  int value = 0;
  check(d.cuDeviceGetAttribute(&value, what, dev),
        std::string("cuDeviceGetAttribute(") + name + ")");
  return value;
}

void read_properties(const Driver& d, Slot& slot) {
  DeviceProperties& p = slot.props;
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, slot.handle), "cuDeviceGetName");
  p.name = name;
  p.major = attribute(d, slot.handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "major");
  p.minor = attribute(d, slot.handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "minor");
  p.multiprocessor_count =
      attribute(d, slot.handle, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessors");
  p.l2_cache_bytes = attribute(d, slot.handle, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache");
  p.max_shared_memory_per_block_optin = attribute(
      d, slot.handle, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory");
  p.warp_size = attribute(d, slot.handle, CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size");
  size_t total = 0;
  check(d.cuDeviceTotalMem(&total, slot.handle), "cuDeviceTotalMem");
  p.total_memory = total;
}

Devices* discover() {
  auto* out = new Devices();
  if (!driver_available(&out->error)) return out;
  try {
    const Driver& d = driver();
    int count = 0;
    check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
    for (int i = 0; i < count; ++i) {
      auto slot = std::make_unique<Slot>();
      check(d.cuDeviceGet(&slot->handle, i), "cuDeviceGet");
      read_properties(d, *slot);
      out->slots.push_back(std::move(slot));
    }
  } catch (const Error& e) {
    out->slots.clear();
    out->error = std::string("CUDA is not available: ") + e.what();
    return out;
  }
  if (out->slots.empty()) {
    const auto visible = env::get(env::Var::cuda_visible_devices);
    out->error = "CUDA is not available: the NVIDIA driver is loaded but reports no CUDA device";
    if (visible) out->error += " (CUDA_VISIBLE_DEVICES=" + *visible + " hides others)";
    return out;
  }
  // A process that looks for CUDA devices and finds one will most likely multiply matrices on
  // one: cuBLASLt's library starts opening now, on a background thread (cuda/blaslt_start.h,
  // which does not ask for the devices while they are being found).
  preload_blaslt();
  return out;
}

// Never destroyed, like the driver: a tensor freed during exit still finds its device.
const Devices& devices() {
  static const Devices* const d = discover();
  return *d;
}

thread_local int tl_device = -1;

}  // namespace

void check_device(int device) {
  const Devices& d = devices();
  if (!d.error.empty()) throw Error(d.error);
  const int n = static_cast<int>(d.slots.size());
  if (device < 0 || device >= n) {
    throw Error("cuda:" + std::to_string(device) + " is not a device of this machine: it has " +
                std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") + " (cuda:0" +
                (n == 1 ? "" : " to cuda:" + std::to_string(n - 1)) + ")");
  }
}

CUdevice device_handle(int device) {
  check_device(device);
  return devices().slots[device]->handle;
}

CUcontext primary_context(int device) {
  check_device(device);
  Slot& slot = *devices().slots[device];
  std::call_once(slot.retain_once, [&] {
    CUcontext ctx = nullptr;
    Timer timer;
    check(driver().cuDevicePrimaryCtxRetain(&ctx, slot.handle),
          "cuDevicePrimaryCtxRetain(cuda:" + std::to_string(device) + ")");
    ZC_LOG(timing) << "CUDA context on cuda:" << device << ": " << timer.ms() << " ms";
    slot.context.store(ctx, std::memory_order_release);
    // A tensor is about to live here: cuBLASLt's start on this device overlaps what the process
    // does before its first product (cuda/blaslt_start.h). Its thread waits for this call.
    prestart_blaslt(device);
    // So do NVRTC's helper processes, which need their own 100-250 ms start to be ready when
    // the first graph's parts compile side by side (toolchain/nvrtc_workers.h).
    if (prestart_enabled()) toolchain::start_nvrtc_helpers(sm_arch(device), {"--std=c++17"});
  });
  return slot.context.load(std::memory_order_acquire);
}

void use_device(int device) {
  if (device == tl_device) [[likely]]
    return;
  CUcontext ctx = primary_context(device);
  check(driver().cuCtxSetCurrent(ctx), "cuCtxSetCurrent(cuda:" + std::to_string(device) + ")");
  tl_device = device;
}

int current_device() {
  return tl_device;
}

std::vector<int> used_devices() {
  std::vector<int> out;
  const Devices& d = devices();
  for (size_t i = 0; i < d.slots.size(); ++i) {
    if (d.slots[i]->context.load(std::memory_order_acquire)) out.push_back(static_cast<int>(i));
  }
  return out;
}

bool is_available() {
  return devices().error.empty();
}

int device_count() {
  return static_cast<int>(devices().slots.size());
}

std::string unavailable_reason() {
  return devices().error;
}

int driver_version() {
  return driver_available() ? driver().version : 0;
}

std::string sm_arch(int device) {
  const DeviceProperties& p = device_properties(device);
  return "sm_" + std::to_string(p.major) + std::to_string(p.minor);
}

const DeviceProperties& device_properties(int device) {
  check_device(device);
  return devices().slots[device]->props;
}

}  // namespace zc::cuda
