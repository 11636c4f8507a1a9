// The training partitioner (lower/partition.h) and the minimum cut under it (util/min_cut.h):
// what is saved, what is recomputed, and that every copy of a repeated block is cut alike.
// That the partitioned graphs compute the right gradients is autodiff_test's.
#include <gtest/gtest.h>

#include <map>

#include "capture/capture.h"
#include "ir/canonical.h"
#include "ir/verifier.h"
#include "lower/autodiff.h"
#include "lower/partition.h"
#include "runtime/driver/training_graphs.h"
#include "test_support.h"
#include "util/min_cut.h"
#include "zc/zc.h"

namespace zc {
namespace {

TEST(MinCut, FindsTheMinimumAndTheSideClosestToTheSource) {
  // s -> a (3), s -> b (2), a -> b (1), a -> t (2), b -> t (3): max flow 5.
  MinCut g(4);
  const int s = 0, a = 1, b = 2, t = 3;
  g.add_edge(s, a, 3);
  g.add_edge(s, b, 2);
  g.add_edge(a, b, 1);
  g.add_edge(a, t, 2);
  g.add_edge(b, t, 3);
  int64_t value = 0;
  std::vector<bool> side = g.source_side(s, t, &value);
  EXPECT_EQ(value, 5);
  EXPECT_TRUE(side[s]);
  EXPECT_FALSE(side[t]);

  // Two equal cuts of a chain s -> x -> y -> t (2, 2): the one next to the source is taken.
  MinCut chain(4);
  chain.add_edge(0, 1, 2);
  chain.add_edge(1, 2, 2);
  chain.add_edge(2, 3, MinCut::kInfinite);
  side = chain.source_side(0, 3, &value);
  EXPECT_EQ(value, 2);
  EXPECT_EQ(side, (std::vector<bool>{true, false, false, false}));
}

TEST(MinCut, AnInfiniteCutRaises) {
  MinCut g(3);
  g.add_edge(0, 1, MinCut::kInfinite);
  g.add_edge(1, 2, MinCut::kInfinite);
  EXPECT_THROW(g.source_side(0, 2), Error);
}

struct Split {
  ir::Graph captured;
  lower::JointGraph joint;
  lower::Partition part;
};

Split split(nn::Module& model, const Tensor& x) {
  Split out;
  out.captured = capture::capture_module(model, x, nullptr, true).graph;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < out.captured.inputs.size(); ++i) {
    if (out.captured.inputs[i].kind == ir::InputKind::parameter) wrt.push_back(i);
  }
  out.joint = lower::joint_graph(out.captured, wrt);
  out.part = lower::partition(out.captured, out.joint);
  ir::verify(out.part.forward);
  ir::verify(out.part.backward);
  return out;
}

std::map<std::string, int> op_counts(const ir::Graph& g, size_t first = 0) {
  std::map<std::string, int> n;
  for (size_t i = first; i < g.nodes.size(); ++i) ++n[std::string(ops::op_def(g.nodes[i].op).name)];
  return n;
}

int64_t saved_bytes(const lower::Partition& p) {
  int64_t bytes = 0;
  for (size_t index : p.saved) {
    const ops::TensorMeta& m = p.forward.meta(p.forward.outputs[index]);
    bytes += shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype));
  }
  return bytes;
}

// seed64 is a Linear, then layers of Linear, ReLU, sigmoid, Linear, ReLU. The backward reads
// both ReLU outputs of a layer (their masks, and the next layer's input) and the sigmoid's
// output: the two ReLU outputs are saved, and the sigmoid, elementwise, is recomputed from
// the first inside the layer's gradient block; no product of the forward runs again. The
// first Linear's output is saved too: the first layer's weight gradient reads it.
TEST(Partition, SeedLayersSaveTheirReluOutputsAndRecomputeTheSigmoid) {
  manual_seed(61);
  const int64_t layers = 5;
  auto model = models::seed_model(layers);
  Split s = split(*model, randn({10, 10}));
  EXPECT_EQ(s.part.saved.size(), static_cast<size_t>(2 * layers + 1));
  // The last ReLU's output is the forward's own output: kept without a second copy.
  EXPECT_EQ(s.part.forward.outputs.size(), s.part.saved.size());
  EXPECT_EQ(s.part.saved[s.part.saved.size() - 1], 0u);
  std::map<std::string, int> backward = op_counts(s.part.backward);
  std::map<std::string, int> joint_backward = op_counts(s.joint.graph, s.captured.nodes.size());
  EXPECT_EQ(backward["sigmoid"], layers);
  EXPECT_EQ(backward["linear"], joint_backward["linear"]);
  EXPECT_EQ(backward["matmul"], joint_backward["matmul"]);
  EXPECT_EQ(backward["relu"], 0);
  std::map<std::string, int> saved_from;
  for (size_t index : s.part.saved) {
    ir::ValueId v = s.part.forward.outputs[index];
    ++saved_from[std::string(
        ops::op_def(s.part.forward.nodes[s.part.forward.values[v].producer].op).name)];
  }
  EXPECT_EQ(saved_from, (std::map<std::string, int>{{"linear", 1}, {"relu", 2 * layers}}));
}

