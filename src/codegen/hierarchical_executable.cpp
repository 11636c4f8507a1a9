#include "codegen/hierarchical_executable.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "codegen/call_buffers.h"
#include "cpu/threads.h"
#include "util/check.h"
#include "util/free_ranges.h"

namespace zc::codegen {

namespace {

// Where a part's input or output lives during a call.
struct Slot {
  enum Kind : uint8_t { graph_input, value } kind;
  int32_t index;  // graph input number, or outer value id
};

// A slot resolved for the fast path: an input pointer, a graph output, or an arena offset.
struct Place {
  enum Kind : uint8_t { input, output, arena } kind;
  int64_t index;  // input or output number, or byte offset
};

struct Part {
  std::shared_ptr<const Executable> exec;
  const RawExecutable* raw = nullptr;  // exec, when it runs on raw buffers
  std::vector<Slot> inputs, outputs;
  std::vector<Place> places;  // fast path: inputs then outputs
};

class HierarchicalExecutable final : public RawExecutable {
 public:
  HierarchicalExecutable(const ir::Graph& g, std::vector<Part> parts)
      : parts_(std::move(parts)), num_inputs_(g.inputs.size()) {
    std::map<ir::ValueId, int32_t> input_of;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      input_of[g.inputs[i].value] = static_cast<int32_t>(i);
    outputs_ = g.outputs;
    for (ir::ValueId v : g.outputs) output_metas_.push_back(g.meta(v));
    for (const Part& p : parts_) {
      if (p.raw && std::find(finishers_.begin(), finishers_.end(), p.raw) == finishers_.end())
        finishers_.push_back(p.raw);
      reads_identities_ = reads_identities_ || (p.raw && p.raw->reads_identities());
    }
    // Values passed between parts get places in one arena, reused once a value's last reader
    // has run (a ResNet's block outputs, 20 MB without reuse, stay in cache); graph outputs go
    // to fresh tensors instead.
    fast_ = true;
    device_ = parts_.empty() ? Device::cpu() : parts_[0].exec->device();
    for (const Part& p : parts_) {
      fast_ = fast_ && p.raw != nullptr && p.exec->device() == device_;
      scratch_ = std::max<int64_t>(scratch_, p.raw ? p.raw->scratch_bytes() : 0);
    }
    values_bytes_ = place_values(g);
    arenas_ = std::make_unique<ArenaPool>(values_bytes_ + scratch_, device_);
    // A graph output must come from a part for the fast path to write it in place.
    for (ir::ValueId v : outputs_) fast_ = fast_ && offset_.count(v) && !input_of.count(v);
    // Resolve every slot once, so a call only indexes arrays.
    std::map<ir::ValueId, int64_t> output_of;
    for (size_t i = 0; i < outputs_.size(); ++i)
      output_of.emplace(outputs_[i], static_cast<int64_t>(i));
    for (Part& p : parts_) {
      auto place = [&](const Slot& s) {
        if (s.kind == Slot::graph_input) return Place{Place::input, s.index};
        auto o = output_of.find(s.index);
        if (o != output_of.end()) return Place{Place::output, o->second};
        auto off = offset_.find(s.index);
        return Place{Place::arena, off == offset_.end() ? 0 : off->second};
      };
      for (const Slot& s : p.inputs) p.places.push_back(place(s));
      for (const Slot& s : p.outputs) p.places.push_back(place(s));
    }
  }

  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const override {
    return run_together_from(inputs, SIZE_MAX);
  }

  std::vector<Tensor> run_together_from(std::span<const Tensor* const> inputs,
                                        size_t together_from) const override {
    ZC_CHECK(inputs.size() == num_inputs_, "hierarchical executable got the wrong inputs");
    return fast_ ? run_fast(inputs, together_from) : run_generic(inputs);
  }

  std::string_view backend() const override {
    return parts_.empty() ? "eager" : parts_[0].exec->backend();
  }

  Device device() const override { return device_; }

