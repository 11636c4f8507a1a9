#include "runtime/driver/compile_graph.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "cache/cache.h"
#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/pipeline.h"
#include "runtime/driver/artifact.h"
#include "runtime/driver/code_cache.h"
#include "runtime/driver/compile_events.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/templates.h"
#include "runtime/products/autotune.h"
#include "runtime/products/bf16_products.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"

namespace zc::runtime {

namespace {

// One compile of one graph on one backend, and the cache levels it goes through.
struct Compile {
  const ir::Graph& graph;
  const Backend& backend;
  cache::Cache* store;  // null: no cache
  CompileKeys keys;
  std::string short_hash;
};

// Graph level: an executable from a stored artifact, or null when the artifact, though it
// verified, does not load (another format): then the graph is compiled afresh.
std::shared_ptr<const Executable> load_graph_entry(const Backend& backend,
                                                   const std::string& short_hash,
                                                   const std::vector<uint8_t>& payload) {
  try {
    Timer t;
    auto exec = load_artifact(decode_artifact(payload), backend);
    zc::stats::add_time(zc::stats::Stage::load, t.ms());
    ZC_LOG(timing) << "graph " << short_hash << ": loaded from the cache in " << t.ms() << " ms";
    return exec;
  } catch (const Error& err) {
    ZC_LOG(cache) << "graph " << short_hash << ": cached artifact unusable (" << err.what()
                  << "); compiling";
    return nullptr;
  }
}

}  // namespace

std::vector<uint8_t> lowered_bytes(const ir::Graph& captured, const Backend& backend,
                                   cache::Cache* store, const CompileKeys& keys) {
  Timer t;
  const cache::Key key = keys.lowering_key();
  if (store) {
    if (auto e = store->get(key)) return std::move(e->payload);
  }
  lower::LowerContext ctx;
  ctx.keep = backend.native_ops();
  ctx.split_long_reductions = backend.splits_long_reductions();
  std::vector<uint8_t> bytes = ir::canonical_bytes(lower::lower(captured, ctx));
  // Written to disk behind the compile: a disk write cost a size template's check on the GPU
  // host as much as the lowering itself.
  if (store) store->put_behind(key, bytes, t.ms());
  return bytes;
}

std::vector<uint8_t> binary_for(const CompileKeys& keys, const Backend& backend,
                                cache::Cache* store, const codegen::GeneratedSource& source,
                                double* build_ms) {
  if (!backend.needs_build(source)) return {};
  Timer t;
  const cache::Key key = keys.kernel_key(hex(sha256(source.text)));
  if (store) {
    if (auto e = store->get(key)) return std::move(e->payload);
  }
  note_cold_work();
  std::vector<uint8_t> binary = backend.build(source);
  *build_ms = t.ms();
  zc::stats::add(zc::stats::Counter::compiler_invocations);
  zc::stats::add_time(zc::stats::Stage::cxx, *build_ms);
  if (store) store->put(key, binary, *build_ms);
  return binary;
}

std::shared_ptr<const Executable> build_executable(const ir::Graph& g, const Backend& backend,
                                                   cache::Cache* store, std::optional<Digest> hash,
                                                   bool size_templates) {
  std::string why = backend.unavailable_reason();
  if (!why.empty()) throw Error(why);
  const std::string graph_hex = hex(hash ? *hash : ir::graph_hash(g));
  Compile c{g, backend, store, compile_keys(graph_hex, backend), graph_hex.substr(0, 16)};
  Timer total;
  const bool templates = size_templates && backend.serves_many_sizes();
  // A size template served this graph before: its record loads it as an artifact would, with
  // no graph-level lookup or single-flight lock first (each a round trip to a remote tier).
  if (templates && store) {
    if (auto e = store->get(sized_key(c.keys))) {
      if (auto exec = load_sized(e->payload, backend, *store, c.keys)) return exec;
    }
  }
  const cache::Key graph_key = c.keys.graph_key();
  if (store) {
    if (auto e = store->get(graph_key)) {
      if (auto exec = load_graph_entry(c.backend, c.short_hash, e->payload)) return exec;
    } else {
      ZC_LOG(cache) << "graph " << c.short_hash << ": not cached; its key's parts:\n"
                    << c.keys.details();
    }
  }
  const double lookup_ms = total.ms();

  // Without a size template to serve it, a graph the graph level lacks is compiled.
  if (!templates) note_cold_work();
  Timer t;
  std::vector<uint8_t> lowered = lowered_bytes(g, backend, store, c.keys);
  // Scheduled from canonical numbering, exactly as a later load of the artifact will be.
  ir::Graph lowered_graph = ir::read_canonical(lowered);
  double lower_ms = t.ms();
  zc::stats::add_time(zc::stats::Stage::lower, lower_ms);

  // Code made once for many sizes of this graph serves it when it verifies for these sizes:
  // no compiler runs, so this comes before the single-flight lock (there is no compile for
  // other processes to wait for). Such executables are recorded at the graph level without
  // their binary (each size would store a copy of the shared one): sized_key. The record is
  // written to disk behind the call: this process holds it in memory.
  if (templates) {
    SizedUse used;
    Timer check;
    if (auto exec = executable_from_template(lowered_graph, backend, store, c.keys, &used)) {
      const double check_ms = check.ms();
      if (store) store->put_behind(sized_key(c.keys), encode_sized(lowered, used), total.ms());
      ZC_LOG(timing) << "graph " << c.short_hash << ": from its size template in " << total.ms()
                     << " ms (lookups " << lookup_ms << " ms, lower " << lower_ms
                     << " ms, check and bind " << check_ms << " ms)";
      return exec;
    }
  }

  // Another process may be compiling this very graph: wait for its entry rather than repeat
  // the work. The lock, if taken, is released once the entry is stored (or on an exception).
  cache::Cache::Flight flight;
  if (store) {
    flight = store->begin_flight(graph_key);
    if (flight.entry) {
      if (auto exec = load_graph_entry(c.backend, c.short_hash, flight.entry->payload)) return exec;
    }
  }
  struct Release {
    cache::Cache* store;
    const cache::Key& key;
    const std::string& token;
    ~Release() {
      if (store) store->end_flight(key, token);
    }
  } release{store, graph_key, flight.token};

  note_cold_work();
  t = Timer();
  codegen::CodegenResult code = codegen::codegen(lowered_graph, backend);
  double codegen_ms = t.ms();
  zc::stats::add_time(zc::stats::Stage::codegen, codegen_ms);
  zc::stats::add(zc::stats::Counter::kernels_generated, code.source.generated_kernels);
  zc::stats::add(zc::stats::Counter::extern_ops, code.source.extern_ops);
  if (code.source.extern_ops) {
    ZC_LOG(output_code) << code.source.extern_ops << " op(s) of graph " << c.short_hash
                        << " run as extern calls to their eager kernels";
  }

  double build_ms = 0;
  std::vector<uint8_t> binary = binary_for(c.keys, backend, store, code.source, &build_ms);

  t = Timer();
  auto exec = backend.load(std::move(code.schedule), std::move(code.plan), binary);
  double load_ms = t.ms();
  zc::stats::add_time(zc::stats::Stage::load, load_ms);
  if (store) {
    Artifact artifact{std::string(backend.name()), std::move(lowered), std::move(binary)};
    store->put(graph_key, encode_artifact(artifact), total.ms());
  }
  ZC_LOG(timing) << "graph " << c.short_hash << ": lower " << lower_ms << " ms, codegen "
                 << codegen_ms << " ms, build " << build_ms << " ms, load " << load_ms << " ms";
  return exec;
}

void ensure_support(const Backend& backend) {
  static std::mutex mu;
  // By what decides the support binary, not by address: a backend made for a test may reuse
  // the address of one destroyed before it.
  static std::set<std::string> ready;
  std::lock_guard lock(mu);
  const std::string id = std::string(backend.name()) + "|" + backend.key_parts().target + "|" +
                         backend.key_parts().toolchain;
  if (ready.count(id)) return;
  std::string source = backend.support_source();
  if (!source.empty()) {
    std::string why = backend.unavailable_reason();
    if (!why.empty()) throw Error(why);
    cache::Cache* store = &cache::process_cache();
    double ms = 0;
    CompileKeys keys = compile_keys("", backend);
    std::vector<uint8_t> binary =
        binary_for(keys, backend, store, codegen::GeneratedSource{std::move(source), 0, 0}, &ms);
    backend.load_support(binary);
    ZC_LOG(timing) << backend.name() << " support kernels ready"
                   << (ms > 0 ? " (built in " + std::to_string(ms) + " ms)" : " (cached)");
  }
  ready.insert(id);
}

void prefetch_graph_entries(std::span<const Digest> hashes, const Backend& backend) {
  if (backend.interprets() || !backend.unavailable_reason().empty()) return;
  cache::Cache& store = cache::process_cache();
  if (!store.remote()) return;
  std::vector<cache::Key> keys;
  for (const Digest& h : hashes) {
    // Graphs this process has loaded already are not looked up again.
    if (code_cache_contains(hex(h) + ":" + std::string(backend.name()))) continue;
    const CompileKeys ck = compile_keys(hex(h), backend);
    keys.push_back(ck.graph_key());
    // Where a size template served the graph, its record is what the compile looks up.
    if (backend.serves_many_sizes()) keys.push_back(sized_key(ck));
  }
  store.prefetch(keys);
}

std::future<void> prefetch_remote(const Backend& backend) {
  if (backend.interprets()) return {};
  return cache::process_cache().connect_remote_async();
}

namespace {

std::string known_backends() {
  std::string s = "\"auto\"";
  for (const Backend* b : codegen::all_backends()) s += ", \"" + std::string(b->name()) + "\"";
  return s;
}

const Backend& named_backend(const std::string& requested) {
  const Backend* b = codegen::find_backend(requested);
  if (!b) {
    throw Error("unknown backend \"" + requested + "\"; this build has " + known_backends());
  }
  std::string why = b->unavailable_reason();
  if (!why.empty()) {
    throw Error("backend \"" + requested + "\" cannot run in this process: " + why +
                "; or compile with backend \"auto\"");
  }
  return *b;
}

}  // namespace

void check_backend(const std::string& requested) {
  if (requested != "auto") named_backend(requested);
}

const Backend& resolve_backend(const std::string& requested, Device device) {
  if (requested != "auto") {
    const Backend& b = named_backend(requested);
    if (!b.interprets() && b.device() != device.type) {
      throw Error("backend \"" + requested + "\" does not compute on " + device.str() +
                  " tensors; move the input with .to(...) or compile with backend \"auto\"");
    }
    return b;
  }
  const Backend* b = codegen::backend_for(device.type);
  if (!b) throw Error("no backend of this build computes on " + device.str() + " tensors");
  std::string why = b->unavailable_reason();
  if (why.empty()) return *b;
  // Without its toolchain the graph still runs, through the interpreter; the user hears once.
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lock(mu);
  if (warned.insert(std::string(b->name())).second) {
    std::fprintf(stderr,
                 "[zc] warning: backend \"%s\" cannot run here: %s; compiled modules run "
                 "through the graph interpreter instead of generated code\n",
                 std::string(b->name()).c_str(), why.c_str());
  }
  return *codegen::find_backend("eager");
}

namespace {

// The in-process code cache's key of a graph. Code for this size only, or possibly a
// template's: they differ (in the last bits, and in speed), so they are two entries.
std::string code_key(const Digest& h, const Backend& backend, bool size_templates) {
  return hex(h) + ":" + std::string(backend.name()) + (size_templates ? ":any-size" : "");
}

}  // namespace

std::shared_ptr<const Executable> load_cached_graph(const Digest& hash, const Backend& backend,
                                                    bool size_templates) {
  if (backend.interprets() || !backend.unavailable_reason().empty()) return nullptr;
  return code_cache_get(code_key(hash, backend, size_templates),
                        [&]() -> std::shared_ptr<const Executable> {
                          const std::string graph_hex = hex(hash);
                          const cache::Key key = compile_keys(graph_hex, backend).graph_key();
                          auto e = cache::process_cache().get(key);
                          if (!e) return nullptr;
                          return load_graph_entry(backend, graph_hex.substr(0, 16), e->payload);
                        });
}

std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const Backend& backend,
                                                std::optional<Digest> hash, bool size_templates,
                                                ProductOptions products) {
  Digest h = hash ? *hash : ir::graph_hash(g);
  if (products.any() && !backend.interprets()) {
    std::string key = hex(h) + ":" + std::string(backend.name()) +
                      (size_templates ? ":any-size" : "") +
                      (products.autotune ? ":autotuned" : "") + (products.bf16 ? ":bf16" : "") +
                      (products.tf32 ? ":tf32" : "");
    return code_cache_get(key, [&] {
      std::shared_ptr<const Executable> exec = compile_graph(g, backend, h, size_templates);
      if (products.autotune) exec = autotuned(std::move(exec));
      if (products.bf16) exec = with_bf16_products(std::move(exec));
      if (products.tf32) {
        if (auto t = exec->with_tf32()) exec = std::move(t);
      }
      return exec;
    });
  }
  const std::string key = code_key(h, backend, size_templates);
  std::string short_hash = hex(h).substr(0, 16);
  return code_cache_get(key, [&]() -> std::shared_ptr<const Executable> {
    Timer t;
    ir::verify(g);
    ZC_LOG(graph) << "captured graph " << short_hash << ":\n" << ir::print(g);
    std::shared_ptr<const Executable> exec =
        backend.interprets()
            ? backend.interpret(g)
            : build_executable(g, backend, &cache::process_cache(), h, size_templates);
    zc::stats::add_time(zc::stats::Stage::compile, t.ms());
    ZC_LOG(timing) << "compile " << short_hash << " (" << backend.name() << "): " << t.ms()
                   << " ms";
    return exec;
  });
}

}  // namespace zc::runtime
