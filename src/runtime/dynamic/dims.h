// Dynamic shapes at the level of a compiled module: which dims of its input vary, and the
// compile that serves every size of them (docs/dynamic-shapes.md).
//
// A dim is dynamic when the user marked it (CompileOptions::dynamic_dims, Dynamic::All) or,
// under Dynamic::Auto, when a guard miss shows a second size of it. Sizes 0 and 1 never count:
// a call with one compiles for itself. Once a set of dims is dynamic, the module is traced at a
// few sample sizes of them and a size template (runtime/dynamic/templates.h) is made for its graph,
// or for each distinct part of a hierarchical compile; every later size then finds its code in
// the caches (this process's or a fresh one's) and compiles nothing.
//
// Sizes first (Dynamic::Auto, runtime/dynamic/sizes_first.h): a graph whose products go to a
// library gets its templates at its first call. Guards still pin the sizes: a second size of a dim
// is a recompile (a new capture, `ZC_LOGS=recompiles`) that the templates serve, and this class
// keeps which dims they cover.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "runtime/driver/compile_context.h"
#include "zc/compile.h"

namespace zc::runtime {

struct DynamicRange {
  size_t input = 0;  // which of the call's inputs
  int64_t dim = 0;   // non-negative
  int64_t min = 2, max = INT64_MAX;
};

// What a guard miss changed, and what to do about it.
struct GuardMiss {
  // The dims to make a size template for now: every dynamic dim of this kind of call, when
  // one became dynamic with this call; else empty.
  std::vector<DynamicRange> dynamic;
  // For ZC_LOGS=recompiles: the dims whose size is new, with the sizes seen before
  // ("dim 1 = 24 (seen 16, 32)"; "input 1 dim 1 = ..." when the call has several inputs), or
  // "a new kind of input".
  std::string changed;
  // The first call of a kind under Auto that makes no template for marked dims: every dim of
  // size 2 or more, which the caller may make templates for now (sizes first). Else empty.
  std::vector<DynamicRange> sizes_first;
  // Whether templates made before should serve this call, so the caller makes none: every
  // dim that varies was dynamic already, or was covered by the first call's templates (and
  // dims that were one symbol there are of one size here). When a stored template refuses the
  // call anyway (Stats::template_refusals), the caller says so (templates_missed).
  bool expect_served = false;
};

// The sizes a module has seen per kind of call (the inputs' count, ranks, dtypes and
// devices), and the dims it made dynamic. Not synchronized: the caller holds its capture lock.
class DynamicShapes {
 public:
  // `marked`: marks with valid ranges, as compile() checks them; their inputs are checked
  // against each call.
  DynamicShapes(Dynamic mode, std::vector<DynamicDim> marked)
      : mode_(mode), marked_(std::move(marked)) {}

  // Called on a guard miss with the call's inputs: records their sizes. A dim joins the
  // dynamic set only when `can_template` (the caller will make templates now: a call on a
  // backend that serves many sizes); otherwise it stays eligible for a later call. Training
  // calls (gradients wanted) are kinds of their own: their templates are of other graphs.
  // Raises zc::Error for a marked input or dim the call lacks.
  GuardMiss on_guard_miss(std::span<const Tensor> inputs, bool can_template, bool training = false);
  // After an inference call's GuardMiss with `sizes_first`: the dims the templates made for all
  // sizes cover at these inputs (those of equal size here are one symbol); empty when none were
  // made.
  void made_sizes_first(std::span<const Tensor> inputs, const std::vector<DynamicRange>& covered);
  // After a GuardMiss `expect_served` whose call a stored template refused (a relation the
  // templates rely on broke, such as two dims of one symbol now differing): the kind's dims
  // are no longer dynamic, so the next new size makes templates of its own. Once per kind, so
  // that a graph no template serves does not try again at every size.
  void templates_missed(std::span<const Tensor> inputs, bool training = false);

 private:
  struct InputKind {
    size_t rank;
    DType dtype;
    Device device;
    bool operator==(const InputKind&) const = default;
  };
  // Per (input, dim), flattened in input order: see `first`.
  struct Kind {
    std::vector<InputKind> inputs;
    std::vector<size_t> first;               // per input: the index of its dim 0
    std::vector<DynamicRange> ranges;        // per dim: its range, from the marks
    std::vector<bool> eligible;              // per dim: marked, or every dim under All
    std::vector<std::vector<int64_t>> seen;  // per dim, the sizes >= 2 seen
    std::vector<bool> dynamic;               // per dim: a template made (or tried)
    // Per dim: the symbol of the templates made at the first call (sizes first), or -1.
    std::vector<int> first_symbol;
    bool missed = false;    // templates_missed() was called
    bool training = false;  // calls that want gradients
  };
  Kind make_kind(std::span<const Tensor> inputs, bool training) const;
  Kind* find_kind(std::span<const Tensor> inputs, bool training);

  Dynamic mode_;
  std::vector<DynamicDim> marked_;
  std::vector<Kind> kinds_;
};

// Traces `module` at sample sizes of `dims` of `inputs` (the structure of the trace at the
// call's own sizes, `captured`, kept) and makes the size templates of the traces on `backend`:
// of each distinct part when `hierarchical`, else of the whole graph. Dims whose sizes are
// equal at the call vary together, as one symbol (a sequence length shared by the token ids
// and their mask); the template's check refuses a later call where they differ. A group that
// does not trace alike at enough sizes (a sequence length a recurrent model unrolls, a size an
// index constant is made from) is left out and keeps its size, so that the others still vary:
// a new size of it traces to another graph, compiled for that size. Returns whether every
// template was made; ZC_LOGS=recompiles says why not.
bool compile_for_all_sizes(nn::Module& module, std::span<const Tensor> inputs,
                           const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                           const codegen::Backend& backend, bool hierarchical, CompileContext& ctx);

// compile_for_all_sizes in full: what it made, and, with `leave_out_refused` (as
// compile_for_all_sizes and sizes first, runtime/dynamic/sizes_first.h, call it), a group of
// dims that does not trace alike at enough sizes (a feature dim the weights fix: the trace
// raises) left out instead of failing the others.
struct AllSizes {
  bool all = false;                    // every part whose sizes vary got its template
  std::vector<DynamicRange> covered;   // the dims the templates vary in; empty: none made
  std::vector<std::string> templates;  // the lowered structures they are stored under (hex)
};
AllSizes make_all_size_templates(nn::Module& module, std::span<const Tensor> inputs,
                                 const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                                 const codegen::Backend& backend, bool hierarchical,
                                 bool leave_out_refused, CompileContext& ctx);

// make_all_size_templates in two steps. The first runs the module's forward (traces mark its
// parameters in place), so it runs under the module's capture lock while none of its code runs;
// the second touches no module and may run on any thread (sizes first makes its templates on
// one of their own).
struct SizeSamples {
  std::vector<DynamicRange> dims;  // the dims the samples vary
  std::vector<ir::Graph> graphs;   // the module traced at each sample size, in backend layout
  std::string who, described;      // for ZC_LOGS=recompiles
  double trace_ms = 0;
};
// nullopt when the dims do not trace alike at enough sizes (ZC_LOGS=recompiles says which).
std::optional<SizeSamples> trace_size_samples(nn::Module& module, std::span<const Tensor> inputs,
                                              const std::vector<DynamicRange>& dims,
                                              const ir::Graph& captured,
                                              const codegen::Backend& backend,
                                              bool leave_out_refused);
AllSizes make_templates_of_samples(SizeSamples samples, const codegen::Backend& backend,
                                   bool hierarchical, CompileContext& ctx);

}  // namespace zc::runtime
