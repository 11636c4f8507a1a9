#include "codegen/backends/cpp/backend.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <thread>

#include "codegen/backends/cpp/executable.h"
#include "cpu/onednn_conv.h"
#include "toolchain/compiler.h"
#include "toolchain/target.h"
#include "util/hash.h"

namespace zc::codegen::cpp {

namespace {

// Kernel code below this many bytes is not worth a unit of its own: each unit parses the
// shared head again and adds to the link (about 30 ms together, the cost of 4 KB of kernels).
constexpr size_t kMinUnitBytes = 4096;

// `text` cut into at most `max_units` units that compile side by side, each the shared head
// (everything before the first kernel) followed by whole kernels in their order, the kernels
// spread so that the units are of about equal size.
std::vector<std::string> compile_units(const std::string& text, size_t max_units) {
  const std::string marker = std::string("\n") + kKernelLine;
  size_t first = text.find(marker);
  if (first == std::string::npos || max_units <= 1) return {text};
  const std::string_view head(text.data(), first + 1);
  std::vector<std::string_view> kernels;
  for (size_t at = first + 1; at < text.size();) {
    size_t next = text.find(marker, at);
    size_t end = next == std::string::npos ? text.size() : next + 1;
    kernels.emplace_back(text.data() + at, end - at);
    at = end;
  }
  const size_t code = text.size() - head.size();
  const size_t per_unit = std::max(kMinUnitBytes, (code + max_units - 1) / max_units);
  std::vector<std::string> units;
  for (std::string_view k : kernels) {
    if (units.empty() || units.back().size() - head.size() >= per_unit) units.emplace_back(head);
    units.back() += k;
  }
  return units;
}

class CppBackend final : public Backend, private SchedulePolicy {
 public:
  explicit CppBackend(CppOptions options) : opt_(std::move(options)) {}

  std::string_view name() const override { return "cpp"; }
  Device::Type device() const override { return Device::Type::cpu; }

  std::string unavailable_reason() const override {
    static const bool available = toolchain::compiler_available();
    return available ? ""
                     : "no C++ compiler found to build generated code (set ZC_CXX to one, e.g. "
                       "g++ or clang++)";
  }

  const KeyParts& key_parts() const override {
    std::call_once(key_once_, [&] {
      std::string codegen =
          "inline_matmul_max_flops=" + std::to_string(opt_.inline_matmul_max_flops) +
          ",parallel_threshold=" + std::to_string(opt_.emit.parallel_threshold) +
          ",attention_kernel=" + (opt_.attention_kernel ? "1" : "0") + ",extern=";
      for (ops::OpId op : opt_.force_extern) codegen += std::string(ops::op_def(op).name) + ";";
      key_.codegen = std::move(codegen);
      // Without a compiler nothing is built, and the target (flags for that compiler) is moot.
      if (auto cxx = toolchain::find_cxx()) {
        key_.toolchain = cxx->identity();
        key_.target = toolchain::cpu_target().fingerprint();
      }
    });
    return key_;
  }

  const SchedulePolicy& policy() const override { return *this; }

  // Attention and its log-sum-exp (the forward of training) as one kernel each whose scores
  // stay in cache-sized blocks (attention.cpp). The gradients are decomposed: their
  // products run as batched BLAS. A convolution's columns (im2col) are one pass of the op's
  // own kernel, writing into the graph's buffer, rather than generated copies of a padded
  // input: they leave the product (and its fused epilogue) as the only generated work.
  // Where oneDNN's convolutions are built in, f32 convolutions run them channels-last
  // (conv2d_nhwc; lower/channels_last.h) instead of as columns and a product, and max pools
  // run oneDNN's pooling (its taps as generated code took a ResNet stem 195 ms to compile).
  std::vector<ops::OpId> native_ops() const override {
    std::vector<ops::OpId> ops{ops::OpId::im2col};
    if (opt_.attention_kernel)
      ops.insert(ops.end(), {ops::OpId::attention, ops::OpId::attention_lse});
    if (cpu::onednn_conv_available()) {
      ops.insert(ops.end(), {ops::OpId::conv2d_nhwc, ops::OpId::max_pool2d});
    }
    return ops;
  }

