#include "codegen/backends/cuda/graph_executable.h"

#include <mutex>

#include "codegen/backends/cuda/kernel_profile.h"
#include "codegen/call_buffers.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "ops/registry.h"
#include "util/check.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"

namespace zc::codegen::cuda {

namespace {

using zc::cuda::check;
using zc::cuda::driver;

CUdeviceptr address(void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

size_t bytes_of(const ops::TensorMeta& m) {
  return static_cast<size_t>(shape_numel(m.shape)) * dtype_size(m.dtype);
}

class GraphExecutable final : public Executable {
 public:
  GraphExecutable(std::shared_ptr<const Executable> inner, std::vector<bool> per_call)
      : inner_(std::move(inner)),
        raw_(dynamic_cast<const RawExecutable*>(inner_.get())),
        per_call_(std::move(per_call)),
        device_(inner_->device().index) {
    ZC_CHECK(raw_ && raw_->can_run_raw() && inner_->device().is_cuda(),
             "a CUDA graph records only an executable that runs raw on a GPU");
  }

  // Recordings are not destroyed: an executable may be released while the process exits, when
  // the driver may be gone; a recording is a few kilobytes, and one is dropped only when its
  // compiled module is.

  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    ZC_CHECK(inputs.size() == per_call_.size(), "graph executable got the wrong inputs");
    std::lock_guard lock(mu_);
    if (output_metas_.empty()) {
      // The first call runs as it is; its outputs tell the recording what to allocate.
      FirstRunTimer first(device_, true);  // ZC_LOGS=timing
      std::vector<Tensor> out = inner_->run(inputs);
      first.done("(before its CUDA graph is recorded)");
      for (const Tensor& t : out) output_metas_.push_back(ops::meta_of(t));
      for (const Tensor* t : inputs) {
        input_sizes_.push_back(static_cast<size_t>(t->numel()) * dtype_size(t->dtype()));
      }
      return out;
    }
    std::vector<Tensor> keep;
    std::vector<void*> in = dense_inputs(inputs, keep);
    const CUstream stream = zc::cuda::current_stream(device_);
    Recording* r = recording_for(stream, in);
    for (size_t i = 0; i < in.size(); ++i) {
      if (per_call_[i]) {
        zc::cuda::copy_device_to_device(address(r->inputs[i]->data()), address(in[i]),
                                        r->input_bytes[i], device_);
      }
    }
    check(driver().cuGraphLaunch(r->exec, stream), "replaying a CUDA graph");
    zc::stats::add(zc::stats::Counter::graph_replays);
    std::vector<void*> out_ptrs;
    std::vector<Tensor> outputs = new_outputs(output_metas_, out_ptrs);
    copy_outputs(*r, out_ptrs);
    raw_->finish_run();
    return outputs;
  }

  std::string_view backend() const override { return inner_->backend(); }
  Device device() const override { return inner_->device(); }

 private:
  struct Recording {
    CUstream stream = nullptr;
    CUgraphExec exec = nullptr;
    std::vector<std::shared_ptr<Storage>> inputs, outputs;  // per-call inputs only
    std::vector<size_t> input_bytes;
    std::shared_ptr<Storage> scratch;
    std::vector<void*> fixed;  // the addresses of the other inputs when recorded
  };

  // The recording's outputs into this call's: one copy when both lie at the same offsets from
  // their first (outputs allocated together, as new_outputs and record() do), else one each.
  void copy_outputs(const Recording& r, const std::vector<void*>& out) const {
    const size_t n = output_metas_.size();
    if (n == 0) return;
    auto at = [](void* p) { return reinterpret_cast<uintptr_t>(p); };
    bool same_layout = true;
    for (size_t j = 1; j < n && same_layout; ++j) {
      same_layout = at(out[j]) - at(out[0]) == at(r.outputs[j]->data()) - at(r.outputs[0]->data());
    }
    if (same_layout && n > 1) {
      const size_t span = at(out[n - 1]) - at(out[0]) + bytes_of(output_metas_[n - 1]);
      zc::cuda::copy_device_to_device(address(out[0]), address(r.outputs[0]->data()), span,
                                      device_);
      return;
    }
    for (size_t j = 0; j < n; ++j) {
      zc::cuda::copy_device_to_device(address(out[j]), address(r.outputs[j]->data()),
                                      bytes_of(output_metas_[j]), device_);
    }
  }

  Recording* recording_for(CUstream stream, const std::vector<void*>& in) const {
    for (auto it = recordings_.begin(); it != recordings_.end(); ++it) {
      if (it->stream != stream) continue;
      bool same = true;
      for (size_t i = 0; i < in.size() && same; ++i) same = per_call_[i] || it->fixed[i] == in[i];
      if (same) return &*it;
      // A parameter moved (its module was moved or reloaded): record again.
      ZC_LOG(recompiles) << "CUDA graph recorded again: a parameter's storage moved";
      driver().cuGraphExecDestroy(it->exec);  // replays queued before finish first
      recordings_.erase(it);
      break;
    }
    return &record(stream, in);
  }

  Recording& record(CUstream stream, const std::vector<void*>& in) const {
    const Device device = Device::cuda(device_);
    Timer timer;
    Recording r;
    r.stream = stream;
    std::vector<void*> ins(in.size()), outs;
    for (size_t i = 0; i < in.size(); ++i) {
      r.fixed.push_back(per_call_[i] ? nullptr : in[i]);
      r.input_bytes.push_back(0);
      r.inputs.push_back(nullptr);
      ins[i] = in[i];
    }
    // The per-call inputs' sizes come from the first call's tensors; a guard keeps them fixed.
    for (size_t i = 0; i < in.size(); ++i) {
      if (!per_call_[i]) continue;
      r.input_bytes[i] = input_sizes_.at(i);
      r.inputs[i] = std::make_shared<Storage>(std::max<size_t>(r.input_bytes[i], 1), device);
      ins[i] = r.inputs[i]->data();
    }
    std::vector<size_t> out_bytes;
    for (const ops::TensorMeta& m : output_metas_)
      out_bytes.push_back(std::max<size_t>(bytes_of(m), 1));
    r.outputs = Storage::allocate_together(out_bytes, device);
    for (const auto& o : r.outputs) outs.push_back(o->data());
    r.scratch = std::make_shared<Storage>(
        static_cast<size_t>(std::max<int64_t>(raw_->scratch_bytes(), 64)), device);
    if (!capture_stream_) {
      check(driver().cuStreamCreate(&capture_stream_, CU_STREAM_NON_BLOCKING),
            "creating a stream to record a CUDA graph on");
    }
    CUgraph graph = nullptr;
    {
      zc::cuda::StreamGuard on(device_, capture_stream_);
      check(driver().cuStreamBeginCapture(capture_stream_, CU_STREAM_CAPTURE_MODE_RELAXED),
            "starting to record a CUDA graph");
      try {
        raw_->run_raw(ins.data(), outs.data(), static_cast<char*>(r.scratch->data()));
      } catch (...) {
        driver().cuStreamEndCapture(capture_stream_, &graph);
        if (graph) driver().cuGraphDestroy(graph);
        throw;
      }
      check(driver().cuStreamEndCapture(capture_stream_, &graph), "recording a CUDA graph");
    }
    CUresult rc = driver().cuGraphInstantiate(&r.exec, graph, 0);
    driver().cuGraphDestroy(graph);
    check(rc, "instantiating a CUDA graph");
    zc::stats::add(zc::stats::Counter::graph_recordings);
    ZC_LOG(timing) << "CUDA graph recorded for a compiled graph on cuda:" << device_ << ": "
                   << timer.ms() << " ms";
    recordings_.push_back(std::move(r));
    return recordings_.back();
  }

  std::shared_ptr<const Executable> inner_;
  const RawExecutable* raw_;
  std::vector<bool> per_call_;
  int device_;
  mutable std::mutex mu_;
  mutable std::vector<ops::TensorMeta> output_metas_;
  mutable std::vector<size_t> input_sizes_;
  mutable std::vector<Recording> recordings_;
  mutable CUstream capture_stream_ = nullptr;
};

}  // namespace

std::shared_ptr<const Executable> make_graph_executable(std::shared_ptr<const Executable> exec,
                                                        std::vector<bool> per_call) {
  return std::make_shared<GraphExecutable>(std::move(exec), std::move(per_call));
}

}  // namespace zc::codegen::cuda
