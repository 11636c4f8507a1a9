// A Backend: everything the pipeline needs from one target (a device, and the way code for it
// is generated, built and run). The runtime lowers a captured graph, then asks the backend for
// the rest, and consults the caches between the steps; nothing in the pipeline compares
// backend names.
//
// A code-generating backend (C++ on the CPU; CUDA next) provides:
//   key_parts()  what besides the graph decides its output, for the cache keys;
//   policy()     its scheduling decisions (what it generates, what goes to a library or to
//                the op's eager kernel, its thresholds): the fusion rules are the scheduler's;
//   emit()       source for a scheduled graph;
//   build()      the binary of that source (the system compiler, NVRTC);
//   load()       an executable from a schedule and a binary, fresh or from a cache.
// An interpreting backend (eager) runs captured graphs as they are, with no code and nothing
// to cache: it answers interprets() with true and provides interpret() instead.
//
// Adding a backend: implement this interface in codegen/backends/<name>/, and add its factory
// to the list in codegen/backend.cpp. Backends register by device: backend_for(device) is
// the code-generating backend of that device, which CompileOptions::backend = "auto" picks
// for the inputs' device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/buffer_plan.h"
#include "codegen/executable.h"
#include "codegen/schedule.h"
#include "zc/device.h"

namespace zc::codegen {

// What besides the graph decides a backend's output. Each part changes what it covers when
// anything it depends on changes, and is empty when the backend has nothing of that kind.
struct KeyParts {
  std::string codegen;    // options that change the source: scheduling policy, emitter settings
  std::string target;     // what binaries are built for: ISA level and flags; GPU architecture
  std::string toolchain;  // what builds them: the compiler's identity; NVRTC's version
};

// A backend's source for one graph.
struct GeneratedSource {
  std::string text;
  int generated_kernels = 0;
  int extern_ops = 0;  // nodes left to their eager kernels
  // For a schedule whose sizes vary: `text` holds a marker for each integer derived from sizes
  // and these are the integers, in order (codegen/size_template.h). Empty otherwise.
  std::vector<int64_t> sizes;
  // How that code names its array of symbol values: the expression a marker's polynomial
  // indexes (instantiate_sizes).
  std::string symbol_array;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The name CompileOptions::backend selects it by; logs and the in-process code cache use it.
  virtual std::string_view name() const = 0;
  // The device whose tensors it computes on.
  virtual Device::Type device() const = 0;
  // Why this process cannot use the backend (no compiler, no GPU, a library missing), with
  // what to do about it; empty when it can. Cheap after the first call.
  virtual std::string unavailable_reason() const = 0;

  // Interpreting backends: an executable for the captured graph as it is.
  virtual bool interprets() const { return false; }
  virtual std::shared_ptr<const Executable> interpret(const ir::Graph& captured) const;

  // Code-generating backends. key_parts() may be computed once and kept (it must not change
  // within a process).
  virtual const KeyParts& key_parts() const;
  virtual const SchedulePolicy& policy() const;
  // Composite ops this backend generates whole (fused attention on a GPU): lowering leaves them
  // undecomposed, and the scheduler gives each a kernel of its own.
  virtual std::vector<ops::OpId> native_ops() const { return {}; }
  // Whether lowering splits long sums into two stages (lower/split_reductions.h): a backend
  // whose row reductions take one block per row, which a loss over a whole batch would leave
  // on one multiprocessor.
  virtual bool splits_long_reductions() const { return false; }
  // Whether emit() takes schedules whose sizes vary (Schedule::varying) and load_for_size()
  // runs the result: code generated once for many sizes.
  virtual bool serves_many_sizes() const { return false; }
  // The most symbols such code can take: a template that needs more is not made.
  virtual size_t max_symbols() const { return 64; }
  // Input: a schedule that verifies and its buffer plan.
  virtual GeneratedSource emit(const Schedule& s, const BufferPlan& plan) const;
  // Whether `source` needs build() at all. Where it does not (the C++ backend's graph whose
  // every node runs outside generated code: a ResNet block of oneDNN convolutions), its binary
  // is empty and no compiler runs.
  virtual bool needs_build(const GeneratedSource& source) const {
    (void)source;
    return true;
  }
  // Raises zc::Error with the toolchain's diagnostics when the source does not build.
  virtual std::vector<uint8_t> build(const GeneratedSource& source) const;
  // `binary` is what build() made of emit()'s source for this schedule and plan (possibly in
  // another process). Raises zc::Error when it does not fit them (a missing kernel).
  virtual std::shared_ptr<const Executable> load(Schedule s, BufferPlan plan,
                                                 std::span<const uint8_t> binary) const;
  // The same for a binary built from a size template's source (serves_many_sizes): `s` and
  // `plan` are this size's, `symbols` the values its kernels receive.
  virtual std::shared_ptr<const Executable> load_for_size(Schedule s, BufferPlan plan,
                                                          std::span<const uint8_t> binary,
                                                          std::vector<int64_t> symbols) const;

  // Kernels a backend needs besides generated ones (a strided copy on a GPU), as one fixed
  // source: the runtime builds it through the kernel-level cache, like generated code, and
  // hands the binary to load_support() once per process, before the first dense_copy().
  // Empty: none.
  virtual std::string support_source() const { return {}; }
  virtual void load_support(std::span<const uint8_t> binary) const;
  // A dense (row-major) copy of `t`, a tensor on this backend's device.
  virtual Tensor dense_copy(const Tensor& t) const;

  // An executable that records what `exec` queues on its device once and replays the recording
  // on later calls (CUDA graphs): a call then costs one launch. per_call[i] says whether input
  // i changes from call to call (a user's tensor, copied into the recording's own buffer); the
  // others (parameters) are used where they are. `exec` itself where the backend has no such
  // thing or `exec` cannot be recorded.
  virtual std::shared_ptr<const Executable> replayable(std::shared_ptr<const Executable> exec,
                                                       std::vector<bool> per_call) const {
    (void)per_call;
    return exec;
  }
};

// The registry: every backend of this build, made on first use and alive until exit.
std::vector<const Backend*> all_backends();
const Backend* find_backend(std::string_view name);  // null when unknown
// The code-generating backend of a device; null when this build has none.
const Backend* backend_for(Device::Type device);
// For tests and tools: adds `backend` to the registry, after the backends of this build, so
// that CompileOptions::backend selects it by name ("auto" keeps the built-in backend of its
// device). A backend that wraps another to miscompile on purpose is how the accuracy check is
// tested. Raises zc::Error when its name is taken.
void register_backend(std::unique_ptr<Backend> backend);

}  // namespace zc::codegen
