#include "cuda/driver.h"

#include <dlfcn.h>

#include "util/env.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

// The expanded spelling of a name: the versioned symbol the CUDA headers map it to.
#define ZC_CUDA_SYMBOL_(name) #name
#define ZC_CUDA_SYMBOL(name) ZC_CUDA_SYMBOL_(name)

constexpr const char* kFix =
    "; install the NVIDIA driver, or run on a machine with an NVIDIA GPU (use Device::cpu() "
    "otherwise)";

struct Loaded {
  Driver driver;
  std::string error;  // empty when the driver is usable
};

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

Loaded load() {
  Loaded out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string first = dl_error();
    lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      out.error = "CUDA is not available: cannot load the CUDA driver library libcuda.so.1 (" +
                  first + ")" + kFix;
      return out;
    }
  }
  Driver& d = out.driver;
  std::string missing;
#define ZC_CUDA_RESOLVE(name)                                                    \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(lib, ZC_CUDA_SYMBOL(name))); \
  if (!d.name) missing += std::string(missing.empty() ? "" : ", ") + ZC_CUDA_SYMBOL(name);
  ZC_CUDA_DRIVER_FUNCTIONS(ZC_CUDA_RESOLVE)
#undef ZC_CUDA_RESOLVE
  d.cuFuncLoad = reinterpret_cast<decltype(d.cuFuncLoad)>(dlsym(lib, "cuFuncLoad"));
  if (!missing.empty()) {
    // The library stays loaded: unloading a driver that may have started threads is unsafe.
    out.error = "CUDA is not available: the CUDA driver library lacks " + missing +
                "; it is older than this build of zerocompile needs (CUDA " +
                std::to_string(CUDA_VERSION / 1000) + "." +
                std::to_string(CUDA_VERSION % 1000 / 10) + "): update the NVIDIA driver";
    return out;
  }
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    d.cuGetErrorName(r, &name);
    d.cuGetErrorString(r, &text);
    out.error = std::string("CUDA is not available: cuInit failed with ") +
                (name ? name : "error " + std::to_string(static_cast<int>(r))) + " (" +
                (text ? text : "no description") + ")";
    if (r == CUDA_ERROR_STUB_LIBRARY) {
      out.error +=
          ": the CUDA toolkit's stub libcuda.so was loaded instead of the driver's; take the "
          "stubs directory out of LD_LIBRARY_PATH";
    } else if (const auto visible = env::get(env::Var::cuda_visible_devices)) {
      out.error += " with CUDA_VISIBLE_DEVICES=" + *visible + kFix;
    } else {
      out.error += kFix;
    }
    return out;
  }
  if (d.cuDriverGetVersion(&d.version) != CUDA_SUCCESS) d.version = 0;
  return out;
}

// Never destroyed: memory freed during static destruction still reaches the driver.
const Loaded& loaded() {
  static const Loaded* const l = new Loaded(load());
  return *l;
}

}  // namespace

const Driver& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(l.error);
  return l.driver;
}

bool driver_available(std::string* why) {
  try {
    const Loaded& l = loaded();
    if (l.error.empty()) return true;
    if (why) *why = l.error;
  } catch (const std::exception& e) {
    if (why) *why = std::string("CUDA is not available: ") + e.what();
  }
  return false;
}

std::string error_text(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  const Loaded& l = loaded();
  if (l.driver.cuGetErrorName) l.driver.cuGetErrorName(r, &name);
  if (l.driver.cuGetErrorString) l.driver.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void raise_error(CUresult r, std::string_view what) {
  throw Error(std::string(what) + " failed: " + error_text(r));
}

}  // namespace zc::cuda
