#include "codegen/backends/cpp/executable.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "codegen/backends/cpp/abi.h"
#include "codegen/backends/cpp/emit.h"
#include "codegen/backends/cpp/kernel_profile.h"
#include "codegen/backends/cpp/library_matmul.h"
#include "codegen/buffer_plan.h"
#include "codegen/call_buffers.h"
#include "cpu/blas.h"
#include "cpu/onednn_conv.h"
#include "cpu/onednn_matmul.h"
#include "cpu/threads.h"
#include "ops/eager.h"
#include "ops/epilogue_act.h"
#include "util/check.h"

namespace zc::codegen::cpp {

namespace {

// Generated code's products go where eager matmul's do (cpu/blas.h picks the library), run as
// the call site's choice says. Codes come from the executable's own choices, which
// with_product_choices checked, so decoding here does not fail.
cpu::GemmChoice choice_of(int code) {
  return cpu::GemmChoice::from_code(static_cast<uint8_t>(code));
}
void sgemm(int choice, int ta, int tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float* c, int64_t ldc) {
  cpu::sgemm_as(choice_of(choice), ta != 0, tb != 0, m, n, k, a, lda, b, ldb, c, ldc);
}
void dgemm(int choice, int ta, int tb, int64_t m, int64_t n, int64_t k, const double* a,
           int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  cpu::dgemm_as(choice_of(choice), ta != 0, tb != 0, m, n, k, a, lda, b, ldb, c, ldc);
}
void sgemm_batch(int choice, int ta, int tb, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                 const int64_t* batch) {
  cpu::sgemm_batch_as(choice_of(choice), ta != 0, tb != 0, m, n, k, a, lda, b, ldb, c, ldc, batch);
}
void dgemm_batch(int choice, int ta, int tb, int64_t m, int64_t n, int64_t k, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc,
                 const int64_t* batch) {
  cpu::dgemm_batch_as(choice_of(choice), ta != 0, tb != 0, m, n, k, a, lda, b, ldb, c, ldc, batch);
}
void sgemm_x(const ZcArgs* a, int kernel, int ta, int tb, int64_t m, int64_t n, int64_t k,
             const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
             const ZcEpilogue* e);
const ZcServices kServices{sgemm, dgemm, sgemm_batch, dgemm_batch, sgemm_x};

class CppExecutable final : public RawExecutable {
 public:
  CppExecutable(Schedule schedule, BufferPlan plan, std::shared_ptr<toolchain::SharedLibrary> lib,
                std::vector<int64_t> symbols)
      : schedule_(std::move(schedule)),
        plan_(std::move(plan)),
        lib_(std::move(lib)),
        symbols_(std::move(symbols)),
        gemm_(schedule_.kernels.size(), 0),
        arenas_(plan_.arena_bytes) {
    const Schedule& s = schedule_;
    if (s.symbolic()) {
      // This size's arena places, by value id (the template's kernels look them up).
      places_.assign(plan_.slot.size(), 0);
      for (size_t v = 0; v < plan_.slot.size(); ++v) {
        if (plan_.slot[v].kind == BufferKind::arena) places_[v] = plan_.slot[v].index;
      }
    }
    for (const LaunchStep& step : launch_steps(s)) {
      ZC_CHECK(step.symbol.empty() || lib_, "a generated kernel without its binary");
      steps_.push_back(Step{
          step.symbol.empty() ? nullptr : lib_->function<int(const ZcArgs*)>(step.symbol.c_str()),
          step.node});
    }
    for (ir::ValueId v : plan_.constants) {
      for (const ir::Constant& c : s.graph.constants) {
        if (c.value == v) constants_.push_back(ops::eager_contiguous(c.data));
      }
      const_ptrs_.push_back(constants_.back().raw_data());
    }
    for (ir::ValueId v : s.outputs) output_metas_.push_back(s.graph.meta(v));
    // Each unbatched f32 library product gets oneDNN's matmul for its call site (its epilogue
    // fused, its B kept where chosen); whether its B is a graph input or constant.
    sites_.resize(s.kernels.size());
    b_weight_.assign(s.kernels.size(), false);
    for (size_t k = 0; k < s.kernels.size(); ++k) {
      const auto call = library_call(s, s.kernels[k]);
      if (!call || call->problem.dtype != DType::f32 || !call->problem.batch.empty()) continue;
      b_weight_[k] = call->problem.b_weight;
      if (cpu::onednn_matmul_available()) sites_[k] = std::make_unique<cpu::OnednnMatmul>();
    }
    convs_.resize(s.graph.nodes.size());
    dense_convs_.resize(s.graph.nodes.size(), false);
    dense_pools_.resize(s.graph.nodes.size(), false);
    for (const Step& step : steps_) {
      const ir::Node& n = s.graph.nodes[step.node];
      if (!step.fn && n.op == ops::OpId::conv2d_nhwc && cpu::onednn_conv_available()) {
        convs_[step.node] = std::make_unique<cpu::OnednnConv>(std::get<ops::Conv2dAttrs>(n.attrs));
        has_convs_ = true;
        dense_convs_[step.node] = dense_f32(n);
      }
      if (!step.fn && n.op == ops::OpId::max_pool2d && n.outputs.size() == 1 && dense_f32(n) &&
          cpu::onednn_max_pool_applies(s.graph.meta(n.inputs[0]).shape, DType::f32,
                                       std::get<ops::Pool2dAttrs>(n.attrs))) {
        dense_pools_[step.node] = true;
      }
    }
  }

  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    return run_together_from(inputs, SIZE_MAX);
  }

