#include "runtime/driver/graph_variants.h"

#include <future>

#include "autograd/node.h"
#include "autograd/record.h"
#include "ir/canonical.h"
#include "lower/autodiff.h"
#include "runtime/driver/training_graphs.h"
#include "runtime/records/load_hint.h"
#include "util/check.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"
#include "zc/factories.h"

namespace zc::runtime {

GraphVariants::GraphVariants(ir::Graph graph, const codegen::Backend& backend, Options options)
    : graph_(std::make_shared<const ir::Graph>(std::move(graph))),
      backend_(backend),
      options_(std::move(options)) {}

std::shared_ptr<GraphVariants> GraphVariants::made(
    ir::Graph graph, const codegen::Backend& backend,
    std::shared_ptr<const codegen::Executable> inference) {
  auto v = std::make_shared<GraphVariants>(std::move(graph), backend, Options{.whole = false});
  v->inference_ = std::move(inference);
  return v;
}

Compiled GraphVariants::compile(const ir::Graph& g, bool replay, const codegen::Backend& backend,
                                const Options& options, CompileContext& ctx) {
  CompileRequest request{g, backend};
  request.hierarchical = options.hierarchical;
  request.size_templates = options.size_templates;
  request.products = options.products;
  request.replay = replay && options.replay;
  request.per_call = options.per_call;
  return runtime::compile(request, ctx);
}

std::shared_ptr<const codegen::Executable> GraphVariants::inference_if_compiled() {
  std::lock_guard lock(mu_);
  return inference_;
}

std::shared_ptr<const codegen::Executable> GraphVariants::inference(CompileContext& ctx) {
  std::lock_guard lock(mu_);
  if (!inference_) inference_ = compile(*graph_, /*replay=*/true, backend_, options_, ctx).exec;
  return inference_;
}

std::shared_ptr<const TrainingPlan> GraphVariants::training_if_compiled(
    const std::vector<bool>& wanted) {
  std::lock_guard lock(mu_);
  auto it = training_.find(wanted);
  return it == training_.end() ? nullptr : it->second;
}

std::shared_ptr<const TrainingPlan> GraphVariants::training(const std::vector<bool>& wanted,
                                                            CompileContext& ctx) {
  ZC_CHECK(options_.whole, "a training plan for a graph break's segment");
  ZC_CHECK(wanted.size() == graph_->inputs.size(),
           "wanted flags for " << wanted.size() << " inputs");
  std::lock_guard lock(mu_);
  auto it = training_.find(wanted);
  if (it != training_.end()) return it->second;
  Timer timer;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i]) wrt.push_back(i);
  }
  TrainingGraphs graphs = training_graphs(*graph_, wrt, options_.activation_memory_budget, ctx);
  auto plan = std::make_shared<TrainingPlan>();
  plan->outputs = graph_->outputs.size();
  plan->has_grad.assign(wanted.size(), false);
  const std::vector<bool> tracked = lower::tracked_values(*graph_, wrt);
  for (ir::ValueId out : graph_->outputs) plan->output_grad.push_back(tracked[out]);
  size_t with_grad = 0;
  for (size_t k = 0; k < wrt.size(); ++k) {
    plan->has_grad[wrt[k]] = graphs.has_grad[k];
    with_grad += graphs.has_grad[k] ? 1 : 0;
  }
  if (!graphs.partition) {
    plan->forward = compile(*graph_, /*replay=*/true, backend_, options_, ctx).exec;
    std::promise<Compiled> none;
    none.set_value(Compiled{});
    plan->backward_ = none.get_future().share();
  } else {
    lower::Partition& part = *graphs.partition;
    // The two halves compile side by side (on a warm start each is mostly decoding, region
    // planning and cache loads, on a cold one compiler runs), and the first forward runs as
    // soon as its half is there. The backward's thread holds what it reads, its own part of
    // the caller's context among them: the plan may outlive this call.
    TrainingGraphs back;
    back.partition.emplace();
    back.partition->backward = std::move(part.backward);
    back.backward_bytes = std::move(graphs.backward_bytes);
    back.key = graphs.key;
    auto back_ctx = std::make_shared<CompileContext>(CompileContext::PartOf{}, ctx);
    // The graphs the previous process's backward loaded start loading once the forward is
    // loaded (loads slow each other: the first forward waits for its own alone), beside the
    // decoding and region planning that name them again (runtime/records/load_hint.h).
    std::promise<void> forward_loaded;
    plan->backward_ =
        std::async(std::launch::async, [back = std::move(back), captured = graph_, wrt,
                                        &backend = backend_, options = options_,
                                        after = forward_loaded.get_future().share(),
                                        back_ctx]() mutable {
          Timer t;
          CompileContext& bctx = *back_ctx;
          Compiled out;
          {
            GraphPreload preload(
                load_hint_key("training backward", back.key, backend, options.size_templates),
                backend, options.size_templates, after, bctx);
            ir::Graph backward =
                take_backward(back, *captured, wrt, options.activation_memory_budget, bctx);
            out = compile(backward, /*replay=*/false, backend, options, bctx);
            preload.finish(out.graphs);
            ZC_LOG(timing) << "training backward ready in " << t.ms() << " ms ("
                           << preload.hinted().size() << " graphs hinted)";
          }
          // Everything the backward's thread did: the hint, its preloads, the
          // derivation read back, the compile.
          out.report = bctx.report();
          return out;
        }).share();
    try {
      plan->forward = compile(part.forward, /*replay=*/true, backend_, options_, ctx).exec;
      forward_loaded.set_value();
    } catch (...) {
      forward_loaded.set_value();
      plan->backward_.wait();  // its thread reads the backend: it ends before the error leaves
      throw;
    }
    plan->saved = std::move(part.saved);
  }
  ZC_LOG(timing) << "training forward ready: " << timer.ms() << " ms, " << with_grad
                 << " gradients, " << plan->saved.size() << " saved values";
  training_.emplace(wanted, plan);
  return plan;
}

