#include "lower/peephole.h"

#include <optional>

#include "lower/graph_builder.h"
#include "ops/attrs.h"

namespace zc::lower {

namespace {

using ops::OpId;

// Whether the permute only moves dims of size 1, so that it is a reshape.
bool moves_only_unit_dims(const Shape& in, const std::vector<int64_t>& dims) {
  int64_t last = -1;
  for (int64_t d : dims) {
    if (in[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

// Whether `op` leaves an input of metadata `in` unchanged, given its output `out`. Equal metadata
// is required, wrapped_number included: a wrapped scalar promotes differently from the op's (never
// wrapped) result.
bool is_identity(OpId op, const ops::TensorMeta& in, const ops::TensorMeta& out) {
  if (!(in == out)) return false;
  switch (op) {
    case OpId::reshape:
    case OpId::expand:
    case OpId::slice:  // a slice that keeps the size of its dim keeps all of it
    case OpId::cast:
    case OpId::copy:
      return true;
    default:
      return false;
  }
}

// Whether every value of dtype `from` is a value of `to`, so that a cast from `from` to `to`
// and on to any dtype is the one cast to that dtype.
bool exact_cast(DType from, DType to) {
  if (from == to || from == DType::boolean) return true;
  switch (from) {
    case DType::i8:
      return to != DType::boolean;
    case DType::i32:
      return to == DType::i64 || to == DType::f64;
    case DType::f16:
    case DType::bf16:
      return to == DType::f32 || to == DType::f64;
    case DType::f32:
      return to == DType::f64;
    default:
      return false;
  }
}

struct Rewrite {
  OpId op;
  ops::Attrs attrs;
  ir::ValueId input;
};

// The single layout op equal to `r` applied to the output of `inner` (a node of `region`
// giving `out`), when there is one.
std::optional<Rewrite> fold_chain(const Rewrite& r, ir::RegionId region, const ir::Node& inner,
                                  const GraphBuilder& b, const ops::TensorMeta& out) {
  if (inner.op != r.op || inner.region != region) return std::nullopt;
  ir::ValueId src = inner.inputs[0];
  switch (r.op) {
    case OpId::cast:
      if (!exact_cast(b.meta(src).dtype, std::get<ops::CastAttrs>(inner.attrs).dtype))
        return std::nullopt;
      return Rewrite{OpId::cast, r.attrs, src};
    case OpId::reshape:
    case OpId::expand:
      return Rewrite{r.op, ops::ShapeAttrs{out.shape}, src};
    case OpId::permute: {
      const auto& outer = std::get<ops::PermuteAttrs>(r.attrs).dims;
      const auto& first = std::get<ops::PermuteAttrs>(inner.attrs).dims;
      std::vector<int64_t> dims(outer.size());
      for (size_t i = 0; i < outer.size(); ++i) dims[i] = first[outer[i]];
      return Rewrite{OpId::permute, ops::PermuteAttrs{dims}, src};
    }
    default:
      return std::nullopt;
  }
}

// A permute that moves only dims of size 1 becomes the reshape it is.
Rewrite as_reshape(const Rewrite& r, const GraphBuilder& b, const ops::TensorMeta& out) {
  if (r.op != OpId::permute ||
      !moves_only_unit_dims(b.meta(r.input).shape, std::get<ops::PermuteAttrs>(r.attrs).dims)) {
    return r;
  }
  return Rewrite{OpId::reshape, ops::ShapeAttrs{out.shape}, r.input};
}

}  // namespace

ir::Graph peephole(const ir::Graph& g) {
  GraphBuilder b(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    b.begin_node(static_cast<int32_t>(i));
    if (node.inputs.size() != 1 || node.outputs.size() != 1) {
      b.copy_node(node);
      continue;
    }
    const ops::TensorMeta& out = g.meta(node.outputs[0]);
    Rewrite r = as_reshape(Rewrite{node.op, node.attrs, b.map(node.inputs[0])}, b, out);
    if (const ir::Node* inner = b.producer(r.input)) {
      if (auto folded = fold_chain(r, node.region, *inner, b, out)) r = as_reshape(*folded, b, out);
    }
    if (is_identity(r.op, b.meta(r.input), out)) {
      b.alias(node.outputs[0], r.input);
    } else if (r.op == node.op && r.attrs == node.attrs && r.input == b.map(node.inputs[0])) {
      b.copy_node(node);
    } else {
      b.alias(node.outputs[0], b.add_node(r.op, r.attrs, {r.input})[0]);
    }
  }
  return std::move(b).finish();
}

}  // namespace zc::lower