  std::vector<Tensor> run_together_from(std::span<const Tensor* const> inputs,
                                        size_t together_from) const override {
    const Schedule& s = schedule_;
    ZC_CHECK(inputs.size() == s.graph.inputs.size(),
             "compiled graph takes " << s.graph.inputs.size() << " inputs, got " << inputs.size());
    std::vector<Tensor> keep;
    std::vector<InputIdentity> ids;
    std::vector<void*> in = dense_inputs(inputs, keep, reads_identities() ? &ids : nullptr), out;
    std::vector<Tensor> outputs = new_outputs(output_metas_, out, together_from);
    ArenaPool::Lease arena = arenas_.take();
    run_raw(in.data(), out.data(), arena.get(), ids.empty() ? nullptr : ids.data());
    return outputs;
  }

  int64_t scratch_bytes() const override { return plan_.arena_bytes; }

  bool reads_identities() const override { return has_convs_ || keeps_weights_; }

  std::vector<std::pair<size_t, size_t>> outputs_over_inputs() const override {
    return has_convs_ ? codegen::outputs_over_inputs(schedule_, plan_)
                      : std::vector<std::pair<size_t, size_t>>{};
  }

  void run_raw(void* const* inputs, void* const* outputs, char* scratch,
               const InputIdentity* identities = nullptr) const override {
    const CallState call{this, identities};
    ZcArgs args{inputs,          outputs,        const_ptrs_.data(), scratch, &kServices,
                symbols_.data(), places_.data(), gemm_.data(),       &call};
    cpu::CpuCallShare share;         // concurrent calls divide the CPU's threads among them
    StepTimer timer(steps_.size());  // ZC_LOGS=kernels
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& step = steps_[k];
      share.refresh();
      timer.before();
      if (step.fn) {
        int rc = step.fn(&args);
        if (rc != 0) report(rc, step);
      } else {
        run_extern(step.node, args, identities);
      }
      timer.after(k);
    }
    if (timer.active()) timer.finish(labels());
  }

  std::string_view backend() const override { return "cpp"; }

  std::vector<LibraryProduct> library_products() const override {
    std::vector<LibraryProduct> out;
    if (schedule_.symbolic()) return out;  // a size template's problems change per call
    for (size_t k = 0; k < schedule_.kernels.size(); ++k) {
      if (auto call = library_call(schedule_, schedule_.kernels[k])) {
        out.push_back(LibraryProduct{static_cast<int32_t>(k), std::move(call->problem)});
      }
    }
    return out;
  }

  std::vector<uint8_t> product_choices() const override { return gemm_; }

