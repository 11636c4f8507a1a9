// Dynamic shapes at the level of a compiled module: which dims of its input vary, and the
// compile that serves every size of them (docs/dynamic-shapes.md).
//
// A dim is dynamic when the user marked it (CompileOptions::dynamic_dims, Dynamic::All) or,
// under Dynamic::Auto, when a guard miss shows a second size of it. Sizes 0 and 1 never count:
// a call with one compiles for itself. Once a set of dims is dynamic, the module is traced at a
// few sample sizes of them and a size template (runtime/size_templates.h) is made for its graph,
// or for each distinct part of a hierarchical compile; every later size then finds its code in
// the caches (this process's or a fresh one's) and compiles nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
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
  // dynamic set only when `can_template` (the caller will make templates now: an inference call
  // on a backend that serves many sizes); otherwise it stays eligible for a later call. Raises
  // zc::Error for a marked input or dim the call lacks.
  GuardMiss on_guard_miss(std::span<const Tensor> inputs, bool can_template);

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
  };
  Kind make_kind(std::span<const Tensor> inputs) const;

  Dynamic mode_;
  std::vector<DynamicDim> marked_;
  std::vector<Kind> kinds_;
};

// Traces `module` at sample sizes of `dims` of `inputs` (the structure of the trace at the
// call's own sizes, `captured`, kept) and makes the size templates of the traces on `backend`:
// of each distinct part when `hierarchical`, else of the whole graph. Dims whose sizes are
// equal at the call vary together, as one symbol (a sequence length shared by the token ids
// and their mask); the template's check refuses a later call where they differ. Returns
// whether every one was made; ZC_LOGS=recompiles says why not, and the call then compiles for
// its own size.
bool compile_for_all_sizes(nn::Module& module, std::span<const Tensor> inputs,
                           const std::vector<DynamicRange>& dims, const ir::Graph& captured,
                           const codegen::Backend& backend, bool hierarchical);

}  // namespace zc::runtime
