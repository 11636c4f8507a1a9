#include "codegen/schedule.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "util/check.h"
#include "util/log.h"

namespace zc::codegen {

bool Schedule::varies(const Kernel& k) const {
  if (varying.empty()) return false;
  if (k.copy_from >= 0 && varies(k.copy_from)) return true;
  for (int32_t n : k.nodes) {
    for (ir::ValueId o : graph.nodes[n].outputs) {
      if (varies(o)) return true;
    }
    for (ir::ValueId u : graph.nodes[n].inputs) {
      if (varies(u)) return true;
    }
  }
  return false;
}

const char* kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::pointwise:
      return "pointwise";
    case KernelKind::row_reduce:
      return "row_reduce";
    case KernelKind::matmul:
      return "matmul";
    case KernelKind::concat:
      return "concat";
    case KernelKind::gather:
      return "gather";
    case KernelKind::copy:
      return "copy";
    case KernelKind::attention:
      return "attention";
    case KernelKind::extern_op:
      return "extern";
  }
  return "?";
}

namespace {

using ir::ValueId;
using ops::OpId;
using MatmulPath = SchedulePolicy::MatmulPath;

// The shape of a row value: `space` with the reduced dims set to 1 or removed.
Shape row_shape(const Shape& space, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < space.size(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
    if (!reduced) {
      out.push_back(space[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

class Scheduler {
 public:
  Scheduler(const ir::Graph& g, const SchedulePolicy& policy, std::vector<uint64_t> varying)
      : policy_(policy) {
    s_.graph = g;
    s_.varying = std::move(varying);
    s_.values.assign(g.values.size(), ValueSchedule{});
    for (const ir::Input& in : g.inputs) set_base(in.value, ValueState::input);
    for (const ir::Constant& c : g.constants) set_base(c.value, ValueState::constant);
  }

  Schedule run() {
    const ir::Graph& g = s_.graph;
    std::vector<bool> converting = converting_casts();
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      int32_t idx = static_cast<int32_t>(i);
      if (converting[i]) {
        place_converting_alias(idx);
      } else if (!policy_.supports(n.op, meta(n.outputs[0]).dtype)) {
        place_single(idx, KernelKind::extern_op);
      } else if (ops::is_view(n.op)) {
        place_view(idx);
      } else if (ops::is_elementwise(n.op)) {
        place_elementwise(idx);
      } else if (ops::is_primitive_reduction(n.op)) {
        place_reduction(idx);
      } else if (n.op == OpId::matmul) {
        place_matmul(idx);
      } else if (n.op == OpId::cat) {
        place_single(idx, KernelKind::concat);
      } else if (n.op == OpId::embedding) {
        place_single(idx, KernelKind::gather);
      } else if (is_attention_family(n.op)) {  // kept whole by the backend
        place_single(idx, KernelKind::attention);
      } else {
        place_single(idx, KernelKind::extern_op);
      }
    }
    place_outputs();
    order_kernels();
    return std::move(s_);
  }

 private:
  const ops::TensorMeta& meta(ValueId v) const { return s_.graph.meta(v); }
  ValueSchedule& at(ValueId v) { return s_.values[v]; }

  void set_base(ValueId v, ValueState st) {
    at(v).state = st;
    at(v).view = ValueView{v, 0, contiguous_strides(meta(v).shape)};
  }

  int32_t add_kernel(Kernel k) {
    s_.kernels.push_back(std::move(k));
    return static_cast<int32_t>(s_.kernels.size() - 1);
  }

  void add_store(int32_t k, ValueId v) {
    auto& st = s_.kernels[k].stores;
    if (std::find(st.begin(), st.end(), v) == st.end()) st.push_back(v);
  }

  // v is about to be read by another kernel: it is materialized (stored densely if it was
  // fused), and the kernel that computes it closes (a later member could otherwise depend on
  // the reader).
  void materialize(ValueId v) {
    ValueId base = s_.base_of(v);
    int32_t k = at(base).kernel;
    if (at(base).state == ValueState::fused) {
      add_store(k, base);
      set_base(base, ValueState::stored);
    }
    if (k >= 0) s_.kernels[k].closed = true;
  }

  // Defines v as computed by kernel k.
  void define(ValueId v, int32_t k, ValueState st) {
    at(v).kernel = k;
    if (st == ValueState::stored) {
      set_base(v, ValueState::stored);
      add_store(k, v);
    } else {
      at(v).state = st;
    }
  }

  // With ZC_LOGS=fusion: why node idx did not join kernel k.
  void refused(int32_t idx, int32_t k, const std::string& why) const {
    const ir::Node& n = s_.graph.nodes[idx];
    ZC_LOG(fusion) << "node " << idx << " (" << ops::op_def(n.op).name << " "
                   << shape_str(meta(n.outputs[0]).shape) << ") not fused into kernel " << k << " ("
                   << kernel_kind_name(s_.kernels[k].kind) << " " << shape_str(s_.kernels[k].space)
                   << "): " << why;
  }

  void place_view(int32_t idx) {
    const ir::Node& n = s_.graph.nodes[idx];
    ValueId in = n.inputs[0], out = n.outputs[0];
    materialize(in);
    const ValueView& src = at(in).view;
    const Shape& in_shape = meta(in).shape;
    ValueView v{src.base, src.offset, {}};
    bool ok = true;
    switch (n.op) {
      case OpId::permute:
        for (int64_t d : std::get<ops::PermuteAttrs>(n.attrs).dims)
          v.strides.push_back(src.strides[d]);
        break;
      case OpId::expand: {
        const Shape& target = std::get<ops::ShapeAttrs>(n.attrs).shape;
        size_t off = target.size() - in_shape.size();
        v.strides.assign(target.size(), 0);
        for (size_t i = 0; i < in_shape.size(); ++i) {
          v.strides[off + i] = in_shape[i] == target[off + i] ? src.strides[i] : 0;
        }
        break;
      }
      case OpId::slice: {
        const auto& a = std::get<ops::SliceAttrs>(n.attrs);
        v.strides = src.strides;
        v.offset += a.start * src.strides[a.dim];
        v.strides[a.dim] *= a.step;
        break;
      }
      default:  // reshape
        ok = ops::reshape_strides(in_shape, src.strides, std::get<ops::ShapeAttrs>(n.attrs).shape,
                                  &v.strides);
    }
    if (ok) {
      at(out).state = ValueState::alias;
      at(out).view = v;
      return;
    }
    Kernel k;
    k.kind = KernelKind::copy;
    k.nodes = {idx};
    k.space = in_shape;
    k.copy_from = in;
    k.copy_to = out;
    define(out, add_kernel(std::move(k)), ValueState::stored);
  }

  // Per node: a cast from f16/bf16 to f32 that no graph output reaches and whose every use,
  // through permute/expand/slice views, is
  //  - an operand of a generated or library matmul whose other operand is such a cast from the
  //    same dtype (when the policy's matmuls read half operands), or else
  //  - (a cast from i8, when the policy's generated matmuls read int8 operands) an operand of
  //    a matmul, which place_matmul then generates, or else
  //  - (a cast of a graph input, parameter or constant, when the policy's elementwise loads
  //    read half inputs) such a matmul, an elementwise node, a reduction or attention.
  std::vector<bool> converting_casts() const {
    const ir::Graph& g = s_.graph;
    std::vector<bool> out(g.nodes.size(), false);
    if (!policy_.matmul_reads_half_operands() && !policy_.elementwise_reads_half_inputs() &&
        !policy_.matmul_reads_int8_operands())
      return out;
    std::vector<std::vector<int32_t>> users(g.values.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (ValueId u : g.nodes[i].inputs) users[u].push_back(static_cast<int32_t>(i));
    }
    std::vector<bool> is_output(g.values.size(), false);
    for (ValueId o : g.outputs) is_output[o] = true;
    // The half dtype a matmul operand is a (viewed) cast from, or nullopt.
    std::function<std::optional<DType>(ValueId)> cast_source = [&](ValueId v) {
      std::optional<DType> none;
      const int32_t p = g.values[v].producer;
      if (p < 0) return none;
      const ir::Node& n = g.nodes[p];
      if (n.op == OpId::permute || n.op == OpId::expand || n.op == OpId::slice)
        return cast_source(n.inputs[0]);
      if (n.op != OpId::cast || meta(v).dtype != DType::f32) return none;
      const DType from = meta(n.inputs[0]).dtype;
      return from == DType::f16 || from == DType::bf16 || from == DType::i8
                 ? std::optional<DType>(from)
                 : none;
    };
    // Whether matmul idx reads its operand that is a cast from `from` through its loads: a
    // product with an int8 operand is generated, and its loads convert any operand.
    auto reads_converted = [&](int32_t idx, DType from) {
      const ir::Node& n = g.nodes[idx];
      if (n.op != OpId::matmul) return false;
      auto a = cast_source(n.inputs[0]), b = cast_source(n.inputs[1]);
      if (from == DType::i8 || a == DType::i8 || b == DType::i8) {
        if (!policy_.matmul_reads_int8_operands()) return false;
      } else if (!policy_.matmul_reads_half_operands() || !a || !b || *a != *b) {
        return false;
      }
      const auto dims = ops::matmul_shapes(meta(n.inputs[0]).shape, meta(n.inputs[1]).shape);
      return matmul_path(n, dims) != MatmulPath::extern_call &&
             policy_.supports(OpId::matmul, meta(n.outputs[0]).dtype);
    };
    std::function<bool(ValueId, DType)> only_matmuls = [&](ValueId v, DType from) {
      if (is_output[v] || users[v].empty()) return false;
      for (int32_t u : users[v]) {
        const OpId op = g.nodes[u].op;
        const bool view = op == OpId::permute || op == OpId::expand || op == OpId::slice;
        if (view ? !only_matmuls(g.nodes[u].outputs[0], from) : !reads_converted(u, from))
          return false;
      }
      return true;
    };
    // Elementwise nodes, reductions and attention read through loads that convert too; their
    // casts of inputs, parameters and constants (already in memory: nothing is materialized
    // for them) need no kernel of their own.
    std::function<bool(ValueId, DType)> only_converting_loads = [&](ValueId v, DType from) {
      if (is_output[v] || users[v].empty()) return false;
      for (int32_t u : users[v]) {
        const OpId op = g.nodes[u].op;
        if (op == OpId::permute || op == OpId::expand || op == OpId::slice) {
          if (!only_converting_loads(g.nodes[u].outputs[0], from)) return false;
        } else if (op == OpId::matmul) {
          if (!reads_converted(u, from)) return false;
        } else if (!reads_through_converting_loads(op) ||
                   !policy_.supports(op, meta(g.nodes[u].outputs[0]).dtype)) {
          return false;
        }
      }
      return true;
    };
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      const std::optional<DType> from =
          n.op == OpId::cast ? cast_source(n.outputs[0]) : std::nullopt;
      if (!from) continue;
      const bool from_memory = g.values[n.inputs[0]].producer < 0;
      // Int8 operands only from memory, and only into products.
      out[i] = *from == DType::i8 ? from_memory && only_matmuls(n.outputs[0], *from)
                                  : only_matmuls(n.outputs[0], *from) ||
                                        (from_memory && policy_.elementwise_reads_half_inputs() &&
                                         only_converting_loads(n.outputs[0], *from));
    }
    return out;
  }

  // A converting cast: an alias of its (materialized) input.
  void place_converting_alias(int32_t idx) {
    const ir::Node& n = s_.graph.nodes[idx];
    materialize(n.inputs[0]);
    at(n.outputs[0]).state = ValueState::alias;
    at(n.outputs[0]).view = at(n.inputs[0]).view;
  }

  // Whether input u, computed in kernel k, can be read inside k by an elementwise node whose
  // output has shape `out` (and whether that node would be row level); `why` says why not.
  bool fusable_input(int32_t k, ValueId u, const Shape& out, bool* row_level,
                     std::string* why) const {
    const Kernel& K = s_.kernels[k];
    switch (K.kind) {
      case KernelKind::pointwise:
      case KernelKind::matmul:
        *row_level = false;
        if (out != K.space) {
          *why = "its iteration space " + shape_str(out) + " is not the kernel's";
          return false;
        }
        if (meta(u).shape != K.space) {
          *why = "input %" + std::to_string(u) + " " + shape_str(meta(u).shape) +
                 " would need a broadcast inside the kernel";
          return false;
        }
        return true;
      case KernelKind::row_reduce: {
        Shape keep = row_shape(K.space, K.reduce_dims, true);
        if (out == K.space) {
          *row_level = false;
          if (!s_.values[u].row_level || meta(u).shape == keep) return true;
          *why = "row value %" + std::to_string(u) + " " + shape_str(meta(u).shape) +
                 " does not broadcast over the row";
          return false;
        }
        Shape squeezed = row_shape(K.space, K.reduce_dims, false);
        *row_level = true;
        if ((out == keep || out == squeezed) && s_.values[u].row_level && meta(u).shape == out)
          return true;
        *why = "a row-level node of shape " + shape_str(out) +
               " reads only row values of its own shape, not %" + std::to_string(u);
        return false;
      }
      default:
        *why = std::string(kernel_kind_name(K.kind)) + " kernels take no fused consumers";
        return false;
    }
  }

  // Whether no input of n is computed by kernel k, directly or through a view: each is a
  // graph input or constant, a value of another kernel, or a view of one of those.
  bool reads_nothing_of(const ir::Node& n, int32_t k) const {
    for (ValueId u : n.inputs) {
      const ValueSchedule& b = s_.values[s_.base_of(u)];
      if (b.state == ValueState::input || b.state == ValueState::constant) continue;
      if (b.kernel == k) return false;
    }
    return true;
  }

  void place_elementwise(int32_t idx) {
    const ir::Node& n = s_.graph.nodes[idx];
    ValueId out = n.outputs[0];
    const Shape& shape = meta(out).shape;
    // The latest open kernel computing one of the inputs is the candidate.
    int32_t cand = -1;
    for (ValueId u : n.inputs) {
      int32_t k = at(u).kernel;
      if (k < 0 || at(u).state == ValueState::alias) continue;
      if (s_.kernels[k].closed) {
        refused(idx, k, "the kernel is closed: a later kernel already reads its values");
        continue;
      }
      cand = std::max(cand, k);
    }
    bool row = false;
    if (cand >= 0) {
      for (ValueId u : n.inputs) {
        if (at(u).kernel != cand) continue;
        bool r = false;
        std::string why;
        if (!fusable_input(cand, u, shape, &r, &why)) {
          refused(idx, cand, why);
          cand = -1;
          break;
        }
        row = row || r;
      }
      // Row-level nodes read only row values and loads; element nodes anything fusable.
      if (cand >= 0 && s_.kernels[cand].kind == KernelKind::row_reduce &&
          shape != s_.kernels[cand].space) {
        row = true;
      }
    }
    if (cand < 0 && !s_.kernels.empty()) {
      // A node that reads no open kernel's values (graph inputs, constants, values of earlier
      // kernels, views of them) joins the last kernel when that is an open pointwise kernel
      // over the same shape and computes none of them: independent chains of one size (an
      // optimizer's update of the values and of each moment) share one loop and one launch, and
      // so do the terms of a sum of views (a depthwise convolution's taps of its padded input,
      // ops/conv.cpp), which would otherwise each start a kernel. Nothing reads an open
      // kernel's values yet and the node's inputs come from kernels before it, so the kernel
      // order stays acyclic.
      const int32_t last = static_cast<int32_t>(s_.kernels.size()) - 1;
      const Kernel& K = s_.kernels[last];
      if (!K.closed && K.kind == KernelKind::pointwise && K.space == shape &&
          reads_nothing_of(n, last)) {
        cand = last;
      }
    }
    if (cand < 0) {
      for (ValueId u : n.inputs) materialize(u);
      Kernel k;
      k.kind = KernelKind::pointwise;
      k.space = shape;
      k.nodes = {idx};
      define(out, add_kernel(std::move(k)), ValueState::fused);
      return;
    }
    for (ValueId u : n.inputs) {
      if (at(u).kernel != cand || at(u).state == ValueState::alias) materialize(u);
    }
    s_.kernels[cand].nodes.push_back(idx);
    at(out).row_level = row;
    define(out, cand, ValueState::fused);
  }

  void place_reduction(int32_t idx) {
    const ir::Node& n = s_.graph.nodes[idx];
    ValueId in = n.inputs[0], out = n.outputs[0];
    const auto& a = std::get<ops::ReduceAttrs>(n.attrs);
    const Shape& space = meta(in).shape;
    int32_t k = at(in).kernel;
    bool joined = false;
    if (k >= 0 && at(in).state != ValueState::alias) {
      Kernel& K = s_.kernels[k];
      if (K.closed) {
        refused(idx, k, "the kernel is closed: a later kernel already reads its values");
      } else if (at(in).row_level) {
        refused(idx, k, "its input is a row value: a reduction of a reduction starts a kernel");
      } else if (K.kind == KernelKind::row_reduce && K.space == space && K.reduce_dims == a.dims) {
        joined = true;
      } else if (K.kind == KernelKind::pointwise && K.space == space) {
        K.kind = KernelKind::row_reduce;
        K.reduce_dims = a.dims;
        joined = true;
      } else {
        refused(idx, k,
                K.space != space ? "it reduces over another iteration space"
                                 : "it reduces other dims than the kernel's reduction");
      }
    }
    if (!joined) {
      materialize(in);
      Kernel nk;
      nk.kind = KernelKind::row_reduce;
      nk.space = space;
      nk.reduce_dims = a.dims;
      k = add_kernel(std::move(nk));
    }
    s_.kernels[k].nodes.push_back(idx);
    at(out).row_level = true;
    define(out, k, ValueState::fused);
  }

  // Where matmul node n runs: by its sizes, or on one path for all when they vary.
  MatmulPath matmul_path(const ir::Node& n, const ops::MatmulShapes& dims) const {
    DType dtype = meta(n.outputs[0]).dtype;
    if (s_.varies(n.inputs[0]) || s_.varies(n.inputs[1]) || s_.varies(n.outputs[0]))
      return policy_.matmul_path_any_size(dims, dtype);
    return policy_.matmul_path(dims, dtype);
  }

  void place_matmul(int32_t idx) {
    const ir::Node& n = s_.graph.nodes[idx];
    ops::MatmulShapes dims = ops::matmul_shapes(meta(n.inputs[0]).shape, meta(n.inputs[1]).shape);
    MatmulPath path = matmul_path(n, dims);
    if (path == MatmulPath::extern_call) {
      place_single(idx, KernelKind::extern_op);
      return;
    }
    for (ValueId u : n.inputs) materialize(u);
    // A library multiplies floats: an int8 operand read through a converting alias is
    // generated (converting_casts chose that).
    for (ValueId u : n.inputs) {
      if (meta(s_.base_of(u)).dtype == DType::i8 && meta(u).dtype != DType::i8)
        path = MatmulPath::inline_loop;
    }
    Kernel k;
    k.kind = KernelKind::matmul;
    k.anchor = idx;
    k.nodes = {idx};
    k.space = dims.out;
    if (streams_rows(n, dims)) {
      k.rows = true;
      path = MatmulPath::inline_loop;
    }
    k.library = path == MatmulPath::library;
    // A library product lands in a buffer (the library writes memory); its epilogue reads it
    // back.
    define(n.outputs[0], add_kernel(std::move(k)),
           path == MatmulPath::library ? ValueState::stored : ValueState::fused);
  }

  // Whether matmul node n (its operands materialized) is generated as streamed rows: sizes
  // that do not vary, 2-D or more operands, A [.., M, K] and B [.., K, N] both dense along k,
  // B not broadcast over the batch (each batch element would read it again: a linear layer's
  // x [8, 1, K] is 8 products of M = 1 against one weight), and the policy's yes.
  bool streams_rows(const ir::Node& n, const ops::MatmulShapes& dims) const {
    if (dims.a_vec || dims.b_vec || s_.varies(n.inputs[0]) || s_.varies(n.inputs[1]) ||
        s_.varies(n.outputs[0]) || dims.K == 0 || dims.N == 0) {
      return false;
    }
    const Shape& bs = meta(n.inputs[1]).shape;
    if (shape_numel(bs) / (dims.K * dims.N) != shape_numel(dims.batch)) return false;
    const Shape& a = s_.values[n.inputs[0]].view.strides;
    const Shape& b = s_.values[n.inputs[1]].view.strides;
    const bool a_along_k = a.size() >= 2 && a.back() == 1;
    const bool b_along_k = b.size() >= 2 && b[b.size() - 2] == 1 && dims.N > 1;
    return a_along_k && b_along_k && policy_.matmul_streams_rows(dims, meta(n.outputs[0]).dtype);
  }

  void place_single(int32_t idx, KernelKind kind) {
    const ir::Node& n = s_.graph.nodes[idx];
    for (ValueId u : n.inputs) materialize(u);
    Kernel k;
    k.kind = kind;
    k.anchor = idx;
    k.nodes = {idx};
    k.space = meta(n.outputs[0]).shape;
    k.closed = true;
    int32_t id = add_kernel(std::move(k));
    for (ValueId o : n.outputs) define(o, id, ValueState::stored);
  }

  void place_outputs() {
    std::vector<bool> used(s_.graph.values.size(), false);
    for (ValueId o : s_.graph.outputs) {
      ValueState st = at(o).state;
      bool own = (st == ValueState::fused || st == ValueState::stored) && !used[o];
      if (own) {
        materialize(o);
        used[o] = true;
        s_.outputs.push_back(o);
        continue;
      }
      // An alias, input or constant (or a repeated output) is returned as a fresh copy.
      materialize(o);
      ValueId copy = s_.graph.add_value(meta(o));
      s_.values.emplace_back();
      if (s_.symbolic()) s_.varying.push_back(s_.varying[o]);
      used.push_back(true);
      Kernel k;
      k.kind = KernelKind::copy;
      k.space = meta(o).shape;
      k.copy_from = o;
      k.copy_to = copy;
      k.closed = true;
      define(copy, add_kernel(std::move(k)), ValueState::stored);
      s_.outputs.push_back(copy);
    }
  }

  // Values a kernel reads from other kernels (through aliases, by their base).
  std::vector<ValueId> reads(const Kernel& k) const {
    std::vector<ValueId> out;
    for (int32_t idx : k.nodes) {
      for (ValueId u : s_.graph.nodes[idx].inputs) out.push_back(s_.base_of(u));
    }
    if (k.copy_from >= 0) out.push_back(s_.base_of(k.copy_from));
    return out;
  }

  // Kernels may have gained members after later kernels were created; order them so that
  // each runs after the kernels whose values it reads (stable otherwise).
  void order_kernels() {
    size_t n = s_.kernels.size();
    std::vector<std::vector<int32_t>> deps(n);
    for (size_t i = 0; i < n; ++i) {
      for (ValueId u : reads(s_.kernels[i])) {
        int32_t k = at(u).kernel;
        if (k >= 0 && k != static_cast<int32_t>(i)) deps[i].push_back(k);
      }
    }
    std::vector<int> mark(n, 0);
    std::vector<int32_t> order;
    std::function<void(int32_t)> visit = [&](int32_t k) {
      ZC_CHECK(mark[k] != 1, "kernel dependency cycle at kernel " << k);
      if (mark[k] == 2) return;
      mark[k] = 1;
      for (int32_t d : deps[k]) visit(d);
      mark[k] = 2;
      order.push_back(k);
    };
    for (size_t i = 0; i < n; ++i) visit(static_cast<int32_t>(i));
    std::vector<int32_t> new_index(n);
    std::vector<Kernel> sorted;
    for (size_t i = 0; i < n; ++i) {
      new_index[order[i]] = static_cast<int32_t>(i);
      sorted.push_back(std::move(s_.kernels[order[i]]));
    }
    s_.kernels = std::move(sorted);
    for (ValueSchedule& v : s_.values) {
      if (v.kernel >= 0) v.kernel = new_index[v.kernel];
    }
  }

  Schedule s_;
  const SchedulePolicy& policy_;
};

}  // namespace

Schedule schedule(const ir::Graph& g, const SchedulePolicy& policy, std::vector<uint64_t> varying) {
  ZC_CHECK(
      varying.empty() || varying.size() == g.values.size(),
      "size variation given for " << varying.size() << " values of a graph of " << g.values.size());
  return Scheduler(g, policy, std::move(varying)).run();
}

}  // namespace zc::codegen
