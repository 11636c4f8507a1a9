// What every tracer shares (the capture stage's, recording forward(), and the lowering stage's,
// recording decompositions): the traced tensors that stand for graph values, and the constants
// that the concrete tensors met during a trace become.
//
// A traced tensor has exactly the metadata of the value it stands for, wrapped_number included
// (ops::meta_of gives back the value's metadata), so the traced code sees the promotion it would
// see eagerly: a value that came from a C++ number keeps promoting like one, whether it is read
// by a decomposition's dtype logic or taken into a later segment after a graph break. Op outputs
// are never wrapped numbers (ops::infer_outputs), so only graph inputs and constants can be.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace zc::ir {

// A tensor with `meta`'s shape, dtype, device and wrapped_number, contiguous strides (or
// `strides`, which must have one entry per dim), no storage, and `slot` (non-null) as its trace.
Tensor traced_tensor(const ops::TensorMeta& meta, std::shared_ptr<TraceSlot> slot);
Tensor traced_tensor(const ops::TensorMeta& meta, Shape strides, std::shared_ptr<TraceSlot> slot);

// For tracers that record without ever computing (the lowering stage's: decompositions,
// derivative rules): a tensor standing for value `id` of the graph that `owner` builds, whose
// values must never be read; `reader` names the code that would be wrong to read them ("a
// decomposition"), for the internal error.
Tensor value_tensor(const ops::TensorMeta& meta, const void* owner, ValueId id, const char* reader);
// The value traced `t` stands for; an internal error unless value_tensor made it for `owner`.
ValueId value_id(const Tensor& t, const void* owner);

// `t`'s values as a graph constant holds them: a contiguous copy, wrapped_number kept.
Tensor constant_data(const Tensor& t);

// The graph values a trace gives the concrete (untraced) tensors it meets, by identity: a tensor
// met twice (the same TensorImpl) is one value. The table holds every tensor it met, so that no
// later temporary can reuse an address and be taken for it.
class ConstantTable {
 public:
  // The value standing for untraced `t`. One met before keeps its value; a new one with at most
  // kMaxEmbeddedConstant elements becomes embed(constant_data(t)), a larger one large(t): the
  // caller decides (capture lifts it to an input). Each callback adds a value to the graph
  // being traced and returns it.
  template <class Embed, class Large>
  ValueId value_of(const Tensor& t, Embed&& embed, Large&& large) {
    ValueId v = find(t);
    if (v >= 0) return v;
    v = t.numel() <= kMaxEmbeddedConstant ? embed(constant_data(t)) : large(t);
    met_.emplace_back(t.impl_ptr(), v);
    return v;
  }

  // The value `t` was given, or -1 when the table has not met it.
  ValueId find(const Tensor& t) const;
  // Forgets every tensor (a new graph begins).
  void clear() { met_.clear(); }

 private:
  std::vector<std::pair<std::shared_ptr<TensorImpl>, ValueId>> met_;
};

}  // namespace zc::ir
