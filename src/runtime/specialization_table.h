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

#include <memory>
#include <vector>

#include "capture/guards.h"
#include "codegen/executable.h"
#include "runtime/compiled_backward.h"

namespace zc::runtime {

using codegen::Executable;

// One compiled specialization: valid while its guard holds.
struct Specialization {
  capture::InputGuard guard;
  std::shared_ptr<const Executable> exec;
  std::vector<Tensor> bound;       // graph input values; user inputs left undefined
  std::vector<size_t> user_slots;  // where the call's input goes
  // Its backward graphs, made when a backward() first needs one; null for a trace that broke
  // (its graph is only the last segment).
  std::shared_ptr<BackwardPlans> backward;
};

class SpecializationTable {
 public:
  // The first specialization whose guard matches `x`, or null. Allocates nothing: it runs on
  // every call.
  std::shared_ptr<const Specialization> find(const Tensor& x) const;
  // Adds `s` after every existing one, so that it loses to them on a tie.
  void add(std::shared_ptr<const Specialization> s);
  void clear() { list_.clear(); }
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }

 private:
  std::vector<std::shared_ptr<const Specialization>> list_;
};

}  // namespace zc::runtime