  std::shared_ptr<const Executable> with_product_choices(
      std::vector<uint8_t> choices) const override {
    ZC_CHECK(choices.size() == gemm_.size(),
             << choices.size() << " product choices for " << gemm_.size() << " kernels");
    for (uint8_t c : choices) cpu::GemmChoice::from_code(c);  // raises for a foreign code
    auto tuned = std::make_shared<CppExecutable>(schedule_, plan_, lib_, symbols_);
    tuned->gemm_ = std::move(choices);
    tuned->keeps_weights_ = false;
    for (uint8_t c : tuned->gemm_) {
      tuned->keeps_weights_ =
          tuned->keeps_weights_ || choice_of(c).library == cpu::GemmChoice::Library::onednn_packed;
    }
    return tuned;
  }

  // The sgemm_x service: kernel `kernel`'s product and epilogue, run as its choice says; a
  // packed choice keeps B converted while B's identity in this call stays.
  void product(const ZcArgs& a, int kernel, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
               const ZcEpilogue* ze) const {
    const size_t kk = static_cast<size_t>(kernel);
    const cpu::GemmChoice choice = choice_of(gemm_[kk]);
    cpu::GemmEpilogue e;
    if (ze) {
      e.bias = ze->bias;
      e.residual = ze->residual;
      e.ldr = ze->ldr;
      e.act = static_cast<ops::EpilogueAct>(ze->act);
    }
    cpu::WeightIdentity id;
    if (b_weight_[kk] && choice.library == cpu::GemmChoice::Library::onednn_packed) {
      const auto* call = static_cast<const CallState*>(a.call);
      const size_t anchor = static_cast<size_t>(schedule_.kernels[kk].anchor);
      const InputIdentity in = identity(schedule_.graph.nodes[anchor].inputs[1], call->identities);
      id = {in.storage, in.version};
    }
    cpu::sgemm_ex(choice, sites_[kk].get(), id, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, e);
  }

 private:
  struct Step {
    KernelFn fn;  // null: an extern op
    int32_t node;
  };
  // ZC_LOGS=kernels: each step's label, made at the first timed call (the choices are final by
  // then).
  const std::vector<std::string>& labels() const {
    std::call_once(labels_once_, [&] {
      for (size_t k = 0; k < steps_.size(); ++k) {
        labels_.push_back(step_label(schedule_, k, gemm_.empty() ? 0 : gemm_[k]));
      }
    });
    return labels_;
  }

  // What a call's services see of it (ZcArgs::call).
  struct CallState {
    const CppExecutable* exe;
    const InputIdentity* identities;  // null: none known
  };

  friend void sgemm_x(const ZcArgs*, int, int, int, int64_t, int64_t, int64_t, const float*,
                      int64_t, const float*, int64_t, float*, int64_t, const ZcEpilogue*);

  void* address(ir::ValueId base, const ZcArgs& a) const {
    const auto& slot = plan_.slot[base];
    switch (slot.kind) {
      case BufferKind::input:
        return a.in[slot.index];
      case BufferKind::output:
        return a.out[slot.index];
      case BufferKind::constant:
        return a.consts[slot.index];
      case BufferKind::arena:
        return a.arena + slot.index;
    }
    return nullptr;
  }

  // A tensor over the buffer of materialized value v (no copy).
  Tensor view(ir::ValueId v, const ZcArgs& a) const {
    const Schedule& s = schedule_;
    const ValueView& vv = s.at(v).view;
    const ops::TensorMeta& m = s.graph.meta(v);
    auto storage = Storage::borrow(address(vv.base, a), 0, Device::cpu());
    return Tensor::view_of(storage, m.shape, vv.strides, vv.offset, m.dtype);
  }

  // What holds the memory of value v's buffer in this call (InputIdentity): known for graph
  // inputs the caller described and for the executable's own constants.
  InputIdentity identity(ir::ValueId v, const InputIdentity* identities) const {
    const BufferPlan::Slot& slot = plan_.slot[schedule_.at(v).view.base];
    if (slot.kind == BufferKind::input && identities) return identities[slot.index];
    if (slot.kind == BufferKind::constant) {
      const Storage& st = *constants_[slot.index].impl_ptr()->storage;
      return {st.uid(), st.version()};
    }
    return {};
  }

