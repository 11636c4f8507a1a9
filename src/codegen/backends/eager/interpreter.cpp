#include "codegen/backends/eager/interpreter.h"

#include "util/check.h"

namespace zc::codegen::eager {

namespace {

// Index of the last node reading each value, so intermediates are released as soon as
// possible (graph outputs are never released).
std::vector<int32_t> last_uses(const ir::Graph& g) {
  std::vector<int32_t> last(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (ir::ValueId v : g.nodes[i].inputs) last[v] = static_cast<int32_t>(i);
  }
  for (ir::ValueId v : g.outputs) last[v] = INT32_MAX;
  return last;
}

std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<int32_t>& last,
                              std::span<const Tensor* const> inputs) {
  ZC_CHECK(inputs.size() == g.inputs.size(),
           "graph takes " << g.inputs.size() << " inputs, got " << inputs.size());
  std::vector<Tensor> env(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) env[g.inputs[i].value] = *inputs[i];
  for (const ir::Constant& c : g.constants) env[c.value] = c.data;
  std::vector<Tensor> args;
  std::vector<ops::TensorMeta> metas;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const ops::OpDef& def = ops::op_def(n.op);
    args.clear();
    metas.clear();
    for (ir::ValueId v : n.inputs) args.push_back(env[v]);
    for (ir::ValueId v : n.outputs) metas.push_back(g.meta(v));
    std::vector<Tensor> outs = def.eager(args, n.attrs, metas);
    for (size_t o = 0; o < n.outputs.size(); ++o) env[n.outputs[o]] = std::move(outs[o]);
    for (ir::ValueId v : n.inputs) {
      if (last[v] == static_cast<int32_t>(i)) env[v] = Tensor();
    }
  }
  std::vector<Tensor> out;
  out.reserve(g.outputs.size());
  for (ir::ValueId v : g.outputs) out.push_back(env[v]);
  return out;
}

class InterpreterExecutable final : public Executable {
 public:
  explicit InterpreterExecutable(ir::Graph g) : g_(std::move(g)), last_(last_uses(g_)) {}
  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    return run_graph(g_, last_, inputs);
  }
  std::string_view backend() const override { return "eager"; }

 private:
  ir::Graph g_;
  std::vector<int32_t> last_;
};

}  // namespace

std::vector<Tensor> interpret(const ir::Graph& g, std::span<const Tensor* const> inputs) {
  return run_graph(g, last_uses(g), inputs);
}

std::shared_ptr<const Executable> make_interpreter_executable(ir::Graph g) {
  return std::make_shared<InterpreterExecutable>(std::move(g));
}

namespace {
class EagerBackend final : public Backend {
 public:
  std::string_view name() const override { return "eager"; }
  Device::Type device() const override { return Device::Type::cpu; }
  std::string unavailable_reason() const override { return ""; }
  bool interprets() const override { return true; }
  std::shared_ptr<const Executable> interpret(const ir::Graph& captured) const override {
    return make_interpreter_executable(captured);
  }
};
}  // namespace

std::unique_ptr<Backend> make_eager_backend() {
  return std::make_unique<EagerBackend>();
}

}  // namespace zc::codegen::eager
