// A function of tensors compiled as one graph: traced once (capture::capture_function), then
// compiled through compile_graph, so every cache level holds it and a warm process compiles
// nothing. What a compiled optimizer step is made of: a call runs the whole update of every
// parameter as one executable instead of a dozen eager ops per parameter.
//
// A named function also keeps the record of what it was called with (call_record.h), and
// prepare() compiles what that record lists on a background thread, so that the first call
// finds its executable loaded.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "codegen/executable.h"
#include "ops/registry.h"

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
  struct Variant {
    std::vector<ops::TensorMeta> metas;  // of the inputs it was compiled for
    std::shared_ptr<const codegen::Executable> exec;
    std::vector<size_t> order;      // graph input i is inputs[order[i]]
    mutable bool recorded = false;  // its first call has been through record() (under mu_)
  };
  std::shared_ptr<const Variant> compile(std::span<const Tensor> inputs) const;
  std::shared_ptr<const Variant> find(const std::vector<ops::TensorMeta>& metas) const;
  void prepare_recorded(const std::vector<std::vector<ops::TensorMeta>>& calls);
  void record(const Variant& v);

  Fn fn_;
  std::string name_;
  std::string context_;  // set by prepare(); empty: no record
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const Variant>> variants_;
  std::vector<std::vector<ops::TensorMeta>> recorded_;   // the record as last read or written
  std::vector<std::vector<ops::TensorMeta>> preparing_;  // what the background thread compiles
  std::shared_future<void> prepared_;  // last member: destroyed (waited for) first
};

}  // namespace zc::runtime
