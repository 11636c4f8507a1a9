#include "codegen/backend.h"

#include <cstdlib>
#include <mutex>
#include "codegen/backends/cpp/backend.h"
#include "codegen/backends/eager/interpreter.h"
#if ZC_WITH_CUDA
#include "codegen/backends/cuda/backend.h"
#endif

#include "ops/eager.h"
#include "util/check.h"

namespace zc::codegen {

namespace {

// Every backend of this build, in the order "auto" prefers them within a device.
std::vector<std::unique_ptr<Backend>> make_backends() {
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(cpp::make_cpp_backend());
#if ZC_WITH_CUDA
  list.push_back(cuda::make_cuda_backend());
#endif
  list.push_back(eager::make_eager_backend());
  return list;
}

// Locked because register_backend may add to it while compiles look backends up.
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<const Backend*> all;
  Registry() {
    for (auto& b : make_backends()) {
      ZC_CHECK(!b->name().empty(), "a backend without a name");
      for (const Backend* other : all) {
        ZC_CHECK(other->name() != b->name(), "two backends named " << b->name());
      }
      all.push_back(b.get());
      owned.push_back(std::move(b));
    }
  }
};

Registry& registry() {
  // Never destroyed: executables made by a backend may outlive static destruction's order.
  static Registry* r = new Registry();
  return *r;
}

[[noreturn]] void not_generating(const Backend& b, const char* what) {
  ZC_CHECK(false, "backend " << b.name() << " generates no code, yet was asked to " << what);
  std::abort();
}

}  // namespace

std::shared_ptr<const Executable> Backend::interpret(const ir::Graph&) const {
  ZC_CHECK(false, "backend " << name() << " does not interpret graphs");
  return nullptr;
}
const KeyParts& Backend::key_parts() const {
  not_generating(*this, "name its key parts");
}
const SchedulePolicy& Backend::policy() const {
  not_generating(*this, "schedule");
}
GeneratedSource Backend::emit(const Schedule&, const BufferPlan&) const {
  not_generating(*this, "emit source");
}
std::vector<uint8_t> Backend::build(const GeneratedSource&) const {
  not_generating(*this, "build");
}
std::shared_ptr<const Executable> Backend::load(Schedule, BufferPlan,
                                                std::span<const uint8_t>) const {
  not_generating(*this, "load a binary");
}

std::shared_ptr<const Executable> Backend::load_for_size(Schedule, BufferPlan,
                                                         std::span<const uint8_t>,
                                                         std::vector<int64_t>) const {
  ZC_CHECK(false, "backend " << name() << " does not run code generated for many sizes");
}

void Backend::load_support(std::span<const uint8_t>) const {
  ZC_CHECK(false, "backend " << name() << " has no support kernels to load");
}

Tensor Backend::dense_copy(const Tensor& t) const {
  return ops::eager_contiguous(t);
}

std::vector<const Backend*> all_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.all;
}

const Backend* find_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Backend* b : r.all) {
    if (b->name() == name) return b;
  }
  return nullptr;
}

const Backend* backend_for(Device::Type device) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Backend* b : r.all) {
    if (b->device() == device && !b->interprets()) return b;
  }
  return nullptr;
}

void register_backend(std::unique_ptr<Backend> backend) {
  ZC_CHECK(backend != nullptr, "register_backend: a null backend");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Backend* other : r.all) {
    if (other->name() == backend->name()) {
      throw Error("register_backend: a backend named \"" + std::string(backend->name()) +
                  "\" exists already; give the new one another name");
    }
  }
  r.all.push_back(backend.get());
  r.owned.push_back(std::move(backend));
}

}  // namespace zc::codegen