// The gpt model: products, layer norms, softmax and attention are never run again in the
// backward; elementwise ops and layout ops are, where that saves memory. What is kept costs
// less than keeping every forward value the backward reads.
TEST(Partition, GptRecomputesOnlyCheapOpsAndSavesLessThanEverythingItReads) {
  manual_seed(62);
  models::GPTConfig cfg{
      .vocab_size = 32, .block_size = 16, .n_layer = 3, .n_head = 2, .d_model = 32};
  auto model = models::gpt(cfg);
  Split s = split(*model, randint(0, 32, {2, 16}));
  std::map<std::string, int> backward = op_counts(s.part.backward);
  std::map<std::string, int> joint_backward = op_counts(s.joint.graph, s.captured.nodes.size());
  for (const char* op : {"linear", "matmul", "layer_norm", "softmax", "log_softmax", "attention",
                         "sum", "mean", "amax"}) {
    EXPECT_EQ(backward[op], joint_backward[op]) << op << " was recomputed";
  }

  int64_t everything = 0;
  std::vector<bool> counted(s.captured.values.size(), false);
  for (size_t i = s.captured.nodes.size(); i < s.joint.graph.nodes.size(); ++i) {
    for (ir::ValueId v : s.joint.graph.nodes[i].inputs) {
      if (static_cast<size_t>(v) >= s.captured.values.size() || counted[v] ||
          s.captured.values[v].producer < 0) {
        continue;
      }
      counted[v] = true;
      const ops::TensorMeta& m = s.captured.meta(v);
      everything += shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype));
    }
  }
  EXPECT_LT(saved_bytes(s.part), everything);

  // Each layer saves the same number of values: the residual stream is kept per layer, not
  // rebuilt in the backward from the first layer's.
  std::map<int, int> per_region;
  for (size_t index : s.part.saved) {
    ir::ValueId v = s.part.forward.outputs[index];
    ir::RegionId r = s.part.forward.nodes[s.part.forward.values[v].producer].region;
    while (r != ir::kNoRegion &&
           s.part.forward.regions[r].type_name != "zc::nn::TransformerBlock") {
      r = s.part.forward.regions[r].parent;
    }
    if (r != ir::kNoRegion) ++per_region[r];
  }
  ASSERT_EQ(per_region.size(), static_cast<size_t>(cfg.n_layer));
  for (const auto& [region, n] : per_region) EXPECT_EQ(n, per_region.begin()->second);
}

// An activation-memory budget (CompileOptions::activation_memory_budget): 1 is the default
// partition exactly; 0 saves the least any partition can, running products again in the
// backward; 0.5 saves at most halfway between the two.
TEST(Partition, ABudgetTradesSavedBytesForRecomputation) {
  manual_seed(64);
  models::GPTConfig cfg{
      .vocab_size = 32, .block_size = 16, .n_layer = 3, .n_head = 2, .d_model = 32};
  auto model = models::gpt(cfg);
  Split s = split(*model, randint(0, 32, {2, 16}));
  const lower::Partition one = lower::partition(s.captured, s.joint, 1.0);
  EXPECT_EQ(ir::graph_hash(one.forward), ir::graph_hash(s.part.forward));
  EXPECT_EQ(ir::graph_hash(one.backward), ir::graph_hash(s.part.backward));
  EXPECT_EQ(one.saved, s.part.saved);
  const lower::Partition half = lower::partition(s.captured, s.joint, 0.5);
  const lower::Partition none = lower::partition(s.captured, s.joint, 0.0);
  for (const lower::Partition* p : {&half, &none}) {
    ir::verify(p->forward);
    ir::verify(p->backward);
  }
  const int64_t most = saved_bytes(s.part), least = saved_bytes(none), mid = saved_bytes(half);
  EXPECT_LT(least, most / 2);
  EXPECT_LE(mid, least + (most - least) / 2);
  EXPECT_GE(mid, least);
  // The least memory takes running products again; the default runs none again.
  std::map<std::string, int> joint_backward = op_counts(s.joint.graph, s.captured.nodes.size());
  std::map<std::string, int> backward = op_counts(none.backward);
  EXPECT_GT(backward["linear"] + backward["matmul"],
            joint_backward["linear"] + joint_backward["matmul"]);
}

