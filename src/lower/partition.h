// partition(): splits a joint forward+backward graph (autodiff.h) into the forward graph a
// training call runs and the backward graph its backward() runs, deciding which forward values
// the forward saves for the backward and which the backward recomputes.
//
// The decision is a minimum cut, as in AOTAutograd's default partitioner: the forward values
// the backward reads must be either saved (costing their bytes of memory, read back once) or
// recomputed from saved values and inputs. Only cheap ops are recomputed: elementwise ops,
// layout ops and embedding lookups; the outputs of products, reductions, normalizations,
// softmax and attention are saved when the backward needs them. Among the cuts of least
// memory, values the backward reads directly are preferred over values it would only
// recompute from (so a residual stream is saved, not rebuilt from its first layer), and then
// the cut closest to the forward's start: it depends only on the graph, so every copy of a
// repeated block is cut the same way and stays one block for hierarchical compilation.
// Graph inputs, constants and the forward's own outputs cost nothing to keep.
//
// An activation-memory budget below 1 (CompileOptions::activation_memory_budget, torch's
// activation_memory_budget) lets the backward run any forward node again, products and
// attention included: a node that is not cheap costs its work (multiply-adds over 64, or input
// elements) times a rate, and the partition is the cut of least such work among those whose
// saved bytes are at most least + budget * (most - least), `most` being what budget 1 saves
// and `least` what the cut of least memory saves. Budget 1 is the partition above exactly;
// budget 0 saves the least memory any partition can.
//
// A region of an nn::Checkpoint (its type name, kCheckpointRegion) is recomputed whatever the
// budget: its nodes run again in the backward at no cost, and a value one of them makes that
// only they read is never saved (its inputs and outputs may be, as in torch).
//
// Input: the captured graph `captured` (verified) and `joint` = joint_graph(captured, wrt).
// Output:
//   forward:  the captured graph (inputs, nodes, regions unchanged), its outputs followed by
//             the saved values that are not outputs already, in definition order;
//   backward: inputs = the captured inputs, then one gradient per captured output (as in the
//             joint graph), then the saved values (kind `carried`, in definition order);
//             nodes = the joint graph's backward nodes in their order and mirror regions, each
//             preceded by the recomputed forward nodes it needs first (in forward order, in
//             that backward node's region, so they fuse with it); outputs = the gradients,
//             as the joint graph outputs them. Dead code removed; the graph verifies.
//   saved:    for each saved input of backward, the index in forward.outputs that feeds it.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "lower/autodiff.h"

namespace zc::lower {

// The region name of a zc::nn::Checkpoint module (Module::type_name()).
inline constexpr std::string_view kCheckpointRegion = "zc::nn::Checkpoint";

struct Partition {
  ir::Graph forward;
  ir::Graph backward;
  std::vector<size_t> saved;
};

Partition partition(const ir::Graph& captured, const JointGraph& joint, double budget = 1.0);

}  // namespace zc::lower
