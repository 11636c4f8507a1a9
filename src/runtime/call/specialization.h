// The compiled specializations of one module, each valid while its input guard holds, and the
// one lookup every call makes.
//
// Rule: the first specialization added (the oldest) whose guard matches the input wins. A new
// one is added only after a miss, so two rarely match; when they do, every lookup (the call's
// fast path and the one after it waits for the capture lock) must pick the same, or one input
// would run two different executables depending on the path it took.
//
// Not synchronized: the owner locks around every use.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "capture/guards.h"
#include "codegen/executable.h"
#include "runtime/driver/graph_variants.h"

namespace zc::runtime {

using codegen::Executable;

// Where one of the call's inputs goes among the graph's inputs.
struct UserSlot {
  size_t slot = 0;   // graph input
  size_t input = 0;  // the call's input
  bool operator==(const UserSlot&) const = default;
};

// One compiled specialization: valid while its guards hold, one per input of the call.
struct Specialization {
  std::vector<capture::InputGuard> guards;
  // Its executables, inference and training, each compiled when a call first needs it; for a
  // trace that broke, its last segment (inference only).
  std::shared_ptr<GraphVariants> code;
  std::vector<Tensor> bound;         // graph input values; user inputs left undefined
  std::vector<UserSlot> user_slots;  // where the call's inputs go
  // Graph inputs of kind seed (rand_like's, randn_like's), which every call draws anew
  // (draw_seeds); their `bound` values are the trace's zeros, kept for their device.
  std::vector<size_t> seed_slots;
  // Tensors the trace read as constants without gradients: should one start to want them, the
  // specialization is dropped and the module traced again, with it as an input.
  std::vector<std::weak_ptr<TensorImpl>> constants_read;
  // Its calls compared against eager so far (CompileOptions::accuracy_check).
  mutable std::atomic<int64_t> accuracy_calls{0};
};

// A fresh seed for each of s.seed_slots, drawn from the process generator in one step, on the
// device of the seed it replaces (one copy to a GPU for all of them).
std::vector<Tensor> draw_seeds(const Specialization& s);
// The graph's inputs for a call: the bound values, the call's inputs and `seeds` (draw_seeds)
// in their slots.
std::vector<Tensor> call_inputs(const Specialization& s, std::span<const Tensor> xs,
                                std::span<const Tensor> seeds);

class SpecializationTable {
 public:
  // The first specialization whose guards match `inputs` (as many guards as inputs), or null.
  // Allocates nothing for up to 8 inputs: it runs on every call.
  std::shared_ptr<const Specialization> find(std::span<const Tensor> inputs) const;
  // Adds `s` after every existing one, so that it loses to them on a tie.
  void add(std::shared_ptr<const Specialization> s);
  void clear() { list_.clear(); }
  // Drops every specialization for which `drop` holds.
  template <class Drop>
  void drop_if(Drop&& drop) {
    std::erase_if(list_, [&](const auto& s) { return drop(*s); });
  }
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }

 private:
  std::vector<std::shared_ptr<const Specialization>> list_;
};

}  // namespace zc::runtime
