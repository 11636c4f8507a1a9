// The graph IR: what every stage of the pipeline consumes and produces.
//
// Values. A value is an immutable dense tensor: a shape, a dtype and a device. Layout (strides,
// storage offsets, aliasing) is not part of the IR: view ops (reshape, permute, slice, expand)
// are ordinary ops that produce new values, and a backend decides whether to realize them as
// views or copies. Values are numbered 0..N-1 within a graph.
//
// Inputs. A graph's inputs are values in a fixed order, each with a kind: `user` (the tensor
// passed to forward), `parameter` (a module's parameter or buffer: weights are inputs, never
// constants, so two instances of one layer give the same graph), `carried` (a value computed
// by an earlier segment of a module whose trace broke), `lifted` (a tensor the traced code
// captured from outside that is too large to embed), and `seed` (a 0-dim int64 the runtime
// draws from the process generator for every call: the seed of a rand_like, so that a graph
// that draws random numbers is a pure function of its inputs and each call draws its own).
// Kinds affect only where the runtime fetches each input; they are part of the canonical form so
// that a parameter and a user input never alias in a cache.
//
// Constants. Small tensors the traced code created or captured (scalars such as the 2.0 in
// `x * 2.0`) are embedded by value and are part of the canonical form.
//
// Nodes. Each node applies one registered op (ops/registry.h) with typed attributes to input
// values and defines its output values. Nodes are stored in a topological order that is also
// the evaluation order; ops are pure, so any topological order gives the same result.
//
// Regions. Every module call during tracing opens a region: a contiguous range of nodes with
// the module's type name and a parent region (regions nest like the calls did). Regions carry
// no semantics for evaluation; they tell later stages where a repeated block is.
//
// Canonical form (canonical.h). Inputs are renumbered first, then constants, then node outputs
// in node order; the bytes hold op names, attributes, input kinds and metadata, constants by
// value and the region tree with type names. They hold no parameter values, no pointers, no
// module instance names and no parameter names. Equal canonical bytes mean the same
// computation on the same input metadata, so the SHA-256 of those bytes is the graph's hash.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "zc/tensor.h"

namespace zc::ir {

using ValueId = int32_t;
using RegionId = int32_t;
inline constexpr RegionId kNoRegion = -1;

enum class InputKind : uint8_t { user, parameter, carried, lifted, seed };
const char* input_kind_name(InputKind k);

struct ValueInfo {
  ops::TensorMeta meta;
  int32_t producer = -1;  // index of the defining node; -1 for inputs and constants
};

struct Input {
  ValueId value;
  InputKind kind;
};

struct Constant {
  ValueId value;
  Tensor data;  // contiguous, CPU
};

struct Node {
  ops::OpId op;
  ops::Attrs attrs;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  RegionId region = kNoRegion;  // innermost enclosing region
};

struct Region {
  std::string type_name;
  RegionId parent = kNoRegion;
  int32_t begin = 0, end = 0;  // node range [begin, end)
};

struct Graph {
  std::vector<ValueInfo> values;
  std::vector<Input> inputs;
  std::vector<Constant> constants;
  std::vector<Node> nodes;
  std::vector<ValueId> outputs;
  std::vector<Region> regions;

  ValueId add_value(ops::TensorMeta meta, int32_t producer = -1);
  const ops::TensorMeta& meta(ValueId v) const { return values[v].meta; }
  // Regions whose parent is kNoRegion, in order.
  std::vector<RegionId> top_regions() const;
  // Sets the node range of each region that holds (itself or through a descendant) a node at
  // index >= first_node to span those nodes; returns which regions got a range. Passes that
  // place nodes in regions by their `region` field call it once they are done.
  std::vector<bool> fit_region_ranges(size_t first_node = 0);
};

// Captured constants of at most this many elements are embedded by value (a scalar the code can
// read as a literal); larger ones become `lifted` inputs. Only scalars: a graph's structure must
// not depend on the sizes it is traced at, and index tensors made from a dynamic size (an
// attention mask from Range(batch)) were embedded at small sizes and lifted at larger ones, so
// one model traced to two structures and compiled per size (docs/dynamic-shapes.md).
inline constexpr int64_t kMaxEmbeddedConstant = 1;

}  // namespace zc::ir
