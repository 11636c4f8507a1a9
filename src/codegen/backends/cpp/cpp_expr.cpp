// Registers, loads, stores and the C expression of each elementwise op. Each expression
// computes in the same type and order as the op's eager kernel, so generated code and the
// interpreter agree to rounding.
#include <cmath>
#include <cstdio>

#include "codegen/backends/cpp/kernel_emitter.h"
#include "ops/eager.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"
#include "util/check.h"

namespace zc::codegen::cpp {

using ir::ValueId;
using ops::OpId;

std::string storage_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f64:
      return "double";
    case DType::f16:
    case DType::bf16:
      return "uint16_t";
    case DType::i64:
      return "int64_t";
    case DType::i32:
      return "int32_t";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

std::string compute_type(DType t) {
  return storage_type(ops::compute_dtype(t));
}

namespace {

std::string from_storage(DType t, const std::string& e) {
  if (t == DType::f16) return "zc_h2f(" + e + ")";
  if (t == DType::bf16) return "zc_bf2f(" + e + ")";
  return e;
}
std::string to_storage(DType t, const std::string& e) {
  if (t == DType::f16) return "zc_f2h(" + e + ")";
  if (t == DType::bf16) return "zc_f2bf(" + e + ")";
  return e;
}

std::string literal(double v, DType ct) {
  if (ct == DType::boolean) return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "(" + storage_type(ct) + ")NAN";
  if (std::isinf(v))
    return std::string("(") + storage_type(ct) + ")(" + (v < 0 ? "-" : "") + "INFINITY)";
  char buf[64];
  if (is_integral(ct)) {
    std::snprintf(buf, sizeof buf, "(%s)%lldLL", storage_type(ct).c_str(),
                  static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "(%s)%.17g", storage_type(ct).c_str(), v);
  }
  return buf;
}

std::string conv(DType ct, const std::string& e) {
  return "(" + storage_type(ct) + ")(" + e + ")";
}

// Float functions take an "f" suffix in float, none in double; exp and tanh in float use
// the prelude's vectorizable versions.
std::string fn(const char* name, DType ct, const std::string& x) {
  std::string n = name;
  if (ct == DType::f32 && (n == "exp" || n == "tanh")) return "zc_" + n + "f(" + x + ")";
  return n + (ct == DType::f32 ? "f(" : "(") + x + ")";
}

std::string unary_expr(const ir::Node& n, DType ct, const std::string& x) {
  std::string T = storage_type(ct);
  auto c = [&](const char* v) { return "(" + T + ")" + v; };
  switch (n.op) {
    case OpId::neg:
      return "(-" + x + ")";
    case OpId::abs:
      return is_floating(ct) ? fn("fabs", ct, x) : "(" + x + " < 0 ? -" + x + " : " + x + ")";
    case OpId::relu:
      return "(" + x + " < 0 ? " + c("0") + " : " + x + ")";
    case OpId::exp:
      return fn("exp", ct, x);
    case OpId::log:
      return fn("log", ct, x);
    case OpId::sqrt:
      return fn("sqrt", ct, x);
    case OpId::rsqrt:
      return "(" + c("1") + " / " + fn("sqrt", ct, x) + ")";
    case OpId::tanh:
      return fn("tanh", ct, x);
    case OpId::erf:
      return fn("erf", ct, x);
    case OpId::sigmoid:
      return "(" + c("1") + " / (" + c("1") + " + " + fn("exp", ct, "-" + x) + "))";
    case OpId::gelu:
      if (std::get<ops::GeluAttrs>(n.attrs).approximate == GeluApprox::tanh) {
        return "(" + c("0.5") + " * " + x + " * (" + c("1") + " + " +
               fn("tanh", ct,
                  c("0.7978845608028654") + " * (" + x + " + " + c("0.044715") + " * " + x + " * " +
                      x + " * " + x + ")") +
               "))";
      }
      return "(" + c("0.5") + " * " + x + " * (" + c("1") + " + " +
             fn("erf", ct, x + " * " + c("0.7071067811865476")) + "))";
    case OpId::clamp: {
      // Bounds compare in double, as the eager kernel does, so integer bounds are exact.
      const auto& a = std::get<ops::ClampAttrs>(n.attrs);
      std::string e = x;
      if (a.max)
        e = "((double)" + x + " > " + literal(*a.max, DType::f64) + " ? " +
            conv(ct, literal(*a.max, DType::f64)) + " : " + e + ")";
      if (a.min)
        e = "((double)" + x + " < " + literal(*a.min, DType::f64) + " ? " +
            conv(ct, literal(*a.min, DType::f64)) + " : " + e + ")";
      return e;
    }
    default:
      ZC_CHECK(false, "not a unary op: " << ops::op_def(n.op).name);
  }
  return "";
}

std::string binary_expr(OpId op, DType ct, const std::string& a, const std::string& b) {
  switch (op) {
    case OpId::add:
      return "(" + a + " + " + b + ")";
    case OpId::sub:
      return "(" + a + " - " + b + ")";
    case OpId::mul:
      return "(" + a + " * " + b + ")";
    case OpId::div:
      return "(" + a + " / " + b + ")";
    case OpId::pow:
      if (is_floating(ct)) return (ct == DType::f32 ? "powf(" : "pow(") + a + ", " + b + ")";
      return conv(ct, "pow((double)" + a + ", (double)" + b + ")");
    case OpId::maximum:
      return "zc_max<" + storage_type(ct) + ">(" + a + ", " + b + ")";
    case OpId::minimum:
      return "zc_min<" + storage_type(ct) + ">(" + a + ", " + b + ")";
    case OpId::eq:
      return "(" + a + " == " + b + ")";
    case OpId::ne:
      return "(" + a + " != " + b + ")";
    case OpId::lt:
      return "(" + a + " < " + b + ")";
    case OpId::le:
      return "(" + a + " <= " + b + ")";
    case OpId::gt:
      return "(" + a + " > " + b + ")";
    case OpId::ge:
      return "(" + a + " >= " + b + ")";
    default:
      ZC_CHECK(false, "not a binary op: " << ops::op_def(op).name);
  }
  return "";
}

bool is_comparison(OpId op) {
  return op == OpId::eq || op == OpId::ne || op == OpId::lt || op == OpId::le || op == OpId::gt ||
         op == OpId::ge;
}

}  // namespace

bool KernelEmitter::in_register(ValueId u) const {
  return s_.kernel_of[u] == kernel_ && u != blas_output_ && s_.state[u] != ValueState::alias;
}

std::string KernelEmitter::buffer(ValueId base) const {
  const BufferPlan::Slot& slot = plan_.slot[base];
  std::string T = storage_type(s_.graph.meta(base).dtype);
  std::string i = std::to_string(slot.index);
  std::string name, init;
  switch (slot.kind) {
    case BufferKind::input:
      name = "in" + i;
      init = "const " + T + "* __restrict " + name + " = (const " + T + "*)a->in[" + i + "];";
      break;
    case BufferKind::output:
      name = "out" + i;
      init = T + "* __restrict " + name + " = (" + T + "*)a->out[" + i + "];";
      break;
    case BufferKind::constant:
      name = "c" + i;
      init = "const " + T + "* __restrict " + name + " = (const " + T + "*)a->consts[" + i + "];";
      break;
    case BufferKind::arena:
      name = "ar" + i;
      init = T + "* __restrict " + name + " = (" + T + "*)(a->arena + " + i + ");";
      break;
  }
  for (const auto& [n, d] : locals_) {
    if (n == name) return name;
  }
  locals_.emplace_back(name, init);
  return name;
}

std::string KernelEmitter::element_ref(ValueId u, const Names& idx) const {
  const ValueView& v = s_.view[u];
  ZC_CHECK(v.base >= 0, "value %" << u << " is not materialized");
  ZC_CHECK(idx.size() == v.strides.size(), "index rank mismatch for %" << u);
  std::string off = std::to_string(v.offset);
  for (size_t j = 0; j < idx.size(); ++j) {
    if (idx[j] == "0" || v.strides[j] == 0) continue;
    off += " + " + idx[j] + (v.strides[j] == 1 ? "" : " * " + std::to_string(v.strides[j]));
  }
  return buffer(v.base) + "[" + off + "]";
}

std::string KernelEmitter::load(ValueId u, const Names& idx) const {
  return from_storage(s_.graph.meta(u).dtype, element_ref(u, idx));
}

std::string KernelEmitter::store(ValueId v, const Names& idx, const std::string& reg) const {
  return element_ref(v, idx) + " = " + to_storage(s_.graph.meta(v).dtype, reg) + ";";
}

KernelEmitter::Names KernelEmitter::broadcast(const Shape& from, const Shape& to,
                                              const Names& names) {
  Names out(from.size(), "0");
  size_t off = to.size() - from.size();
  for (size_t j = 0; j < from.size(); ++j) {
    if (from[j] != 1) out[j] = names[j + off];
  }
  return out;
}

std::string KernelEmitter::operand(ValueId u, const Shape& out, const Names& names) const {
  if (in_register(u)) return "v" + std::to_string(u);
  const ops::TensorMeta& m = s_.graph.meta(u);
  if (s_.state[u] == ValueState::constant && shape_numel(m.shape) == 1) {
    for (const ir::Constant& c : s_.graph.constants) {
      if (c.value == u)
        return literal(load_as_double(c.data.raw_data(), m.dtype), ops::compute_dtype(m.dtype));
    }
  }
  return load(u, broadcast(m.shape, out, names));
}

void KernelEmitter::emit_node(int32_t idx, const Names& names) {
  const ir::Node& n = s_.graph.nodes[idx];
  ValueId o = n.outputs[0];
  const ops::TensorMeta& om = s_.graph.meta(o);
  std::vector<std::string> in;
  std::vector<ops::TensorMeta> metas;
  for (ValueId u : n.inputs) {
    in.push_back(operand(u, om.shape, names));
    metas.push_back(s_.graph.meta(u));
  }
  const ops::OpDef& def = ops::op_def(n.op);
  std::string e;
  if (n.op == OpId::cast) {
    DType to = ops::compute_dtype(om.dtype);
    e = to == DType::boolean ? "(" + in[0] + " != 0)" : conv(to, in[0]);
  } else if (def.cls == ops::OpClass::unary) {
    DType ct = ops::compute_dtype(om.dtype);
    if (ct == DType::boolean) ct = DType::i32;  // abs, relu, clamp of bool run on 0/1
    e = unary_expr(n, ct, conv(ct, in[0]));
  } else if (def.cls == ops::OpClass::binary) {
    DType operand_t = ops::result_dtype(metas);
    if (n.op == OpId::div) operand_t = ops::floating_dtype(operand_t);
    DType ct = ops::compute_dtype(operand_t);
    if (ct == DType::boolean && !is_comparison(n.op)) ct = DType::i32;
    e = binary_expr(n.op, ct, conv(ct, in[0]), conv(ct, in[1]));
  } else if (n.op == OpId::where) {
    DType ct = ops::compute_dtype(om.dtype);
    e = "(" + in[0] + " ? " + conv(ct, in[1]) + " : " + conv(ct, in[2]) + ")";
  } else {
    ZC_CHECK(false, "emit_node: " << def.name << " is not elementwise");
  }
  DType rt = ops::compute_dtype(om.dtype);
  std::string reg = "v" + std::to_string(o);
  if (rt == DType::boolean && n.op != OpId::cast && !is_comparison(n.op)) e = "(" + e + " != 0)";
  w_.line(storage_type(rt) + " " + reg + " = " + conv(rt, e) + ";");
  // A 16-bit result is rounded after every op, as the eager kernels store it.
  if (om.dtype == DType::f16) w_.line(reg + " = zc_h2f(zc_f2h(" + reg + "));");
  if (om.dtype == DType::bf16) w_.line(reg + " = zc_bf2f(zc_f2bf(" + reg + "));");
}

}  // namespace zc::codegen::cpp
