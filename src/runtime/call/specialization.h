// Compiled code for one kind of call, and the one lookup every kind of caller makes: compiled
// modules, compiled functions, packages and eager ops on a GPU all keep their code as
// Specializations in a SpecializationTable.
//
// A specialization is valid while its guards hold, one per input of the call: the input's
// shape, dtype, device, contiguity and whether it is a wrapped number (capture/guards.h). It
// may also be told apart by a tag (what besides the inputs decided its code: an eager op's op
// and attributes), and it may serve ranges of sizes (a package's dynamic dims): those dims of
// its guards are not compared but checked against their ranges. Its code runs on the bound
// values, the call's inputs and, for each random draw, a fresh seed, each in its graph input.
//
// Lookup rule: the first specialization added (the oldest) whose guards match wins. A new one
// is added only after a miss, so two rarely match; when they do, every lookup (a call's fast
// path and the one after it waits for the capture lock) must pick the same, or one input would
// run two different executables depending on the path it took. Exact guards are found through
// a hash of the call's guard hashes and tag, so a table of thousands (every eager op's shapes)
// costs one probe; ranged ones are compared one by one.
//
// A table is not synchronized: its owner locks around every use.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "capture/guards.h"
#include "capture/tracer.h"
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

// A dim of a call's input that takes every size in [min, max].
struct SizeRange {
  size_t input = 0;
  int64_t dim = 0, min = 0, max = 0;
};

struct Specialization {
  std::vector<capture::InputGuard> guards;  // one per input of the call
  std::string tag;                          // besides the inputs; empty for most callers
  std::vector<SizeRange> ranges;            // dims of `guards` that are not compared
  // Its executables: for a compiled module inference and training, each compiled when a call
  // first needs it (for a trace that broke, its last segment, inference only); for the other
  // callers, the inference executable they made or loaded.
  std::shared_ptr<GraphVariants> code;
  std::vector<Tensor> bound;         // graph input values; user inputs left undefined
  std::vector<UserSlot> user_slots;  // where the call's inputs go
  // Graph inputs of kind seed (rand_like's, randn_like's), which every call draws anew
  // (draw_seeds); their `bound` values are the trace's zeros, kept for their device.
  std::vector<size_t> seed_slots;
  // Buffers forward() updated in place (capture/tracer.h): after its code ran, run_inference
  // writes each such output into the tensor bound at its slot, and returns the others.
  std::vector<capture::BufferWrite> writes;
  // Tensors the trace read as constants without gradients: should one start to want them, the
  // specialization is dropped and the module traced again, with it as an input.
  std::vector<std::weak_ptr<TensorImpl>> constants_read;
  // Its calls compared against eager so far (CompileOptions::accuracy_check).
  mutable std::atomic<int64_t> accuracy_calls{0};

  // Whether it serves a call of `inputs` (whose guard hashes are `hashes`) with `tag`.
  bool matches(std::span<const Tensor> inputs, std::span<const uint64_t> hashes,
               std::string_view tag) const;
};

// A fresh seed for each of s.seed_slots, drawn from the process generator in one step, on the
// device of the seed it replaces (one copy to a GPU for all of them).
std::vector<Tensor> draw_seeds(const Specialization& s);
// The graph's inputs for a call: the bound values, the call's inputs and `seeds` (draw_seeds)
// in their slots.
std::vector<Tensor> call_inputs(const Specialization& s, std::span<const Tensor> xs,
                                std::span<const Tensor> seeds);
// Runs `exec` (an inference executable of `s`) on the call's inputs `xs`: the bound values, the
// call's inputs and fresh seeds in their slots, passed without copying a tensor handle. The
// buffers it updates take their values (s.writes), once, before it returns forward()'s results.
std::vector<Tensor> run_inference(const Specialization& s, const Executable& exec,
                                  std::span<const Tensor> xs);

class SpecializationTable {
 public:
  // The first specialization whose guards (and tag) match `inputs`, or null. Allocates nothing
  // for up to 8 inputs and an exact match: it runs on every call.
  std::shared_ptr<const Specialization> find(std::span<const Tensor> inputs,
                                             std::string_view tag = {}) const;
  // Adds `s` after every existing one, so that it loses to them on a tie.
  void add(std::shared_ptr<const Specialization> s);
  void clear();
  // Drops every specialization for which `drop` holds.
  template <class Drop>
  void drop_if(Drop&& drop) {
    std::erase_if(list_, [&](const auto& s) { return drop(*s); });
    reindex();
  }
  bool empty() const { return list_.empty(); }
  size_t size() const { return list_.size(); }

 private:
  void reindex();
  // Oldest first.
  std::vector<std::shared_ptr<const Specialization>> list_;
  // Exact ones by the hash of their guards and tag: positions in list_, ascending.
  std::unordered_map<uint64_t, std::vector<size_t>> exact_;
  std::vector<size_t> ranged_;  // positions in list_, ascending
};

}  // namespace zc::runtime
