#include "ops/registry.h"

#include <string>

#include "util/check.h"

namespace zc::ops {

// Each op class defines its entries in its own file.
void define_unary_ops(OpTable& table);
void define_binary_ops(OpTable& table);
void define_random_ops(OpTable& table);
void define_reduction_ops(OpTable& table);
void define_layout_ops(OpTable& table);
void define_matmul_ops(OpTable& table);
void define_norm_ops(OpTable& table);
void define_gather_ops(OpTable& table);
void define_attention_ops(OpTable& table);
void define_attention_grad_ops(OpTable& table);
void define_conv_ops(OpTable& table);
void define_pool_ops(OpTable& table);

namespace {
struct OpName {
  std::string_view name;
  OpClass cls;
};
constexpr OpName kOpNames[] = {
#define ZC_OP_NAME(name, cls) {#name, OpClass::cls},
    ZC_FOR_EACH_OP(ZC_OP_NAME)
#undef ZC_OP_NAME
};
static_assert(std::size(kOpNames) == static_cast<size_t>(kNumOps),
              "the op list and the OpId enum are out of step");

const OpTable& table() {
  static const OpTable t = [] {
    OpTable t;
    define_unary_ops(t);
    define_binary_ops(t);
    define_random_ops(t);
    define_reduction_ops(t);
    define_layout_ops(t);
    define_matmul_ops(t);
    define_norm_ops(t);
    define_gather_ops(t);
    define_attention_ops(t);
    define_attention_grad_ops(t);
    define_conv_ops(t);
    define_pool_ops(t);
    for (int i = 0; i < kNumOps; ++i) {
      ZC_CHECK(t[static_cast<OpId>(i)].infer != nullptr,
               "op " << kOpNames[i].name << " has no registry entry");
    }
    return t;
  }();
  return t;
}
}  // namespace

void OpTable::define(OpDef def) {
  int i = static_cast<int>(def.id);
  ZC_CHECK(i >= 0 && i < kNumOps, "bad op id");
  ZC_CHECK(defs_[i].infer == nullptr, "op " << kOpNames[i].name << " defined twice");
  ZC_CHECK(def.infer && def.eager, "op " << kOpNames[i].name << " lacks infer or eager");
  bool elementwise = kOpNames[i].cls == OpClass::unary || kOpNames[i].cls == OpClass::binary ||
                     kOpNames[i].cls == OpClass::ternary;
  ZC_CHECK(elementwise == (def.c_expr != nullptr),
           "op " << kOpNames[i].name
                 << (elementwise ? " is elementwise and lacks" : " is not elementwise but has")
                 << " a C expression");
  def.name = kOpNames[i].name;
  def.cls = kOpNames[i].cls;
  defs_[i] = def;
}

const OpDef& op_def(OpId id) {
  return table()[id];
}

const OpDef* find_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (kOpNames[i].name == name) return &op_def(static_cast<OpId>(i));
  }
  return nullptr;
}

EpilogueAct epilogue_act(OpId id, const Attrs& attrs) {
  const EpilogueActFn f = op_def(id).epilogue_act;
  return f ? f(attrs) : EpilogueAct::none;
}

bool is_elementwise(OpId id) {
  OpClass c = op_def(id).cls;
  return c == OpClass::unary || c == OpClass::binary || c == OpClass::ternary;
}

bool is_primitive_reduction(OpId id) {
  const OpDef& d = op_def(id);
  return d.cls == OpClass::reduction && d.decompose == nullptr;
}

bool is_view(OpId id) {
  const OpDef& d = op_def(id);
  return d.cls == OpClass::layout && d.decompose == nullptr;
}

std::vector<TensorMeta> infer_outputs(const OpDef& op, std::span<const TensorMeta> inputs,
                                      const Attrs& attrs) {
  std::vector<TensorMeta> out = op.infer(inputs, attrs);
  // Outputs live on the inputs' device: a number (a 0-dim CPU tensor) goes with a tensor of
  // any device, whichever operand it is.
  Device device = Device::cpu();
  for (const TensorMeta& m : inputs) {
    if (!m.device.is_cpu()) device = m.device;
  }
  for (TensorMeta& m : out) {
    m.wrapped_number = false;
    m.device = device;
  }
  return out;
}

TensorMeta meta_of(const Tensor& t) {
  return TensorMeta{t.shape(), t.dtype(), t.device(), t.unsafe_impl()->wrapped_number};
}

}  // namespace zc::ops
