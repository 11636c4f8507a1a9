#include "runtime/records/load_hint.h"

#include <algorithm>
#include <string>
#include <system_error>

#include "cache/cache.h"
#include "runtime/driver/compile_graph.h"
#include "util/bytes.h"
#include "util/log.h"
#include "util/stats.h"
#include "zc/error.h"

namespace zc::runtime {

namespace {

constexpr uint32_t kHintVersion = 1;
// A hint names the distinct graphs of one compile: a few, or a few hundred for a model whose
// blocks all differ.
constexpr uint64_t kMaxGraphs = 4096;
constexpr const char* kWhat = "load hint";

}  // namespace

cache::Key load_hint_key(std::string_view what, const Digest& context,
                         const codegen::Backend& backend, bool size_templates) {
  cache::Key key(cache::Level::autotune);
  key.add("record", "load hint v" + std::to_string(kHintVersion))
      .add("compile", std::string(what))
      .add("context", hex(context))
      .add("backend", std::string(backend.name()))
      .add("sizes", size_templates ? "any" : "own");
  return key;
}

std::vector<uint8_t> encode_load_hint(std::span<const Digest> graphs) {
  ByteWriter w;
  w.u32(kHintVersion);
  w.u64(graphs.size());
  for (const Digest& d : graphs) w.raw(d.data(), d.size());
  return w.take();
}

std::vector<Digest> decode_load_hint(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, kWhat);
  if (const uint32_t v = r.u32(); v != kHintVersion) {
    throw Error(std::string(kWhat) + ": version " + std::to_string(v) + ", expected " +
                std::to_string(kHintVersion));
  }
  const uint64_t n = r.u64();
  if (n > kMaxGraphs) {
    throw Error(std::string(kWhat) + ": " + std::to_string(n) + " graphs, at most " +
                std::to_string(kMaxGraphs));
  }
  std::vector<Digest> graphs(n);
  for (Digest& d : graphs) {
    std::span<const uint8_t> s = r.raw(d.size());
    std::copy(s.begin(), s.end(), d.begin());
  }
  if (r.remaining() != 0) {
    throw Error(std::string(kWhat) + ": " + std::to_string(r.remaining()) +
                " bytes after the last graph");
  }
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
