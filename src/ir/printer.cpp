#include "ir/printer.h"

#include <sstream>

#include "ops/attrs.h"

namespace zc::ir {

namespace {
std::string meta_text(const ops::TensorMeta& m) {
  return std::string(dtype_name(m.dtype)) + shape_str(m.shape);
}
}  // namespace

std::string print(const Graph& g) {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Input& in = g.inputs[i];
    os << (i ? ", " : "") << "%" << in.value << ": " << meta_text(g.meta(in.value)) << " "
       << input_kind_name(in.kind);
  }
  os << ") {\n";
  for (const Constant& c : g.constants) {
    os << "  %" << c.value << ": " << meta_text(g.meta(c.value)) << " = constant";
    if (c.data.numel() <= 8) {
      Tensor d = c.data.to(DType::f64).contiguous();
      os << " [";
      for (int64_t k = 0; k < d.numel(); ++k) os << (k ? ", " : "") << d.data<double>()[k];
      os << "]";
    }
    os << "\n";
  }
  // Open and close region blocks as the node index crosses their ranges.
  std::vector<RegionId> stack;
  auto depth_indent = [&]() { return std::string(2 * (stack.size() + 1), ' '); };
  for (size_t i = 0; i <= g.nodes.size(); ++i) {
    int32_t at = static_cast<int32_t>(i);
    while (!stack.empty() && g.regions[stack.back()].end <= at) {
      stack.pop_back();
      os << depth_indent() << "}\n";
    }
    for (size_t r = 0; r < g.regions.size(); ++r) {
      const Region& reg = g.regions[r];
      if (reg.begin == at && reg.end > at &&
          (reg.parent == kNoRegion || (!stack.empty() && stack.back() == reg.parent))) {
        os << depth_indent() << "region #" << r << " " << reg.type_name << " {\n";
        stack.push_back(static_cast<RegionId>(r));
      }
    }
    if (i == g.nodes.size()) break;
    const Node& n = g.nodes[i];
    os << depth_indent();
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      os << (o ? ", " : "") << "%" << n.outputs[o] << ": " << meta_text(g.meta(n.outputs[o]));
    }
    os << " = " << ops::op_def(n.op).name << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << "%" << n.inputs[k];
    os << ")";
    std::string attrs = ops::attrs_str(n.attrs);
    if (!attrs.empty()) os << " {" << attrs << "}";
    os << "\n";
  }
  os << "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << "%" << g.outputs[i];
  os << "\n}\n";
  return os.str();
}

}  // namespace zc::ir