  GeneratedSource emit(const Schedule& s, const BufferPlan& plan) const override {
    CppModule m = cpp::emit(s, plan, opt_.emit);
    return GeneratedSource{std::move(m.source), m.generated_kernels, m.extern_ops,
                           std::move(m.sizes), "a->sym"};
  }

  bool needs_build(const GeneratedSource& source) const override {
    return source.generated_kernels > 0;
  }

  std::vector<uint8_t> build(const GeneratedSource& source) const override {
    auto cxx = toolchain::find_cxx();
    if (!cxx) throw Error(unavailable_reason());
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::string> units = compile_units(source.text, cores);
    toolchain::CompileResult built =
        toolchain::compile_shared_object_units(*cxx, toolchain::cpu_target(), units, "");
    std::vector<uint8_t> binary = toolchain::read_file_bytes(built.so_path);
    std::error_code ec;
    std::filesystem::remove(built.so_path, ec);
    return binary;
  }

  bool serves_many_sizes() const override { return true; }

  std::shared_ptr<const Executable> load(Schedule s, BufferPlan plan,
                                         std::span<const uint8_t> binary) const override {
    return make_cpp_executable(std::move(s), std::move(plan), library(binary));
  }

  std::shared_ptr<const Executable> load_for_size(Schedule s, BufferPlan plan,
                                                  std::span<const uint8_t> binary,
                                                  std::vector<int64_t> symbols) const override {
    return make_cpp_executable(std::move(s), std::move(plan),
                               binary.empty() ? nullptr : shared_library(binary),
                               std::move(symbols));
  }

 private:
  bool supports(ops::OpId op, DType) const override {
    return std::find(opt_.force_extern.begin(), opt_.force_extern.end(), op) ==
           opt_.force_extern.end();
  }

  MatmulPath matmul_path_any_size(const ops::MatmulShapes&, DType dtype) const override {
    return dtype == DType::f32 || dtype == DType::f64 ? MatmulPath::library
                                                      : MatmulPath::extern_call;
  }

  MatmulPath matmul_path(const ops::MatmulShapes& d, DType dtype) const override {
    if (shape_numel(d.batch) * d.M * d.N * d.K <= opt_.inline_matmul_max_flops)
      return MatmulPath::inline_loop;
    // BLAS covers f32 and f64; anything else this large runs the eager kernel.
    return dtype == DType::f32 || dtype == DType::f64 ? MatmulPath::library
                                                      : MatmulPath::extern_call;
  }

  // A size template's binary serves every size: the executables of its sizes share one
  // loaded copy while any of them lives.
  // The code of a binary; none for the empty binary of a graph with no generated kernel.
  static std::shared_ptr<toolchain::SharedLibrary> library(std::span<const uint8_t> binary) {
    return binary.empty() ? nullptr : toolchain::SharedLibrary::from_bytes(binary);
  }

  std::shared_ptr<toolchain::SharedLibrary> shared_library(std::span<const uint8_t> binary) const {
    const Digest key = sha256(binary);
    std::lock_guard lock(loaded_mu_);
    std::erase_if(loaded_, [](const auto& e) { return e.second.expired(); });
    for (const auto& [k, weak] : loaded_) {
      if (auto lib = weak.lock(); lib && k == key) return lib;
    }
    auto lib = toolchain::SharedLibrary::from_bytes(binary);
    loaded_.emplace_back(key, lib);
    return lib;
  }

  CppOptions opt_;
  mutable std::mutex loaded_mu_;
  mutable std::vector<std::pair<Digest, std::weak_ptr<toolchain::SharedLibrary>>> loaded_;
  mutable std::once_flag key_once_;
  mutable KeyParts key_;
};

}  // namespace

std::unique_ptr<Backend> make_cpp_backend(CppOptions options) {
  return std::make_unique<CppBackend>(std::move(options));
}

}  // namespace zc::codegen::cpp