  int64_t scratch_bytes() const override { return values_bytes_ + scratch_; }

  // The parts chained through one scratch block: the values passed between parts first, then
  // the scratch every part uses in turn. Graph outputs are written in place by their parts.
  void run_raw(void* const* in, void* const* out, char* scratch_block,
               const InputIdentity* identities = nullptr) const override {
    ZC_CHECK(fast_, "a hierarchical executable runs on raw buffers only when all its parts do");
    char* values = scratch_block;
    char* scratch = values + values_bytes_;
    // One claim on the CPU's threads for the whole call: the parts' own claims nest in it. Each
    // part counting itself in flight and out again (seed64: 65 times a call) cost two atomic
    // updates of a shared counter and an OpenMP query per part.
    std::optional<cpu::CpuCallShare> share;
    if (device_.is_cpu()) share.emplace();
    std::vector<void*> ptrs;
    std::vector<InputIdentity> ids;
    for (const Part& p : parts_) {
      ptrs.resize(p.places.size());
      if (identities) ids.assign(p.inputs.size(), InputIdentity{});
      for (size_t k = 0; k < p.places.size(); ++k) {
        const Place& pl = p.places[k];
        ptrs[k] = pl.kind == Place::input    ? in[pl.index]
                  : pl.kind == Place::output ? out[pl.index]
                                             : values + pl.index;
        // A part's input that is a graph input is held by what holds that; values passed
        // between parts are rewritten on every call.
        if (identities && k < ids.size() && pl.kind == Place::input) ids[k] = identities[pl.index];
      }
      p.raw->run_raw(ptrs.data(), ptrs.data() + p.inputs.size(), scratch,
                     identities ? ids.data() : nullptr);
    }
  }

  void finish_run() const override {
    for (const RawExecutable* r : finishers_) r->finish_run();
  }

  bool can_run_raw() const override { return fast_; }

  bool reads_identities() const override { return reads_identities_; }

 private:
  // Offsets in the values arena for every value a part writes, and its size: a value's bytes
  // are free again after the last part that reads it. A part whose input dies at it and that
  // may write an output over that input (RawExecutable::outputs_over_inputs: a convolution
  // adding its residual) gets the output placed there, and the residual is not copied.
  int64_t place_values(const ir::Graph& g) {
    std::map<ir::ValueId, size_t> last;  // value -> the last part that reads it
    for (size_t p = 0; p < parts_.size(); ++p) {
      for (const Slot& s : parts_[p].inputs)
        if (s.kind == Slot::value) last[s.index] = p;
    }
    std::set<ir::ValueId> graph_outputs(outputs_.begin(), outputs_.end());
    std::map<ir::ValueId, int64_t> bytes;
    FreeRanges places;
    for (size_t p = 0; p < parts_.size(); ++p) {
      const Part& part = parts_[p];
      std::set<ir::ValueId> taken;  // inputs whose bytes an output of this part took
      std::vector<std::pair<size_t, size_t>> over;
      if (part.raw) over = part.raw->outputs_over_inputs();
      for (size_t j = 0; j < part.outputs.size(); ++j) {
        const ir::ValueId v = part.outputs[j].index;
        const ops::TensorMeta& m = g.meta(v);
        bytes[v] =
            FreeRanges::aligned(shape_numel(m.shape) * static_cast<int64_t>(dtype_size(m.dtype)));
        std::optional<int64_t> at;
        for (const auto& [i, o] : over) {
          if (o != j || graph_outputs.count(v)) continue;
          const Slot& in = part.inputs[i];
          if (in.kind != Slot::value || graph_outputs.count(in.index) || last[in.index] != p ||
              taken.count(in.index) || bytes[in.index] != bytes[v])
            continue;
          size_t uses = 0;
          for (const Slot& s : part.inputs) uses += s.kind == Slot::value && s.index == in.index;
          if (uses != 1) continue;
          at = offset_.at(in.index);
          taken.insert(in.index);
          break;
        }
        offset_[v] = at ? *at : places.allocate(bytes[v]);
      }
      // What dies here is free for the next part's outputs (not this one's: it reads them).
      auto release = [&](ir::ValueId v) {
        if (!taken.count(v)) places.release(offset_.at(v), bytes.at(v));
      };
      std::set<ir::ValueId> released;
      for (const Slot& s : part.inputs) {
        if (s.kind == Slot::value && last[s.index] == p && released.insert(s.index).second)
          release(s.index);
      }
      for (const Slot& s : part.outputs) {  // written and never read by a later part
        if (!last.count(s.index) && released.insert(s.index).second) release(s.index);
      }
    }
    return places.top();
  }

