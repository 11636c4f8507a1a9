#include "codegen/c_expr.h"

#include "ops/eager.h"
#include "ops/elementwise.h"
#include "util/check.h"

namespace zc::codegen {

std::string storage_type(DType t) {
  return t == DType::f16 || t == DType::bf16 ? "uint16_t" : ops::c_type_name(t);
}

std::string compute_type(DType t) {
  return ops::c_type_name(ops::compute_dtype(t));
}

std::string from_storage(DType t, const std::string& e) {
  if (t == DType::f16) return "zc_h2f(" + e + ")";
  if (t == DType::bf16) return "zc_bf2f(" + e + ")";
  return e;
}

std::string to_storage(DType t, const std::string& e) {
  if (t == DType::f16) return "zc_f2h(" + e + ")";
  if (t == DType::bf16) return "zc_f2bf(" + e + ")";
  if (t == DType::i8) return "(int8_t)(" + e + ")";
  return e;
}

std::string literal(double v, DType t) {
  return ops::c_literal(v, ops::compute_dtype(t));
}

std::string round_to_storage(DType t, const std::string& reg) {
  if (t == DType::f16 || t == DType::bf16) {
    return reg + " = " + from_storage(t, to_storage(t, reg)) + ";";
  }
  return "";
}

std::vector<std::string> node_lines(const ir::Graph& g, const ir::Node& n,
                                    std::span<const std::string> operands, const std::string& reg) {
  const ops::OpDef& def = ops::op_def(n.op);
  ZC_CHECK(def.c_expr, "node_lines: " << def.name << " is not elementwise");
  const ops::TensorMeta& out = g.meta(n.outputs[0]);
  std::vector<ops::TensorMeta> metas;
  for (ir::ValueId u : n.inputs) metas.push_back(g.meta(u));
  const DType ct = ops::elementwise_compute_dtype(def.compute, metas, out.dtype);
  // Operands convert to the compute type first, as the eager kernels convert their inputs; a
  // cast converts its operand itself.
  std::vector<std::string> args;
  for (const std::string& x : operands) {
    args.push_back(
        def.compute == ops::ComputeRule::cast ? x : "(" + ops::c_type_name(ct) + ")(" + x + ")");
  }
  std::string e = def.c_expr(ops::CExpr{args, ct, n.attrs});
  const DType rt = ops::compute_dtype(out.dtype);
  // A bool result of arithmetic done on 0 and 1 (max of bools, where) is its truth value.
  if (rt == DType::boolean && def.compute != ops::ComputeRule::cast &&
      def.compute != ops::ComputeRule::comparison) {
    e = "(" + e + " != 0)";
  }
  const std::string T = ops::c_type_name(rt);
  std::vector<std::string> lines{T + " " + reg + " = (" + T + ")(" + e + ");"};
  std::string round = round_to_storage(out.dtype, reg);
  if (!round.empty()) lines.push_back(round);
  return lines;
}

}  // namespace zc::codegen
