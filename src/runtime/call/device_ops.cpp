// Eager ops on a GPU: every call of an op on CUDA tensors runs a compiled graph of that one op,
// made by the CUDA backend through the same caches as any compiled graph and kept in this
// process as specializations of (op, attributes, inputs' metadata). The compiler is the only source
// of GPU kernels, so an eager op and the same op inside a compiled model compute alike, and a new
// op needs no hand-written kernel. Views stay views: they change metadata only, as on the CPU.
//
// The first call of an op on a new shape costs a compile (an NVRTC run, or a cache lookup when
// the kernel is on disk already); later calls cost a hash lookup and the launches.
#include <mutex>

#include "capture/guards.h"
#include "codegen/backend.h"
#include "ops/dispatch.h"
#include "runtime/call/specialization.h"
#include "runtime/driver/compile.h"
#include "util/bytes.h"

namespace zc::runtime {

namespace {

// What besides its inputs' metadata decides an op's code: the op and its attributes.
std::string op_tag(const ops::OpDef& op, const ops::Attrs& attrs) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(op.id));
  ops::write_attrs(w, attrs);
  std::vector<uint8_t> bytes = w.take();
  return std::string(bytes.begin(), bytes.end());
}

// The one-node graph of `op` on inputs with these metadata.
ir::Graph one_op_graph(const ops::OpDef& op, std::span<const Tensor> inputs,
                       const ops::Attrs& attrs) {
  ir::Graph g;
  ir::Node n;
  n.op = op.id;
  n.attrs = attrs;
  std::vector<ops::TensorMeta> metas;
  for (const Tensor& t : inputs) {
    ir::ValueId v = g.add_value(ops::meta_of(t));
    g.inputs.push_back(ir::Input{v, ir::InputKind::user});
    n.inputs.push_back(v);
    metas.push_back(ops::meta_of(t));
  }
  for (ops::TensorMeta& m : ops::infer_outputs(op, metas, attrs)) {
    n.outputs.push_back(g.add_value(std::move(m), 0));
  }
  g.outputs = n.outputs;
  g.nodes.push_back(std::move(n));
  return g;
}

class CompiledOps final : public ops::DeviceKernels {
 public:
  std::vector<Tensor> run(const ops::OpDef& op, std::span<const Tensor> inputs,
                          const ops::Attrs& attrs,
                          std::span<const ops::TensorMeta> outputs) override {
    const Device device = outputs[0].device;
    const Backend& backend = device_backend(device);
    // Views are metadata (a reshape that cannot be one copies through the copy op).
    if (ops::is_view(op.id)) return op.eager(inputs, attrs, outputs);
    if (op.id == ops::OpId::copy) return {dense_copy(backend, inputs[0])};
    // Numbers move to the device; compiled graphs read dense inputs.
    std::vector<Tensor> args;
    args.reserve(inputs.size());
    for (const Tensor& t : inputs) {
      if (t.device() != device) {
        Tensor moved = t.to(device);
        moved.unsafe_impl()->wrapped_number = t.unsafe_impl()->wrapped_number;
        args.push_back(std::move(moved));
      } else {
        args.push_back(t.is_contiguous() ? t : dense_copy(backend, t));
      }
    }
    std::shared_ptr<const Specialization> spec = specialization(backend, op, args, attrs);
    return run_inference(*spec, *spec->code->inference_if_compiled(), args);
  }

 private:
  // The backend's support kernels are built (or found in the cache) at their first use only,
  // so a process that never copies a strided tensor never waits for them.
  static Tensor dense_copy(const Backend& backend, const Tensor& t) {
    ensure_support(backend);
    return backend.dense_copy(t);
  }

  static const Backend& device_backend(Device device) {
    const Backend* b = codegen::backend_for(device.type);
    if (!b) throw Error("no backend of this build computes on " + device.str() + " tensors");
    std::string why = b->unavailable_reason();
    if (!why.empty()) {
      throw Error("ops on " + device.str() + " tensors need the " + std::string(b->name()) +
                  " backend, which cannot run here: " + why);
    }
    return *b;
  }

  // The op's specialization for these (dense) inputs, compiled at its first call.
  std::shared_ptr<const Specialization> specialization(const Backend& backend, const ops::OpDef& op,
                                                       std::span<const Tensor> args,
                                                       const ops::Attrs& attrs) {
    std::string tag = op_tag(op, attrs);
    {
      std::lock_guard lock(mu_);
      if (auto s = table_.find(args, tag)) return s;
    }
    // Compiled outside the lock (concurrent first calls of one op compile it once: the code
    // cache waits for the first).
    CompileContext ctx;
    ctx.set_who(std::string("eager ") + std::string(op.name));
    ir::Graph g = one_op_graph(op, args, attrs);
    auto exec = compile({g, backend}, ctx).exec;
    auto s = std::make_shared<Specialization>();
    for (const Tensor& t : args) s->guards.push_back(capture::input_guard(t));
    s->tag = std::move(tag);
    for (size_t i = 0; i < args.size(); ++i) {
      s->bound.emplace_back();
      s->user_slots.push_back({i, i});
    }
    s->code = GraphVariants::made(std::move(g), backend, std::move(exec));
    std::lock_guard lock(mu_);
    // Another thread's first call of it may have added it meanwhile: the first one stays.
    if (auto found = table_.find(args, s->tag)) return found;
    table_.add(s);
    return s;
  }

  std::mutex mu_;
  SpecializationTable table_;
};

// Installed when libzc loads; it does nothing until an op meets a CUDA tensor.
[[maybe_unused]] const bool installed = [] {
  static CompiledOps ops;
  ops::set_device_kernels(Device::Type::cuda, &ops);
  return true;
}();

}  // namespace

}  // namespace zc::runtime
