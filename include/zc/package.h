// Ahead-of-time packages: a module compiled for given example calls, written as one file that
// holds the compiled code and the weights. A program loads it and runs it with no C++ compiler
// on the machine, no cache and no capture: the module's C++ forward is not needed at all.
//
//   // where the model is built (the compiler is there):
//   zc::package::save(model, {{zc::randn({8, 10})}}, "model.zcpkg");
//   // where it is served (only libzc):
//   zc::package::Package p = zc::package::load("model.zcpkg");
//   zc::Tensor y = p(x);  // x of shape {8, 10}
//
// A package holds one specialization per example call (its input shapes and dtypes); a call
// whose inputs match none of them is refused with the list of what the package serves. Built
// with CompileOptions::dynamic_dims of bounded ranges, an example call serves every size of
// its ranges (the other dims as the example's): each size's captured graph is stored, and the
// code is the size templates of the model's graphs, bound to a size on its first call after
// the same check a compiled module makes (docs/serving.md, "Packages"). Its
// code is a cache bundle (zc::cache::save_artifacts' format) followed by the weights: every part
// is checksummed, and it is signed with ZC_CACHE_HMAC_KEY_FILE's key when that is set, which a
// loading process with the key then requires. It runs only with the zc build that made it and on a
// CPU that runs its code (the native CPU it was built on, or the ZC_CPU_ISA level it was built
// for); load() names the reason when it refuses one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zc/compile.h"
#include "zc/nn.h"
#include "zc/tensor.h"

namespace zc::package {

// Compiles `module` for each example call (the inputs of one forward call each; one tensor:
// the one-tensor forward) and returns the package's bytes. `options` as for zc::compile:
// backend, regions (a repeated block is compiled and stored once) and matmul_precision carry
// over; dynamic_dims with bounded ranges (at most 4096 sizes in all) make each example call
// serve every size of them; a package has no Dynamic::All, no graph breaks (fullgraph is
// implied) and runs the default library products (max-autotune's choices are not carried).
// Raises zc::Error when the module cannot be packaged (a graph break, no compiler here, an
// unbounded or too wide range, a model whose code is not one template over the range).
std::vector<uint8_t> build(std::shared_ptr<nn::Module> module,
                           const std::vector<std::vector<Tensor>>& example_calls,
                           CompileOptions options = {});
// build() written to `path`.
void save(std::shared_ptr<nn::Module> module, const std::vector<std::vector<Tensor>>& example_calls,
          const std::string& path, CompileOptions options = {});

// The inputs of one specialization: the dims of `ranges` take any size in them (`shapes`
// holds the example's size there).
struct CallSignature {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<DynamicDim> ranges;
  std::string str() const;  // "[8,10] f32, [8] i64"; "[1,2..64] i64" with a range
};

// A loaded package: a cheap, copyable handle, callable from many threads at once.
class Package {
 public:
  Package() = default;
  // One input, one output. Raises zc::Error when the inputs match no specialization.
  Tensor operator()(const Tensor& x) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  // What it serves, in the order of the example calls: the inputs of each, and its outputs.
  const std::vector<CallSignature>& calls() const;
  const std::vector<CallSignature>& outputs() const;
  std::string backend() const;  // "cpp", "cuda"
  Device device() const;        // where its inputs must be (and its weights are)
  // A few lines: zc build, target, specializations, graphs, weights.
  std::string describe() const;

  struct State;

 private:
  explicit Package(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  friend Package load(std::span<const uint8_t> bytes);
  std::shared_ptr<const State> state_;
};

// Verifies and loads a package. Raises zc::Error naming the reason it refuses one: not a
// package, truncated, a checksum mismatch, an unsigned or badly signed package where
// ZC_CACHE_HMAC_KEY_FILE is set, another zc build, a CPU that cannot run its code.
Package load(const std::string& path);
Package load(std::span<const uint8_t> bytes);

}  // namespace zc::package