namespace {

class CompiledBackwardNode final : public autograd::Node {
 public:
  CompiledBackwardNode(std::shared_ptr<const TrainingPlan> plan, std::string module_type,
                       std::vector<ops::TensorMeta> output_metas)
      : plan_(std::move(plan)),
        module_type_(std::move(module_type)),
        output_metas_(std::move(output_metas)) {}

  // The call's graph inputs, then the saved values; those flagged in `as_is` are kept as they
  // are (SavedValues::save).
  void save(std::span<const Tensor> values, const std::vector<bool>& as_is) {
    values_.save(values, as_is);
  }

  std::string name() const override { return "compiled " + module_type_; }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    values_.check("compiled module " + module_type_);
    std::vector<Tensor> out(next.size());
    const std::shared_ptr<const codegen::Executable> backward = plan_->backward();
    if (!backward) return out;
    ZC_CHECK(grads.size() == output_metas_.size(),
             "" << grads.size() << " gradients for " << output_metas_.size() << " outputs");
    const std::vector<Tensor>& values = values_.values();
    const size_t n_inputs = values.size() - plan_->saved.size();
    std::vector<Tensor> dense;
    for (size_t k = 0; k < grads.size(); ++k) {
      const ops::TensorMeta& m = output_metas_[k];
      dense.push_back(grads[k].defined() ? grads[k].contiguous()
                                         : zeros(m.shape, m.dtype, m.device));
    }
    std::vector<const Tensor*> args;
    for (size_t i = 0; i < n_inputs; ++i) args.push_back(&values[i]);
    for (const Tensor& g : dense) args.push_back(&g);
    for (size_t i = n_inputs; i < values.size(); ++i) args.push_back(&values[i]);
    std::vector<Tensor> results = backward->run(args);
    size_t k = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      if (plan_->has_grad[i]) out[i] = std::move(results[k++]);
    }
    return out;
  }

  void release() override { values_.release(); }

 private:
  std::shared_ptr<const TrainingPlan> plan_;
  std::string module_type_;
  std::vector<ops::TensorMeta> output_metas_;
  autograd::SavedValues values_;
};

}  // namespace

std::vector<Tensor> run_for_training(std::shared_ptr<const TrainingPlan> plan,
                                     std::vector<Tensor> inputs, const std::string& module_type) {
  std::vector<const Tensor*> args;
  for (const Tensor& t : inputs) args.push_back(&t);
  // The saved values (the outputs after the graph's own) in one block.
  std::vector<Tensor> results = plan->forward->run_together_from(args, plan->outputs);
  ZC_CHECK(results.size() >= plan->outputs, "the training forward returned too few outputs");
  int64_t saved_bytes = 0;
  for (size_t i = plan->outputs; i < results.size(); ++i) {
    saved_bytes += results[i].numel() * static_cast<int64_t>(dtype_size(results[i].dtype()));
  }
  stats::add(stats::Counter::training_calls);
  stats::add(stats::Counter::saved_bytes, saved_bytes);
  std::vector<Tensor> outs(results.begin(),
                           results.begin() + static_cast<std::ptrdiff_t>(plan->outputs));
  std::vector<ops::TensorMeta> metas;
  for (const Tensor& t : outs) metas.push_back(ops::meta_of(t));
  std::vector<Tensor> kept = inputs;
  for (size_t index : plan->saved) kept.push_back(results[index]);
  // Kept as they are, without a TensorImpl copied for each (seed64's call with gradients spent
  // most of its time in malloc and free, most of that here): every value but the outputs, to
  // which attach() gives this node's autograd state (an output saved as it is would hold the
  // node that holds it).
  std::vector<bool> as_is(kept.size(), true);
  for (size_t i = 0; i < kept.size(); ++i) {
    for (const Tensor& o : outs) {
      if (kept[i].unsafe_impl() == o.unsafe_impl()) as_is[i] = false;
    }
  }
  // The node owns the plan from here; its flags are read in place, not copied per call.
  const std::vector<bool>& with_grad = plan->output_grad;
  auto node =
      std::make_shared<CompiledBackwardNode>(std::move(plan), module_type, std::move(metas));
  node->save(kept, as_is);
  autograd::attach(node, inputs, outs, &with_grad);
  return outs;
}

}  // namespace zc::runtime
