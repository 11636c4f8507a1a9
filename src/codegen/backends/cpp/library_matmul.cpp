#include "codegen/backends/cpp/library_matmul.h"

#include <algorithm>

#include "ops/registry.h"
#include "ops/shape_rules.h"

namespace zc::codegen::cpp {

namespace {

// Operand v's stride along batch dim x of the product's batch `batch` (right-aligned; 0 where
// v broadcasts), from its own batch dims `own`.
int64_t batch_stride(const Shape& own, const Shape& strides, const Shape& batch, size_t x) {
  const size_t off = batch.size() - own.size();
  if (x < off || own[x - off] == 1) return 0;
  return strides[x - off];
}

}  // namespace

bool blas_layout(const Shape& st, int64_t rows, int64_t cols, bool* trans, int64_t* ld) {
  const int64_t rs = st[st.size() - 2], cs = st.back();
  if (cs == 1 && (rows <= 1 || rs >= std::max<int64_t>(cols, 1))) {
    *trans = false;
    *ld = std::max<int64_t>(rows <= 1 ? cols : rs, 1);
    return true;
  }
  if (rs == 1 && (cols <= 1 || cs >= std::max<int64_t>(rows, 1))) {
    *trans = true;
    *ld = std::max<int64_t>(cols <= 1 ? rows : cs, 1);
    return true;
  }
  return false;
}

std::optional<LibraryCall> library_call(const Schedule& s, const Kernel& k) {
  if (k.kind != KernelKind::matmul || !k.library) return std::nullopt;
  const ir::Node& n = s.graph.nodes[k.anchor];
  const ir::ValueId A = n.inputs[0], B = n.inputs[1], C = n.outputs[0];
  const Shape& as = s.graph.meta(A).shape;
  const Shape& bs = s.graph.meta(B).shape;
  const DType dt = s.graph.meta(C).dtype;
  const ops::MatmulShapes d = ops::matmul_shapes(as, bs);
  if (d.a_vec || d.b_vec || (dt != DType::f32 && dt != DType::f64)) return std::nullopt;
  if (shape_numel(k.space) == 0 || d.K == 0) return std::nullopt;
  LibraryCall call;
  cpu::GemmProblem& p = call.problem;
  p.dtype = dt;
  const Shape& ast = s.values[A].view.strides;
  const Shape& bst = s.values[B].view.strides;
  if (!blas_layout(ast, d.M, d.K, &p.ta, &p.lda) || !blas_layout(bst, d.K, d.N, &p.tb, &p.ldb)) {
    return std::nullopt;
  }
  p.m = d.M;
  p.n = d.N;
  p.k = d.K;
  p.ldc = d.N;
  const size_t nb = d.batch.size();
  call.batch = d.batch;
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  // A batch of products with one shared B (a Linear applied to [B, T, d]) is one GEMM with the
  // batch folded into the rows when A's rows are evenly spaced across the batch: fewer, larger
  // BLAS calls, and the same call the eager kernel makes.
  if (nb > 0 && !p.ta && as.size() == nb + 2) {
    bool b_shared = true;
    for (size_t x = 0; x < b_batch.size(); ++x)
      b_shared = b_shared && (b_batch[x] == 1 || bst[x] == 0);
    bool even = ast[nb] == p.lda;
    for (size_t x = nb; x-- > 0 && even;) even = ast[x] == ast[x + 1] * as[x + 1];
    if (b_shared && even) {
      p.m = shape_numel(d.batch) * d.M;
      call.batch.assign(nb, 1);
    }
  }
  const Shape& cst = s.values[C].view.strides;
  for (size_t x = 0; x < nb; ++x) {
    if (call.batch[x] <= 1) continue;
    p.batch.push_back({call.batch[x], batch_stride(a_batch, ast, d.batch, x),
                       batch_stride(b_batch, bst, d.batch, x), cst[x]});
  }
  // B read from a graph input or constant is the same from call to call in inference (a
  // weight), so its packed copy can be kept (GemmChoice::Library::onednn_packed).
  const ir::ValueId b_base = s.values[B].view.base;
  const bool from_input = std::any_of(s.graph.inputs.begin(), s.graph.inputs.end(),
                                      [&](const ir::Input& in) { return in.value == b_base; });
  const bool from_constant = std::any_of(s.graph.constants.begin(), s.graph.constants.end(),
                                         [&](const ir::Constant& c) { return c.value == b_base; });
  p.b_weight = dt == DType::f32 && p.batch.empty() && (from_input || from_constant);
  return call;
}

namespace {

// The leading dim of value v viewed as [rows, shape.back()] rows: unit stride along its last dim
// and rows evenly spaced over its leading dims; none otherwise.
std::optional<int64_t> rows_ld(const Schedule& s, ir::ValueId v) {
  const Shape& shape = s.graph.meta(v).shape;
  const Shape& st = s.values[v].view.strides;
  if (shape.empty() || st.size() != shape.size() || st.back() != 1) return std::nullopt;
  if (shape.size() == 1) return shape.back();
  for (size_t d = 0; d + 2 < shape.size(); ++d) {
    if (shape[d] > 1 && st[d] != st[d + 1] * shape[d + 1]) return std::nullopt;
  }
  const int64_t ld = st[shape.size() - 2];
  return ld >= shape.back() || shape[shape.size() - 2] == 1 ? std::optional<int64_t>(ld)
                                                            : std::nullopt;
}

// Whether v, broadcast to `space`, is one row of its last dim: size 1 in every other dim, unit
// stride along the last.
bool row_vector(const Schedule& s, ir::ValueId v, const Shape& space) {
  const Shape& shape = s.graph.meta(v).shape;
  if (shape.empty() || shape.back() != space.back() || s.values[v].view.strides.back() != 1) {
    return false;
  }
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    if (shape[d] != 1) return false;
  }
  return true;
}

// Whether v is read only by nodes of kernel k, and is no output: a value the epilogue's call
// need not write. A scan of the graph, once per fusable product at code generation.
bool internal(const Schedule& s, const Kernel& k, ir::ValueId v) {
  for (const auto& outs : {s.graph.outputs, s.outputs}) {
    if (std::find(outs.begin(), outs.end(), v) != outs.end()) return false;
  }
  for (size_t i = 0; i < s.graph.nodes.size(); ++i) {
    const auto& ins = s.graph.nodes[i].inputs;
    if (std::find(ins.begin(), ins.end(), v) != ins.end() &&
        std::find(k.nodes.begin(), k.nodes.end(), static_cast<int32_t>(i)) == k.nodes.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<FusedEpilogue> fused_epilogue(const Schedule& s, const Kernel& k,
                                            const LibraryCall& call) {
  if (call.problem.dtype != DType::f32 || !call.problem.batch.empty()) {
    return std::nullopt;
  }
  FusedEpilogue f;
  ir::ValueId cur = s.graph.nodes[k.anchor].outputs[0];
  for (int32_t idx : k.nodes) {
    if (idx == k.anchor) continue;
    const ir::Node& n = s.graph.nodes[idx];
    if (n.outputs.size() != 1 || s.graph.meta(n.outputs[0]).dtype != DType::f32 ||
        s.graph.meta(n.outputs[0]).shape != k.space || f.act != ops::EpilogueAct::none) {
      return std::nullopt;
    }
    if (n.op == ops::OpId::add && n.inputs.size() == 2 && n.inputs[0] != n.inputs[1] &&
        (n.inputs[0] == cur || n.inputs[1] == cur)) {
      const ir::ValueId other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      if (s.graph.meta(other).dtype != DType::f32) return std::nullopt;
      if (f.bias < 0 && row_vector(s, other, k.space)) {
        f.bias = other;
      } else if (f.residual < 0 && s.graph.meta(other).shape == k.space) {
        const auto ld = rows_ld(s, other);
        if (!ld) return std::nullopt;
        f.residual = other;
        f.ldr = *ld;
      } else {
        return std::nullopt;
      }
    } else if (const ops::EpilogueAct act = ops::epilogue_act(n.op, n.attrs);
               act != ops::EpilogueAct::none && n.inputs.size() == 1 && n.inputs[0] == cur) {
      f.act = act;
    } else {
      return std::nullopt;
    }
    cur = n.outputs[0];
  }
  // The call writes only the last value. The kernel stores a step before it only when
  // something else reads it; the product it always stores, so its readers are looked up.
  const ir::ValueId product = s.graph.nodes[k.anchor].outputs[0];
  for (ir::ValueId v : k.stores) {
    if (v != cur && v != product) return std::nullopt;
  }
  if (product != cur && !internal(s, k, product)) return std::nullopt;
  const auto ldo = rows_ld(s, cur);
  if (!ldo) return std::nullopt;
  f.out = cur;
  f.ldo = *ldo;
  return f;
}

}  // namespace zc::codegen::cpp
