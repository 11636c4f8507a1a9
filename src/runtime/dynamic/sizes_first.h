// Sizes first (Dynamic::Auto; ADR 0032, docs/dynamic-shapes.md): code for all sizes of a graph
// at its first call, when constant sizes would buy it little.
//
// A graph whose products go to a library spends its time in calls that take their sizes as
// arguments anyway; torch's Inductor makes its kernels so even in a static compile, which is why
// its recompile with a symbolic length is cheap. Such a graph's first call makes the size
// templates (runtime/dynamic/templates.h) for every dim of its inputs that traces alike at other
// sizes, so its second size is a recompile the templates serve, with no compiler run. A graph
// with only small products keeps constant sizes (inline loops with fixed trip counts are
// faster), and a convolution net cannot have templates (its output sizes divide); both compile
// per size until a second size, as before.
//
// Where the templates are made (sizes_first_in_background): on a GPU backend with host cores to
// spare, the first call compiles its own size as a static compile does and the templates are
// made on a thread of their own meanwhile; the next call at a new size waits for what is left of
// them. The first call then costs what a static one does (tracing the samples and building the
// templates took 88-96 ms against 50-56 ms for the static compile of the 12-layer GPT on an
// H100), and a later size costs the same as before. On the CPU the templates come first, on the
// call's own thread: a second build there takes cores from the one the call waits for.
#pragma once

#include <functional>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "runtime/dynamic/dims.h"

namespace zc::runtime {

// Whether a graph's first compile should make code for all sizes: some matmul or linear of
// it goes to a library at its sizes (the backend's own matmul_path), and it has no
// convolution, im2col or pooling.
bool sizes_first_pays(const ir::Graph& captured, const codegen::Backend& backend);

// Whether a first call makes its templates on a background thread (above): a backend whose
// code runs on a GPU, on a machine of at least 4 cores. ZC_SIZES_FIRST=background or inline
// decides instead (any other value is a zc::Error naming it).
bool sizes_first_in_background(const codegen::Backend& backend);

// The dims covered by the templates a stored record names (`dims`: GuardMiss::sizes_first), when
// the record and every one of its templates are held: a fresh process's first call that finds
// them traces and makes nothing. nullopt otherwise.
std::optional<std::vector<DynamicRange>> recorded_sizes_first(
    const std::string& who, const std::vector<DynamicRange>& dims, const ir::Graph& captured,
    const codegen::Backend& backend, bool hierarchical, CompileContext& ctx);

// Making them, in two steps (runtime/dynamic/dims.h, SizeSamples). The first traces the
// module at sample sizes of `dims`, leaving out dims that do not trace alike, under its capture
// lock while none of its code runs (nullopt: nothing traces alike). The second makes the
// templates and records in the graph level which dims they cover and which templates they are;
// it touches no module, so it may run on a thread of its own. It returns the dims covered,
// empty when no template was made.
std::optional<SizeSamples> trace_sizes_first(nn::Module& module, std::span<const Tensor> inputs,
                                             const std::vector<DynamicRange>& dims,
                                             const ir::Graph& captured,
                                             const codegen::Backend& backend);
std::vector<DynamicRange> build_sizes_first(SizeSamples samples, const ir::Graph& captured,
                                            const codegen::Backend& backend, bool hierarchical,
                                            CompileContext& ctx);

// In the background (sizes_first_in_background), in two steps beside the first call's own build.
// trace_sizes_first_beside() traces the samples on another thread while the call builds its own
// code (which reads no parameter; the call joins the traces before that code runs, as traces mark
// the parameters it reads). `inputs` and `captured` must outlive the future, whose destructor
// waits for the traces. A SizesFirstBuild then makes the templates from them on a thread of its
// own; the next guard miss waits for it (covered()).
std::future<std::optional<SizeSamples>> trace_sizes_first_beside(nn::Module& module,
                                                                 std::span<const Tensor> inputs,
                                                                 std::vector<DynamicRange> dims,
                                                                 const ir::Graph& captured,
                                                                 const codegen::Backend& backend);

class SizesFirstBuild {
 public:
  // Starts build_sizes_first on a thread (here, when none can be made), a compile with a context
  // of its own; `done` runs on that thread once it has ended, whichever way. A failed build is
  // logged (ZC_LOGS=recompiles) and covers nothing.
  SizesFirstBuild(std::string who, std::span<const Tensor> inputs, SizeSamples samples,
                  ir::Graph captured, const codegen::Backend& backend, bool hierarchical,
                  std::function<void()> done);
  // The first call's inputs: only their shapes, dtypes and devices are read.
  const std::vector<Tensor>& inputs() const { return inputs_; }
  // Waits for the build; the dims its templates cover (empty: none made).
  const std::vector<DynamicRange>& covered() const { return built_.get().covered; }
  // Waits for the build; what it did.
  const CompileReport& report() const { return built_.get().report; }

 private:
  struct Built {
    std::vector<DynamicRange> covered;
    CompileReport report;
  };
  std::vector<Tensor> inputs_;
  std::shared_future<Built> built_;
};

}  // namespace zc::runtime
