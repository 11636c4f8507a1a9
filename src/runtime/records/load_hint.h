// Load hints: the graphs a compile loaded, remembered in the cache, so that the next process
// starts loading them before it has worked out which graphs it needs.
//
// Why. A warm training step's backward is ready only once its graph is decoded (1443 nodes for
// the 12-layer GPT: 1.8 ms on the GPU host), its regions are planned (1.6 ms) and its parts are
// looked up; only then did their binaries start loading (two cubins of 200 KB: 7 ms there, the
// driver serializing those loads with each other and with the forward's launches). The
// forward's GPU work ended first, and the step waited 3-4 ms for its backward. With a hint the
// loads start as soon as the training graphs are read, beside the decoding and the planning.
//
// A hint is an autotune-level entry, like the call and product records: a hint, never a result.
// It names graphs by their ir::graph_hash; each is loaded through load_cached_graph into the
// in-process code cache, where the compile that needs it finds it or waits for it. A stale
// hint loads a graph that goes unused (a waste, not an error) or names one that is not cached
// (skipped); an unreadable one is logged (ZC_LOGS=cache) and ignored. Under
// ZC_FORCE_DISABLE_CACHES hints live in memory like every other entry.
#pragma once

#include <cstdint>
#include <future>
#include <span>
#include <string_view>
#include <vector>

#include "cache/keys.h"
#include "codegen/backend.h"
#include "runtime/driver/compile_context.h"
#include "util/hash.h"

namespace zc::runtime {

// A hint's key is load_hint_key (runtime/driver/compile_keys.h): what is compiled (e.g.
// "training backward") of which context (a digest naming the graph being compiled, such as its
// training key's), on which backend.

// A hint's bytes, and back; decoding raises zc::Error naming what is malformed.
std::vector<uint8_t> encode_load_hint(std::span<const Digest> graphs);
std::vector<Digest> decode_load_hint(std::span<const uint8_t> bytes);

// One compile's use of a hint: reads it from the compile's cache and loads each graph it
// names, each on a thread of its own that starts once `after` is ready (another load the
// caller wants first: loads slow each other down); finish() records what the compile used.
// Destroying it waits for the loads, which count into the compile's context.
class GraphPreload {
 public:
  GraphPreload(cache::Key key, const codegen::Backend& backend, bool size_templates,
               std::shared_future<void> after, CompileContext& ctx);
  ~GraphPreload();
  GraphPreload(const GraphPreload&) = delete;
  GraphPreload& operator=(const GraphPreload&) = delete;

  // The graphs the hint named, in its order.
  const std::vector<Digest>& hinted() const { return hinted_; }
  // After the compile: stores `used` as the hint when it differs from the one read, then waits
  // for the loads. A failure to store is logged, never raised: the compile has succeeded.
  void finish(std::span<const Digest> used);

 private:
  cache::Key key_;
  CompileContext& ctx_;
  std::vector<Digest> hinted_;
  std::vector<std::future<void>> loads_;
};

}  // namespace zc::runtime
