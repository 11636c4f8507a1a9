// The executables made from one captured graph, each compiled when a call first needs it:
//   inference: the graph as captured, for calls that want no gradients;
//   training:  per set of inputs that want gradients, the partition of the joint graph
//              (lower/partition.h): a forward that also returns the values the backward
//              keeps, and the backward that reads them, recomputes cheap ops and returns the
//              gradients. The backward compiles while the first forward runs.
// A process that only trains never compiles the inference graph, and one that only infers
// never derives a backward. Everything goes through the driver's compile, so every cache level
// holds every variant and a warm process compiles nothing.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "codegen/executable.h"
#include "ir/graph.h"
#include "runtime/driver/compile.h"

namespace zc::runtime {

struct TrainingPlan {
  std::shared_ptr<const codegen::Executable> forward;  // the graph's outputs, then saved values
  // The backward, null when no input gets a gradient. It compiles on a thread of its own while
  // the first forward runs: loading it took a warm gpt12 step 4 ms of the GPU's time before
  // the forward could start. Waits for it, and raises what compiling it raised.
  std::shared_ptr<const codegen::Executable> backward() const { return backward_.get().exec; }
  // What compiling the backward did; waits for it too. A caller that waited for the backward
  // (a warm-up, a recompile) merges it into its own report.
  const CompileReport& backward_report() const { return backward_.get().report; }
  std::shared_future<Compiled> backward_;
  size_t outputs = 0;          // the graph's own outputs
  std::vector<size_t> saved;   // the backward's saved inputs: indices into forward's outputs
  std::vector<bool> has_grad;  // per graph input
  // Per graph output: whether it gets the backward node, i.e. requires gradients (where eager
  // would give it a grad_fn: lower::tracked_values).
  std::vector<bool> output_grad;
};

class GraphVariants {
 public:
  struct Options {
    // Compile as with Regions::Auto: each distinct block (and its backward) once.
    bool hierarchical = false;
    // Replay the forward executables as device graphs (Backend::replayable), with these
    // graph inputs changing per call.
    bool replay = false;
    std::vector<bool> per_call;
    // A whole traced graph: it can be differentiated. False for a graph break's last segment.
    bool whole = true;
    // Code made once for many sizes may serve it (compile_graph); not under Dynamic::Static.
    bool size_templates = false;
    // How library products run: Mode::MaxAutotune, MatmulPrecision::Bf16 (compile_graph).
    ProductOptions products;
    // CompileOptions::activation_memory_budget: how training graphs are partitioned.
    double activation_memory_budget = 1.0;
  };
  GraphVariants(ir::Graph graph, const codegen::Backend& backend, Options options);
  // `graph`'s inference executable made elsewhere (by a compiled function or an eager op
  // through the driver, or loaded from a package): inference only, nothing left to compile.
  static std::shared_ptr<GraphVariants> made(ir::Graph graph, const codegen::Backend& backend,
                                             std::shared_ptr<const codegen::Executable> inference);

  bool whole() const { return options_.whole; }
  const ir::Graph& graph() const { return *graph_; }
  const codegen::Backend& backend() const { return backend_; }

  // Thread-safe. The variant when compiled already, else null: what a call asks first.
  std::shared_ptr<const codegen::Executable> inference_if_compiled();
  // `wanted`: one flag per graph input. Requires whole().
  std::shared_ptr<const TrainingPlan> training_if_compiled(const std::vector<bool>& wanted);
  // The variant, compiled into `ctx` when first asked for.
  std::shared_ptr<const codegen::Executable> inference(CompileContext& ctx);
  std::shared_ptr<const TrainingPlan> training(const std::vector<bool>& wanted,
                                               CompileContext& ctx);

 private:
  static Compiled compile(const ir::Graph& g, bool replay, const codegen::Backend& backend,
                          const Options& options, CompileContext& ctx);

  // Shared, not copied, with the thread that compiles a training backward (which may outlive
  // this and needs the graph only should the stored backward not decode).
  std::shared_ptr<const ir::Graph> graph_;
  const codegen::Backend& backend_;
  Options options_;
  std::mutex mu_;
  std::shared_ptr<const codegen::Executable> inference_;
  std::map<std::vector<bool>, std::shared_ptr<const TrainingPlan>> training_;
};

// Runs `plan`'s forward on `inputs` (the call's graph inputs, in order) and returns the graph's
// outputs; the first gets the autograd node that runs the plan's backward, which keeps the
// inputs and the saved values (aliases with their versions checked, ADR 0009).
std::vector<Tensor> run_for_training(std::shared_ptr<const TrainingPlan> plan,
                                     std::vector<Tensor> inputs, const std::string& module_type);

}  // namespace zc::runtime
