// What zc's oneDNN call sites share (built with oneDNN only): the process's one CPU engine, a
// stream per thread, the memory descriptor of a matrix as BLAS passes it, a bounded table of
// primitives by problem, and weights kept converted into a primitive's layout across calls.
#pragma once

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cpu/weight_identity.h"

namespace zc::cpu {

const dnnl::engine& dnnl_engine();
// The calling thread's stream on dnnl_engine() (a stream is not shared between threads).
dnnl::stream& dnnl_thread_stream();

// Attributes for a primitive that is kept and may run on any thread, several at once: its
// scratchpad is the caller's (dnnl_run_kept). With oneDNN's default, a primitive keeps the
// scratchpad of the thread that made it, and two threads running primitives made on one thread
// write over each other's partial sums (oneDNN allows it only on the thread that made the
// primitive); a compiled module is called from many threads.
dnnl::primitive_attr dnnl_kept_attr();
// Runs `p`, made with dnnl_kept_attr(), on this thread's stream with `args` and this thread's
// scratchpad (sized from p's own descriptor, grown as needed, reused by the thread's next
// primitive), and waits for it.
void dnnl_run_kept(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args);
// The calling thread's scratchpad, which dnnl_run_kept gives every primitive: grown to at least
// `bytes` (never shrunk) and returned. A pointer returned before may move when it grows.
char* dnnl_thread_scratchpad(size_t bytes);
// This thread's arguments of one kept primitive (made with dnnl_kept_attr()): a memory per
// argument descriptor, made without data at the first run on the thread, whose data handle each
// run sets; the scratchpad's; and the map oneDNN reads them from. Making the memories and the
// map's nodes on every run was most of a small convolution's cost (2.5 us a call on the 2-core
// machine, oneDNN's kernel about 0.5: memory creation and destruction, malloc and free). Per
// thread, because a memory's handle is state and a compiled module runs on many threads.
class KeptArgs {
 public:
  KeptArgs(const dnnl::primitive& p, std::initializer_list<std::pair<int, dnnl::memory::desc>>);
  // Sets the data of argument `arg`, one of those it was made with.
  void set(int arg, const void* data);
  // Runs p with these arguments (and `weights` as DNNL_ARG_WEIGHTS where given, which the
  // arguments do not keep after the run) on this thread's stream and scratchpad; waits for it.
  void run(const dnnl::primitive& p, const dnnl::memory* weights = nullptr);

 private:
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::memory scratch_;
  size_t scratch_bytes_ = 0;
};
// The calling thread's KeptArgs of the primitive `owner` holds (a plan), made with `descs` at
// the first call: the same object at every later call while `owner` lives. An owner since freed
// whose address another takes gets new arguments.
KeptArgs& dnnl_kept_args(const std::shared_ptr<const void>& owner, const dnnl::primitive& p,
                         std::initializer_list<std::pair<int, dnnl::memory::desc>> descs);
// A oneDNN memory of `desc` in `buf`, grown to fit and never shrunk: a thread's working copy
// that its next call reuses. `buf` is the caller's thread_local, one for each copy alive at once
// (a compiled module runs on many threads; a buffer per plan would be shared between them).
dnnl::memory dnnl_thread_memory(std::vector<char>& buf, const dnnl::memory::desc& desc);
// An f32 matrix [rows, cols] as BLAS passes it: row-major with leading dim ld, or its transpose
// stored so (column-major).
dnnl::memory::desc dnnl_f32_matrix(bool trans, int64_t rows, int64_t cols, int64_t ld);

// Plans (primitives and what they need) by problem, each made once; a problem oneDNN refuses
// (make throws dnnl::error) is remembered as null. At most `bound` are kept (code for many
// sizes meets a new problem at each size): past that the first by key goes, and a call still
// running on it keeps its own reference. Not locked: its owner's lock guards it.
template <class Key, class Plan>
class PlanTable {
 public:
  explicit PlanTable(size_t bound) : bound_(bound) {}
  template <class Make>
  std::shared_ptr<const Plan> get(const Key& key, Make make) {
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    std::shared_ptr<const Plan> p;
    try {
      p = make(key);
    } catch (const dnnl::error&) {
      p = nullptr;
    }
    if (plans_.size() >= bound_) plans_.erase(plans_.begin());
    return plans_.emplace(key, std::move(p)).first->second;
  }

 private:
  size_t bound_;
  std::map<Key, std::shared_ptr<const Plan>> plans_;
};

// One kernel's weights in its primitive's layout, by the weight's address (a repeated block's
// executable serves every instance of the block, each with weights of its own), kept while the
// address holds the same identity. At most 256: the one unused longest goes first (a weight
// freed long ago). Not locked: its owner's lock guards it.
class KeptWeights {
 public:
  // When a weight is first kept: at the first call that meets it, or at the second that meets
  // the same address and identity (a value that changes every call, an activation, is then
  // never copied and kept).
  enum class Keep { first_sight, second_sight };
  explicit KeptWeights(Keep keep) : keep_(keep) {}

  // The weight at `addr` (laid out as `user`) in `layout`: the kept copy while `addr` holds
  // `id`, else converted now (and kept if this sight keeps it). An unknown identity is
  // converted for this call alone. Empty at second_sight's first sight: use the weight as given.
  // Throws dnnl::error when oneDNN cannot convert it.
  dnnl::memory get(const void* addr, WeightIdentity id, const dnnl::memory::desc& user,
                   const dnnl::memory::desc& layout);

  int64_t conversions() const { return conversions_; }  // all of them, a test's count
  int64_t kept() const;                                 // copies kept now

 private:
  struct Entry {
    WeightIdentity id;
    dnnl::memory::desc layout;
    dnnl::memory data;  // empty until kept
    uint64_t last_use = 0;
  };
  dnnl::memory convert(const void* addr, const dnnl::memory::desc& user,
                       const dnnl::memory::desc& layout);
  void remember(const void* addr, Entry e);

  Keep keep_;
  std::unordered_map<const void*, Entry> entries_;
  uint64_t clock_ = 0;
  int64_t conversions_ = 0;
};

}  // namespace zc::cpu
#endif
