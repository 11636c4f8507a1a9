#include "ir/tracing.h"

#include "util/check.h"

namespace zc::ir {

Tensor traced_tensor(const ops::TensorMeta& meta, std::shared_ptr<TraceSlot> slot) {
  return traced_tensor(meta, contiguous_strides(meta.shape), std::move(slot));
}

Tensor traced_tensor(const ops::TensorMeta& meta, Shape strides, std::shared_ptr<TraceSlot> slot) {
  ZC_CHECK(slot != nullptr, "a traced tensor needs a trace slot");
  ZC_CHECK(strides.size() == meta.shape.size(),
           "strides " << shape_str(strides) << " for shape " << shape_str(meta.shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = meta.shape;
  impl->strides = std::move(strides);
  impl->dtype = meta.dtype;
  impl->device = meta.device;
  impl->wrapped_number = meta.wrapped_number;
  impl->trace = std::move(slot);
  return Tensor(std::move(impl));
}

Tensor constant_data(const Tensor& t) {
  ZC_CHECK(t.defined() && !t.is_traced(), "a graph constant needs a concrete tensor");
  // A graph's constants are held on the CPU (they are hashed and serialized); their metadata
  // keeps the device, where a compiled graph places them.
  Tensor data = t.device().is_cpu() ? t.clone() : t.to(Device::cpu());
  // clone() is an op, and an op's result is never a wrapped number; the constant stands for t.
  data.unsafe_impl()->wrapped_number = t.unsafe_impl()->wrapped_number;
  return data;
}

ValueId ConstantTable::find(const Tensor& t) const {
  for (const auto& [impl, v] : met_) {
    if (impl.get() == t.unsafe_impl()) return v;
  }
  return -1;
}

namespace {
struct ValueSlot final : TraceSlot {
  const void* owner = nullptr;
  ValueId id = -1;
  const char* reader = "";
  void force(TensorImpl&) override {
    ZC_CHECK(false, "traced code (" << reader
                                    << ") read the values of a traced tensor; it must not "
                                       "depend on tensor values");
  }
};
}  // namespace

Tensor value_tensor(const ops::TensorMeta& meta, const void* owner, ValueId id,
                    const char* reader) {
  auto slot = std::make_shared<ValueSlot>();
  slot->owner = owner;
  slot->id = id;
  slot->reader = reader;
  return traced_tensor(meta, std::move(slot));
}

ValueId value_id(const Tensor& t, const void* owner) {
  auto* slot = dynamic_cast<const ValueSlot*>(t.unsafe_impl()->trace.get());
  ZC_CHECK(slot && slot->owner == owner, "a tensor traced elsewhere met a lowering tracer");
  return slot->id;
}

}  // namespace zc::ir