  // Every part runs on raw buffers: one arena, pointer tables, no allocation per part.
  std::vector<Tensor> run_fast(std::span<const Tensor* const> inputs, size_t together_from) const {
    std::vector<Tensor> keep;
    std::vector<InputIdentity> ids;
    std::vector<void*> in = dense_inputs(inputs, keep, reads_identities_ ? &ids : nullptr), out;
    std::vector<Tensor> outputs = new_outputs(output_metas_, out, together_from);
    ArenaPool::Lease arena = arenas_->take();
    run_raw(in.data(), out.data(), arena.get(), ids.empty() ? nullptr : ids.data());
    finish_run();
    return outputs;
  }

  // Any executables: values passed as tensors.
  std::vector<Tensor> run_generic(std::span<const Tensor* const> inputs) const {
    std::map<ir::ValueId, Tensor> env;
    std::vector<const Tensor*> args;
    for (const Part& p : parts_) {
      args.clear();
      for (const Slot& s : p.inputs) {
        args.push_back(s.kind == Slot::graph_input ? inputs[s.index] : &env.at(s.index));
      }
      std::vector<Tensor> outs = p.exec->run(args);
      for (size_t i = 0; i < p.outputs.size(); ++i) env[p.outputs[i].index] = std::move(outs[i]);
    }
    std::vector<Tensor> result;
    // Fresh tensors: two outputs may be one value, and a value may live on in `env`.
    for (ir::ValueId v : outputs_) result.push_back(env.at(v).clone());
    return result;
  }

  std::vector<Part> parts_;
  size_t num_inputs_;
  std::vector<ir::ValueId> outputs_;
  std::vector<ops::TensorMeta> output_metas_;
  std::map<ir::ValueId, int64_t> offset_;
  int64_t values_bytes_ = 0, scratch_ = 0;
  bool fast_ = false;
  bool reads_identities_ = false;  // some part keeps what it derives from an input
  Device device_;
  std::vector<const RawExecutable*> finishers_;  // distinct parts, for finish_run
  std::unique_ptr<ArenaPool> arenas_;            // sized once the layout is known
};

}  // namespace

std::shared_ptr<const Executable> hierarchical_executable(const ir::Graph& g,
                                                          std::vector<PartCall> calls) {
  std::map<ir::ValueId, int32_t> input_of;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    input_of[g.inputs[i].value] = static_cast<int32_t>(i);
  std::vector<Part> parts;
  for (PartCall& call : calls) {
    Part p;
    p.exec = std::move(call.exec);
    ZC_CHECK(p.exec != nullptr, "no executable for a part of a hierarchical graph");
    p.raw = dynamic_cast<const RawExecutable*>(p.exec.get());
    if (p.raw && !p.raw->can_run_raw()) p.raw = nullptr;
    for (ir::ValueId v : call.inputs) {
      auto in = input_of.find(v);
      p.inputs.push_back(in != input_of.end() ? Slot{Slot::graph_input, in->second}
                                              : Slot{Slot::value, v});
    }
    for (ir::ValueId v : call.outputs) p.outputs.push_back(Slot{Slot::value, v});
    parts.push_back(std::move(p));
  }
  return std::make_shared<HierarchicalExecutable>(g, std::move(parts));
}

}  // namespace zc::codegen
