#include "runtime/records/load_hint.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "cache/cache.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/records/codec.h"
#include "util/log.h"
#include "util/stats.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

// A hint names the distinct graphs of one compile: a few, or a few hundred for a model whose
// blocks all differ.
constexpr uint64_t kMaxGraphs = 4096;

}  // namespace

std::vector<uint8_t> encode_load_hint(std::span<const Digest> graphs) {
  RecordWriter w(kLoadHintFormat);
  w.u64(graphs.size());
  for (const Digest& d : graphs) w.raw(d.data(), d.size());
  return w.take();
}

std::vector<Digest> decode_load_hint(std::span<const uint8_t> bytes) {
  RecordReader r(bytes, kLoadHintFormat);
  std::vector<Digest> graphs(r.count(kMaxGraphs, "graphs"));
  for (Digest& d : graphs) {
    std::span<const uint8_t> s = r.raw(d.size());
    std::copy(s.begin(), s.end(), d.begin());
  }
  r.finish("graph");
  return graphs;
}

GraphPreload::GraphPreload(cache::Key key, const codegen::Backend& backend, bool size_templates,
                           std::shared_future<void> after, CompileContext& ctx)
    : key_(std::move(key)), ctx_(ctx) {
  cache::Cache* store = ctx.store();
  try {
    if (auto e = store ? store->get(key_, ctx.lookups()) : std::nullopt) {
      hinted_ = decode_load_hint(e->payload);
    }
  } catch (const std::exception& e) {
    ZC_LOG(cache) << "load hint unusable (" << e.what() << "); loading as the compile asks";
    hinted_.clear();
  }
  for (const Digest& h : hinted_) {
    try {
      loads_.push_back(std::async(std::launch::async, [h, &backend, size_templates, after, &ctx] {
        try {
          if (after.valid()) after.wait();
          if (load_cached_graph(h, backend, size_templates, ctx)) {
            ctx.count(stats::Counter::graphs_preloaded);
          }
        } catch (const std::exception& e) {
          // The compile that needs this graph meets the same problem and reports it.
          ZC_LOG(cache) << "graph " << hex(h).substr(0, 16) << ": preload failed: " << e.what();
        }
      }));
    } catch (const std::system_error&) {
      break;  // no thread to spare: the compile loads the rest as it needs them
    }
  }
}

GraphPreload::~GraphPreload() {
  for (auto& f : loads_) f.wait();
}

void GraphPreload::finish(std::span<const Digest> used) {
  if (!std::equal(used.begin(), used.end(), hinted_.begin(), hinted_.end())) {
    try {
      if (cache::Cache* store = ctx_.store()) {
        store->put(key_, encode_load_hint(used), 0, ctx_.lookups());
      }
    } catch (const std::exception& e) {
      ZC_LOG(cache) << "load hint not written: " << e.what();
    }
  }
  for (auto& f : loads_) f.wait();
}

}  // namespace zc::runtime