// Partitioning is a function of the graph: the same graph gives byte-identical halves (they
// are cache keys).
TEST(Partition, IsDeterministic) {
  manual_seed(63);
  auto model = models::seed_model(4);
  Tensor x = randn({10, 10});
  Split a = split(*model, x), b = split(*model, x);
  EXPECT_EQ(ir::graph_hash(a.part.forward), ir::graph_hash(b.part.forward));
  EXPECT_EQ(ir::graph_hash(a.part.backward), ir::graph_hash(b.part.backward));
  EXPECT_EQ(a.part.saved, b.part.saved);
}

// The partition goes through the cache (runtime/driver/training_graphs.h): a second request reads
// it back instead of deriving it, and the graphs read back are the derived ones in canonical form,
// so they hash alike and compiling them hits the same graph-level entries.
TEST(TrainingGraphs, ReadBackFromTheCacheTheyEqualTheDerivedGraphs) {
  manual_seed(7);
  auto model = models::gpt(models::gpt_small_config(2));
  Split derived = split(*model, models::gpt_small_tokens());
  std::vector<size_t> wrt;
  for (size_t i = 0; i < derived.captured.inputs.size(); ++i) {
    if (derived.captured.inputs[i].kind == ir::InputKind::parameter) wrt.push_back(i);
  }
  compiler::reset_stats();
  runtime::CompileContext ctx;
  runtime::TrainingGraphs first = runtime::training_graphs(derived.captured, wrt, 1.0, ctx);
  runtime::TrainingGraphs again = runtime::training_graphs(derived.captured, wrt, 1.0, ctx);
  EXPECT_LE(compiler::stats().backwards_derived, 1);  // 0 when an earlier run stored it
  // The one read back leaves its backward as bytes for the backward's own thread to decode.
  EXPECT_FALSE(again.backward_bytes.empty());
  for (runtime::TrainingGraphs* t : {&first, &again}) {
    ASSERT_TRUE(t->partition.has_value());
    EXPECT_EQ(t->has_grad, derived.joint.has_grad);
    EXPECT_EQ(ir::graph_hash(t->partition->forward), ir::graph_hash(derived.part.forward));
    ir::Graph backward = runtime::take_backward(*t, derived.captured, wrt, 1.0, ctx);
    EXPECT_EQ(ir::graph_hash(backward), ir::graph_hash(derived.part.backward));
    EXPECT_EQ(t->partition->saved, derived.part.saved);
    ir::verify(t->partition->forward);
    ir::verify(backward);
  }
  // Stored backward bytes that do not decode: derived again, the same graph.
  runtime::TrainingGraphs damaged = runtime::training_graphs(derived.captured, wrt, 1.0, ctx);
  ASSERT_GT(damaged.backward_bytes.size(), 16u);
  damaged.backward_bytes.resize(damaged.backward_bytes.size() / 2);
  EXPECT_EQ(ir::graph_hash(runtime::take_backward(damaged, derived.captured, wrt, 1.0, ctx)),
            ir::graph_hash(derived.part.backward));
  // The same graph with other inputs wanting gradients is another entry.
  compiler::reset_stats();
  std::vector<size_t> fewer(wrt.begin(), wrt.begin() + 3);
  runtime::TrainingGraphs some = runtime::training_graphs(derived.captured, fewer, 1.0, ctx);
  EXPECT_EQ(some.has_grad.size(), 3u);
  ASSERT_TRUE(some.partition.has_value());
  EXPECT_NE(ir::graph_hash(runtime::take_backward(some, derived.captured, fewer, 1.0, ctx)),
            ir::graph_hash(derived.part.backward));
}

}  // namespace
}  // namespace zc
