// The tracer: records every op called on a traced tensor into a graph (installed as the op
// interceptor of the capturing thread), lifts parameters to inputs, records module calls as
// regions, and splits the trace into segments at graph breaks.
//
// A graph break happens when forward() needs a concrete value (item(), data()). The segment
// traced so far gets as outputs every value still referenced by a live tensor, runs through
// the segment runner, and the live tensors receive their values; tracing continues in a new
// segment, which takes any earlier value it uses as a `carried` input.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tracing.h"
#include "ops/dispatch.h"

namespace zc::capture {

// A buffer forward() updated in place (index_copy_): after each call, the tensor of
// bindings()[binding] (a parameter-kind input: a registered buffer or parameter) takes the
// value of the graph's output `output`. Such outputs come after forward()'s results.
struct BufferWrite {
  size_t binding = 0;
  size_t output = 0;
};

// Compiles (or looks up) and runs one finished segment on real inputs.
using SegmentRunner =
    std::function<std::vector<Tensor>(const ir::Graph& graph, std::span<const Tensor> inputs)>;

// Where the runtime finds a graph input's value at call time.
struct InputBinding {
  ir::InputKind kind;
  // parameter: the module's own handle; lifted/carried: the value; seed: a zero on the
  // device the seed lives on (each run draws its own); user: unset.
  Tensor tensor;
  size_t user = 0;  // user: which of forward()'s arguments (the order of add_user_input)
};

class Tracer final : public ops::OpInterceptor {
 public:
  Tracer(SegmentRunner runner, bool fullgraph);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // The traced stand-in for the next forward() argument.
  Tensor add_user_input(const Tensor& real);
  // Marks a parameter or buffer so that ops on it are recorded; it becomes an input on first
  // use. The mark is removed when the tracer is destroyed.
  void mark_parameter(const Tensor& param);

  // Ends the trace: the last segment, returning `result` (or every one of `results`).
  ir::Graph finish(const Tensor& result);
  ir::Graph finish(std::span<const Tensor> results);
  const std::vector<InputBinding>& bindings() const { return bindings_; }
  // The buffers forward() updated in place, as finish() appended them to the outputs.
  const std::vector<BufferWrite>& writes() const { return writes_; }
  // The untraced tensors forward() read that did not want gradients (embedded or lifted as
  // constants of the graph), for the compiled module to notice one that starts to.
  const std::vector<std::weak_ptr<TensorImpl>>& constants_read() const { return read_; }
  int breaks() const { return breaks_; }

  std::vector<Tensor> intercept(const ops::OpDef& op, std::span<const Tensor> inputs,
                                const ops::Attrs& attrs) override;
  void enter_region(std::string_view type_name, const void* module) override;
  void exit_region() override;
  // Raises zc::Error: a draw in forward() would be a constant of the graph, the same numbers on
  // every call (nn::Dropout in training mode draws its mask so).
  void draw_random(std::string_view factory) override;
  // An update of a registered buffer (or parameter) becomes a write of the updated value back
  // into it after the call; later reads in forward() see the updated value. Raises zc::Error
  // for a user input, for a trace with a graph break, and under gradients.
  void update_in_place(const Tensor& self, const Tensor& updated) override;
  // Records op(x, seed) (rand_like, randn_like) with `seed` a new graph input of kind seed.
  Tensor random_like(ops::OpId op, const Tensor& x) override;
  // Constants computed from constants fold on the host when they are small (at most
  // kHostFoldElements read from the device and as many made): they become constants of the
  // graph either way, and a GPU would compile each op at its first call.
  bool untraced_on_host(const ops::OpDef& op, std::span<const Tensor> inputs,
                        std::span<const ops::TensorMeta> outputs) const override;
  static constexpr int64_t kHostFoldElements = int64_t{1} << 20;

  // Forces the values of traced `self` (a graph break); called through its TraceSlot when
  // forward() reads them.
  void force(TensorImpl& self);

 private:
  struct Slot;
  ir::ValueId value_of(const Tensor& t);  // imports traced values and constants
  Tensor make_traced(ir::ValueId id);
  void start_segment();

  SegmentRunner runner_;
  bool fullgraph_;
  // The grad mode of the call that traces; the trace itself runs with gradients on, so that
  // ops under a NoGradGuard inside forward() are told apart (and get a detach, intercept()).
  bool call_grad_;
  int segment_ = 0;
  int breaks_ = 0;
  ir::Graph graph_;
  std::vector<InputBinding> bindings_;
  std::vector<Tensor> user_reals_;                   // by user index
  std::vector<std::weak_ptr<TensorImpl>> produced_;  // by value id; node outputs only
  std::vector<std::shared_ptr<TensorImpl>> marked_;  // parameters to unmark
  ir::ConstantTable constants_;
  std::vector<std::weak_ptr<TensorImpl>> read_;  // constants_read()
  std::vector<ir::RegionId> open_regions_;
  // Updated buffers: binding index and latest value, in order of first update; finish()
  // turns them into writes_.
  std::vector<std::pair<size_t, ir::ValueId>> updated_;
  std::vector<BufferWrite> writes_;
};

}  // namespace zc::capture
