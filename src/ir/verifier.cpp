#include "ir/verifier.h"

#include <string>

#include "ops/attrs.h"

namespace zc::ir {

namespace {
[[noreturn]] void fail(const std::string& what) {
  throw Error("graph verifier: " + what);
}
}  // namespace

void verify(const Graph& g) {
  const size_t n = g.values.size();
  std::vector<bool> defined(n, false);
  auto define = [&](ValueId v, const std::string& by) {
    if (v < 0 || static_cast<size_t>(v) >= n)
      fail(by + " defines out-of-range value %" + std::to_string(v));
    if (defined[v]) fail("value %" + std::to_string(v) + " is defined twice (again by " + by + ")");
    defined[v] = true;
  };
  auto use = [&](ValueId v, const std::string& by) {
    if (v < 0 || static_cast<size_t>(v) >= n || !defined[v]) {
      fail(by + " uses %" + std::to_string(v) + " before it is defined");
    }
  };
  for (const Input& in : g.inputs) define(in.value, "an input");
  for (const Constant& c : g.constants) {
    define(c.value, "a constant");
    if (!c.data.defined() || c.data.shape() != g.meta(c.value).shape ||
        c.data.dtype() != g.meta(c.value).dtype) {
      fail("constant %" + std::to_string(c.value) + " does not match its metadata");
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    const ops::OpDef& def = ops::op_def(node.op);
    std::string where = "node " + std::to_string(i) + " (" + std::string(def.name) + ")";
    std::vector<ops::TensorMeta> in;
    for (ValueId v : node.inputs) {
      use(v, where);
      in.push_back(g.meta(v));
    }
    if (node.attrs.index() != def.attrs_index) fail(where + " has the wrong attribute kind");
    std::vector<ops::TensorMeta> expect = ops::infer_outputs(def, in, node.attrs);
    if (expect.size() != node.outputs.size()) fail(where + " has the wrong number of outputs");
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ValueId v = node.outputs[o];
      define(v, where);
      if (!(g.meta(v) == expect[o]))
        fail(where + " output %" + std::to_string(v) +
             " metadata disagrees with the op's shape rule");
      if (g.values[v].producer != static_cast<int32_t>(i))
        fail(where + " output %" + std::to_string(v) + " names the wrong producer");
    }
    if (node.region != kNoRegion) {
      if (node.region < 0 || static_cast<size_t>(node.region) >= g.regions.size())
        fail(where + " names a missing region");
      const Region& r = g.regions[node.region];
      if (static_cast<int32_t>(i) < r.begin || static_cast<int32_t>(i) >= r.end)
        fail(where + " lies outside its region's range");
    }
  }
  for (ValueId v : g.outputs) use(v, "the output list");
  for (size_t i = 0; i < g.regions.size(); ++i) {
    const Region& r = g.regions[i];
    if (r.begin < 0 || r.end < r.begin || r.end > static_cast<int32_t>(g.nodes.size())) {
      fail("region " + std::to_string(i) + " has a bad node range");
    }
    if (r.parent != kNoRegion) {
      if (r.parent < 0 || r.parent >= static_cast<RegionId>(i))
        fail("region " + std::to_string(i) + " names a bad parent");
      const Region& p = g.regions[r.parent];
      if (r.begin < p.begin || r.end > p.end)
        fail("region " + std::to_string(i) + " is not nested in its parent");
    }
  }
}

}  // namespace zc::ir