  // Runs a node the backend does not generate with its eager kernel, then writes the results
  // into their planned buffers. A channels-last convolution runs its node's oneDNN state,
  // which keeps the weight converted while the weight's identity stays.
  void run_extern(int32_t node, const ZcArgs& a, const InputIdentity* identities) const {
    const Schedule& s = schedule_;
    const ir::Node& n = s.graph.nodes[node];
    if (dense_pools_[node]) {  // as a dense convolution below
      const ValueView& xv = s.at(n.inputs[0]).view;
      cpu::onednn_max_pool(static_cast<const float*>(address(xv.base, a)) + xv.offset,
                           s.graph.meta(n.inputs[0]).shape,
                           static_cast<float*>(address(n.outputs[0], a)),
                           s.graph.meta(n.outputs[0]).shape, std::get<ops::Pool2dAttrs>(n.attrs));
      return;
    }
    if (dense_convs_[node]) {
      // Dense operands: their buffers as they are, no tensor made per call.
      const cpu::OnednnConv& conv = *convs_[node];
      auto at = [&](ir::ValueId v) {
        const ValueView& vv = s.at(v).view;
        return static_cast<float*>(address(vv.base, a)) + vv.offset;
      };
      auto dims4 = [&](ir::ValueId v) {
        const Shape& sh = s.graph.meta(v).shape;
        return std::array<int64_t, 4>{sh[0], sh[1], sh[2], sh[3]};
      };
      const bool residual = std::get<ops::Conv2dAttrs>(n.attrs).residual;
      const size_t conv_args = n.inputs.size() - (residual ? 1 : 0);
      cpu::OnednnConv::Dense d;
      d.x = at(n.inputs[0]);
      d.x_shape = dims4(n.inputs[0]);
      d.w = at(n.inputs[1]);
      d.w_shape = dims4(n.inputs[1]);
      d.bias = conv_args > 2 ? at(n.inputs[2]) : nullptr;
      d.residual = residual ? at(n.inputs.back()) : nullptr;
      d.out = static_cast<float*>(address(n.outputs[0], a));
      d.out_numel = shape_numel(s.graph.meta(n.outputs[0]).shape);
      const InputIdentity w = identity(n.inputs[1], identities);
      conv.run(d, cpu::WeightIdentity{w.storage, w.version});
      return;
    }
    std::vector<Tensor> args;
    for (ir::ValueId u : n.inputs) args.push_back(view(u, a));
    if (const cpu::OnednnConv* conv = convs_[node].get();
        conv && std::all_of(args.begin(), args.end(),
                            [](const Tensor& t) { return t.dtype() == DType::f32; })) {
      const ops::TensorMeta& m = s.graph.meta(n.outputs[0]);
      Tensor out = Tensor::view_of(Storage::borrow(address(n.outputs[0], a), 0, Device::cpu()),
                                   m.shape, contiguous_strides(m.shape), 0, m.dtype);
      const InputIdentity w = identity(n.inputs[1], identities);
      const bool residual = std::get<ops::Conv2dAttrs>(n.attrs).residual;
      const size_t conv_args = args.size() - (residual ? 1 : 0);
      conv->run(args[0], args[1], conv_args > 2 ? &args[2] : nullptr,
                residual ? &args.back() : nullptr, out, cpu::WeightIdentity{w.storage, w.version});
      return;
    }
    const ops::OpDef& def = ops::op_def(n.op);
    // An output placed over an input (a convolution's residual, codegen/buffer_plan.h) is
    // computed into fresh memory and copied, as the eager kernels expect distinct buffers.
    const bool over_an_input = std::any_of(args.begin(), args.end(), [&](const Tensor& t) {
      return t.raw_data() == address(n.outputs[0], a);
    });
    if (def.eager_into && !over_an_input) {  // straight into the planned buffers
      std::vector<Tensor> outs;
      for (ir::ValueId o : n.outputs) {
        const ops::TensorMeta& m = s.graph.meta(o);
        auto storage = Storage::borrow(address(o, a), 0, Device::cpu());
        outs.push_back(Tensor::view_of(storage, m.shape, contiguous_strides(m.shape), 0, m.dtype));
      }
      def.eager_into(args, n.attrs, outs);
      return;
    }
    std::vector<ops::TensorMeta> metas;
    for (ir::ValueId o : n.outputs) metas.push_back(s.graph.meta(o));
    std::vector<Tensor> results = def.eager(args, n.attrs, metas);
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Tensor r = ops::eager_contiguous(results[i]);
      size_t bytes = static_cast<size_t>(r.numel()) * dtype_size(r.dtype());
      if (bytes) std::memcpy(address(n.outputs[i], a), r.raw_data(), bytes);
    }
  }

  [[noreturn]] void report(int rc, const Step& step) const {
    if (rc == kErrIndexOutOfRange) {
      throw Error(
          "embedding: an index is out of range for its table (compiled graph); check "
          "the token ids against the embedding's num_embeddings");
    }
    if (rc == kErrNoMemory) {
      const std::string op(ops::op_def(schedule_.graph.nodes[step.node].op).name);
      throw Error("a compiled " + op +
                  " kernel could not allocate its scratch memory: the machine is out of memory");
    }
    throw Error("compiled kernel failed with code " + std::to_string(rc));
  }

  Schedule schedule_;
  BufferPlan plan_;
  std::shared_ptr<toolchain::SharedLibrary> lib_;
  std::vector<int64_t> symbols_, places_;  // code for many sizes (ZcArgs)
  std::vector<uint8_t> gemm_;              // per kernel: its product's choice (ZcArgs)
  std::vector<Step> steps_;
  std::vector<Tensor> constants_;
  std::vector<void*> const_ptrs_;
  std::vector<ops::TensorMeta> output_metas_;
  ArenaPool arenas_;
  std::vector<std::unique_ptr<cpu::OnednnConv>> convs_;  // by node: channels-last convolutions
  // By node: a convolution whose operands are all f32 with dense strides (run on their buffers).
  std::vector<bool> dense_convs_;
  std::vector<bool> dense_pools_;  // by node: a max pool oneDNN runs on dense f32 operands

  // Whether every operand and the output of node n are f32 values laid out densely (the first
  // two operands and the output of 4 dims, as a convolution's are; a pool has one operand).
  bool dense_f32(const ir::Node& n) const {
    auto dense = [&](ir::ValueId v) {
      const ops::TensorMeta& m = schedule_.graph.meta(v);
      return m.dtype == DType::f32 && schedule_.at(v).view.strides == contiguous_strides(m.shape);
    };
    auto four = [&](ir::ValueId v) { return schedule_.graph.meta(v).shape.size() == 4; };
    return std::all_of(n.inputs.begin(), n.inputs.end(), dense) && dense(n.outputs[0]) &&
           !n.inputs.empty() && four(n.inputs[0]) && four(n.outputs[0]) &&
           (n.inputs.size() < 2 || four(n.inputs[1]));
  }
  bool has_convs_ = false;
  // By kernel: oneDNN's matmul for an unbatched f32 library product (null elsewhere), and
  // whether its B is a graph input or constant.
  std::vector<std::unique_ptr<cpu::OnednnMatmul>> sites_;
  std::vector<bool> b_weight_;
  bool keeps_weights_ = false;  // some product's choice keeps its B packed
  mutable std::once_flag labels_once_;
  mutable std::vector<std::string> labels_;
};

void sgemm_x(const ZcArgs* a, int kernel, int ta, int tb, int64_t m, int64_t n, int64_t k,
             const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
             const ZcEpilogue* e) {
  const auto* call = static_cast<const CppExecutable::CallState*>(a->call);
  call->exe->product(*a, kernel, ta != 0, tb != 0, m, n, k, A, lda, B, ldb, C, ldc, e);
}

}  // namespace

std::shared_ptr<const Executable> make_cpp_executable(
    Schedule schedule, BufferPlan plan, std::shared_ptr<toolchain::SharedLibrary> library,
    std::vector<int64_t> symbols) {
  return std::make_shared<CppExecutable>(std::move(schedule), std::move(plan), std::move(library),
                                         std::move(symbols));
}

}  // namespace zc::codegen::cpp
