#include "runtime/driver/training_graphs.h"

#include "cache/cache.h"
#include "ir/canonical.h"
#include "lower/autodiff.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/records/codec.h"
#include "util/check.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/version.h"

namespace zc::runtime {
namespace {

std::vector<uint8_t> encode(const TrainingGraphs& t) {
  RecordWriter w(kTrainingGraphsFormat);
  w.u64(t.has_grad.size());
  for (bool b : t.has_grad) w.u8(b ? 1 : 0);
  w.u8(t.partition ? 1 : 0);
  if (t.partition) {
    for (const ir::Graph* g : {&t.partition->forward, &t.partition->backward}) {
      std::vector<uint8_t> bytes = ir::canonical_bytes(*g);
      w.u64(bytes.size());
      w.raw(bytes.data(), bytes.size());
    }
    w.u64(t.partition->saved.size());
    for (size_t s : t.partition->saved) w.u64(s);
  }
  return w.take();
}

// Raises zc::Error for bytes that do not decode, or that do not fit `wrt` and `captured`.
TrainingGraphs decode(std::span<const uint8_t> bytes, const ir::Graph& captured, size_t wrt) {
  RecordReader r(bytes, kTrainingGraphsFormat);
  TrainingGraphs t;
  const uint64_t n = r.u64();
  if (n != wrt) r.fail("for " + std::to_string(n) + " inputs, not " + std::to_string(wrt));
  for (uint64_t i = 0; i < n; ++i) t.has_grad.push_back(r.u8() != 0);
  if (r.u8() != 0) {
    lower::Partition p;
    p.forward = ir::read_canonical(r.raw(r.u64()));
    std::span<const uint8_t> backward = r.raw(r.u64());
    t.backward_bytes.assign(backward.begin(), backward.end());
    const uint64_t saved = r.u64();
    for (uint64_t i = 0; i < saved; ++i) {
      const uint64_t s = r.u64();
      if (s >= p.forward.outputs.size()) r.fail("a bad saved index");
      p.saved.push_back(s);
    }
    if (p.forward.inputs.size() != captured.inputs.size() ||
        p.forward.outputs.size() < captured.outputs.size()) {
      r.fail("they do not fit the captured graph");
    }
    t.partition = std::move(p);
  }
  r.finish("saved index");
  bool any = false;
  for (bool b : t.has_grad) any = any || b;
  if (any != t.partition.has_value()) {
    r.fail("gradients and partition disagree");
  }
  return t;
}

TrainingGraphs derive(const ir::Graph& captured, std::span<const size_t> wrt, double budget,
                      CompileContext& ctx) {
  lower::JointGraph joint = lower::joint_graph(captured, wrt);
  ctx.count(stats::Counter::backwards_derived);
  TrainingGraphs t;
  t.has_grad = joint.has_grad;
  for (bool b : joint.has_grad) {
    if (b) {
      t.partition = lower::partition(captured, joint, budget);
      int64_t bytes = 0;
      for (size_t i : t.partition->saved) {
        const ops::TensorMeta& m = t.partition->forward.meta(t.partition->forward.outputs[i]);
        bytes += shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype));
      }
      ZC_LOG(timing) << "partition for activation_memory_budget " << budget << ": "
                     << t.partition->saved.size() << " values, " << bytes
                     << " bytes saved for the backward";
      break;
    }
  }
  return t;
}

}  // namespace

TrainingGraphs training_graphs(const ir::Graph& captured, std::span<const size_t> wrt,
                               double budget, CompileContext& ctx) {
  Timer timer;
  cache::Cache* store = ctx.store();
  const cache::Key key = training_graphs_key(hex(ir::graph_hash(captured)), wrt, budget);
  if (auto e = store ? store->get(key, ctx.lookups()) : std::nullopt) {
    try {
      TrainingGraphs t = decode(e->payload, captured, wrt.size());
      t.key = key.digest();
      ZC_LOG(timing) << "training graphs read from the cache in " << timer.ms() << " ms";
      return t;
    } catch (const Error& err) {
      ZC_LOG(cache) << "stored training graphs unusable (" << err.what() << "); deriving them";
    }
  }
  TrainingGraphs t = derive(captured, wrt, budget, ctx);
  t.key = key.digest();
  const double ms = timer.ms();
  if (store) store->put(key, encode(t), ms, ctx.lookups());
  ZC_LOG(timing) << "training graphs derived and partitioned in " << ms << " ms";
  return t;
}

ir::Graph take_backward(TrainingGraphs& t, const ir::Graph& captured, std::span<const size_t> wrt,
                        double budget, CompileContext& ctx) {
  ZC_CHECK(t.partition, "take_backward: no partition");
  if (t.backward_bytes.empty()) return std::move(t.partition->backward);
  std::vector<uint8_t> bytes = std::move(t.backward_bytes);
  try {
    Timer timer;
    ir::Graph g = ir::read_canonical(bytes);
    ZC_LOG(timing) << "backward graph of " << g.nodes.size() << " nodes decoded in " << timer.ms()
                   << " ms";
    return g;
  } catch (const Error& err) {
    ZC_LOG(cache) << "stored backward graph unusable (" << err.what() << "); deriving it";
  }
  TrainingGraphs derived = derive(captured, wrt, budget, ctx);
  ZC_CHECK(derived.partition, "take_backward: the derivation has no backward");
  return std::move(derived.partition->backward);
}

}  // namespace zc::runtime
