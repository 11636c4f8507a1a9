// A function of tensors compiled as one graph: traced once (capture::capture_function), then
// compiled through the driver, so every cache level holds it and a warm process compiles
// nothing; one specialization per list of input metadata, in a SpecializationTable. What a compiled
// optimizer step is made of: a call runs the whole update of every parameter as one executable
// instead of a dozen eager ops per parameter.
//
// A named function also keeps the record of what it was called with (call_record.h), and
// prepare() compiles what that record lists on a background thread, so that the first call
// finds its executable loaded.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "codegen/executable.h"
#include "ops/registry.h"
#include "runtime/call/specialization.h"

namespace zc::runtime {

class CompiledFunction {
 public:
  // `fn` computes its results from the tensors it is given, as ordinary tensor code that reads
  // no values (it is traced). `name` says what it computes, for the call record: two functions
  // of one name compute the same results from the same inputs. Unnamed, it keeps no record.
  using Fn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs)>;
  explicit CompiledFunction(Fn fn, std::string name = {})
      : fn_(std::move(fn)), name_(std::move(name)) {}
  // Waits for a preparation under way (it calls fn).
  ~CompiledFunction();
  CompiledFunction(const CompiledFunction&) = delete;
  CompiledFunction& operator=(const CompiledFunction&) = delete;

  // fn(inputs), computed by a compiled graph: one per list of input metadata (shapes, dtypes,
  // devices), traced and compiled when such a list is first seen. Inputs are on one device
  // (0-dim CPU tensors aside); the graph runs on that device's backend. A call whose metadata
  // is being prepared waits for that instead of compiling it again.
  std::vector<Tensor> operator()(std::span<const Tensor> inputs);

  // From now on the calls are recorded under `context` (what makes calls alike for the
  // caller, e.g. the parameters an optimizer updates), and the variants the record already
  // lists are compiled on a background thread; returns at once. Once per function; nothing
  // for an unnamed one. Failures there are only logged: the call compiles as without it.
  void prepare(std::string context);

 private:
  // The specialization of `inputs` (contiguous), traced and compiled.
  std::shared_ptr<const Specialization> compile(std::span<const Tensor> inputs) const;
  // Under mu_: the specialization for inputs of these metadata, if compiled.
  std::shared_ptr<const Specialization> find(const std::vector<ops::TensorMeta>& metas) const;
  void prepare_recorded(const std::vector<std::vector<ops::TensorMeta>>& calls);
  void record(const Specialization& s, const std::vector<ops::TensorMeta>& metas);

  Fn fn_;
  std::string name_;
  std::string context_;  // set by prepare(); empty: no record
  mutable std::mutex mu_;
  SpecializationTable table_;
  // Specializations whose first call has been through record() (under mu_).
  std::set<const Specialization*> recorded_calls_;
  std::vector<std::vector<ops::TensorMeta>> recorded_;   // the record as last read or written
  std::vector<std::vector<ops::TensorMeta>> preparing_;  // what the background thread compiles
  std::shared_future<void> prepared_;  // last member: destroyed (waited for) first
};

}  // namespace zc::runtime
