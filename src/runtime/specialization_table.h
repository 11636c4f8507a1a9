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
#include "runtime/graph_variants.h"

namespace zc::runtime {

using codegen::Executable;

// One compiled specialization: valid while its guard holds.
struct Specialization {
  capture::InputGuard guard;
  // Its executables, inference and training, each compiled when a call first needs it; for a
  // trace that broke, its last segment (inference only).
  std::shared_ptr<GraphVariants> code;
  std::vector<Tensor> bound;       // graph input values; user inputs left undefined
  std::vector<size_t> user_slots;  // where the call's input goes
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
