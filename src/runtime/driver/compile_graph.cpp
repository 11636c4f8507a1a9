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
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/templates.h"
#include "runtime/products/autotune.h"
#include "runtime/products/bf16_products.h"
#include "util/log.h"
#include "util/stats.h"
#include "util/timer.h"

namespace zc::runtime {

namespace {

// Graph level: an executable from a stored artifact, or null when the artifact, though it
// verified, does not load (another format): then the graph is compiled afresh.
std::shared_ptr<const Executable> load_graph_entry(const Backend& backend,
                                                   const std::string& short_hash,
                                                   const std::vector<uint8_t>& payload,
                                                   CompileContext& ctx) {
  try {
    Timer t;
    auto exec = load_artifact(decode_artifact(payload), backend);
    ctx.add_time(stats::Stage::load, t.ms());
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
                                   CompileContext& ctx, const CompileKeys& keys) {
  Timer t;
  const cache::Key key = keys.lowering_key();
  cache::Cache* store = ctx.store();
  if (store) {
    if (auto e = store->get(key, ctx.lookups())) return std::move(e->payload);
  }
  lower::LowerContext lowering;
  lowering.keep = backend.native_ops();
  lowering.split_long_reductions = backend.splits_long_reductions();
  std::vector<uint8_t> bytes = ir::canonical_bytes(lower::lower(captured, lowering));
  // Written to disk behind the compile: a disk write cost a size template's check on the GPU
  // host as much as the lowering itself.
  if (store) store->put_behind(key, bytes, t.ms(), ctx.lookups());
  return bytes;
}

std::vector<uint8_t> binary_for(const CompileKeys& keys, const Backend& backend,
                                CompileContext& ctx, const codegen::GeneratedSource& source,
                                double* build_ms) {
  if (!backend.needs_build(source)) return {};
  Timer t;
  const cache::Key key = keys.kernel_key(hex(sha256(source.text)));
  cache::Cache* store = ctx.store();
  if (store) {
    if (auto e = store->get(key, ctx.lookups())) return std::move(e->payload);
  }
  ctx.note_cold_work();
  std::vector<uint8_t> binary = backend.build(source);
  *build_ms = t.ms();
  ctx.count(stats::Counter::compiler_invocations);
  ctx.add_time(stats::Stage::cxx, *build_ms);
  if (store) store->put(key, binary, *build_ms, ctx.lookups());
  return binary;
}

namespace {

// A lowered graph's generated code and its binary: what a graph the graph level lacks costs.
struct Built {
  codegen::CodegenResult code;
  std::vector<uint8_t> binary;
  double codegen_ms = 0, build_ms = 0;
};

Built generate_and_build(const ir::Graph& lowered, const Backend& backend, CompileContext& ctx,
                         const CompileKeys& keys) {
  ctx.note_cold_work();
  Built b;
  Timer t;
  b.code = codegen::codegen(lowered, backend);
  b.codegen_ms = t.ms();
  ctx.add_time(stats::Stage::codegen, b.codegen_ms);
  ctx.count(stats::Counter::kernels_generated, b.code.source.generated_kernels);
  ctx.count(stats::Counter::extern_ops, b.code.source.extern_ops);
  if (b.code.source.extern_ops) {
    ZC_LOG(output_code) << b.code.source.extern_ops << " op(s) of graph "
                        << keys.graph.substr(0, 16)
                        << " run as extern calls to their eager kernels";
  }
  b.binary = binary_for(keys, backend, ctx, b.code.source, &b.build_ms);
  return b;
}

void check_usable(const Backend& backend) {
  std::string why = backend.unavailable_reason();
  if (!why.empty()) throw Error(why);
}

}  // namespace

std::shared_ptr<const Executable> build_executable(const ir::Graph& g, const Backend& backend,
                                                   CompileContext& ctx, std::optional<Digest> hash,
                                                   bool size_templates) {
  check_usable(backend);
  const std::string graph_hex = hex(hash ? *hash : ir::graph_hash(g));
  const CompileKeys keys = compile_keys(graph_hex, backend);
  const std::string short_hash = graph_hex.substr(0, 16);
  cache::Cache* store = ctx.store();
  Timer total;
  const bool templates = size_templates && backend.serves_many_sizes();
  // A size template served this graph before: its record loads it as an artifact would, with
  // no graph-level lookup or single-flight lock first (each a round trip to a remote tier).
  if (templates && store) {
    if (auto e = store->get(keys.sized_graph_key(), ctx.lookups())) {
      if (auto exec = load_sized(e->payload, backend, ctx, keys)) return exec;
    }
  }
  const cache::Key graph_key = keys.graph_key();
  if (store) {
    if (auto e = store->get(graph_key, ctx.lookups())) {
      if (auto exec = load_graph_entry(backend, short_hash, e->payload, ctx)) return exec;
    } else {
      ZC_LOG(cache) << "graph " << short_hash << ": not cached; its key's parts:\n"
                    << keys.details();
    }
  }
  const double lookup_ms = total.ms();

  // Without a size template to serve it, a graph the graph level lacks is compiled.
  if (!templates) ctx.note_cold_work();
  Timer t;
  std::vector<uint8_t> lowered = lowered_bytes(g, backend, ctx, keys);
  // Scheduled from canonical numbering, exactly as a later load of the artifact will be.
  ir::Graph lowered_graph = ir::read_canonical(lowered);
  double lower_ms = t.ms();
  ctx.add_time(stats::Stage::lower, lower_ms);

  // Code made once for many sizes of this graph serves it when it verifies for these sizes:
  // no compiler runs, so this comes before the single-flight lock (there is no compile for
  // other processes to wait for). Such executables are recorded at the graph level without
  // their binary (each size would store a copy of the shared one): sized_graph_key. The record is
  // written to disk behind the call: this process holds it in memory.
  if (templates) {
    SizedUse used;
    Timer check;
    if (auto exec = executable_from_template(lowered_graph, backend, ctx, keys, &used)) {
      const double check_ms = check.ms();
      if (store) {
        store->put_behind(keys.sized_graph_key(), encode_sized(lowered, used), total.ms(),
                          ctx.lookups());
      }
      ZC_LOG(timing) << "graph " << short_hash << ": from its size template in " << total.ms()
                     << " ms (lookups " << lookup_ms << " ms, lower " << lower_ms
                     << " ms, check and bind " << check_ms << " ms)";
      return exec;
    }
  }

  // Another process may be compiling this very graph: wait for its entry rather than repeat
  // the work. The lock, if taken, is released once the entry is stored (or on an exception).
  cache::Cache::Flight flight;
  if (store) {
    flight = store->begin_flight(graph_key, ctx.lookups());
    if (flight.entry) {
      if (auto exec = load_graph_entry(backend, short_hash, flight.entry->payload, ctx))
        return exec;
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

  Built built = generate_and_build(lowered_graph, backend, ctx, keys);
  t = Timer();
  auto exec =
      backend.load(std::move(built.code.schedule), std::move(built.code.plan), built.binary);
  double load_ms = t.ms();
  ctx.add_time(stats::Stage::load, load_ms);
  if (store) {
    Artifact artifact{std::string(backend.name()), std::move(lowered), std::move(built.binary)};
    store->put(graph_key, encode_artifact(artifact), total.ms(), ctx.lookups());
  }
  ZC_LOG(timing) << "graph " << short_hash << ": lower " << lower_ms << " ms, codegen "
                 << built.codegen_ms << " ms, build " << built.build_ms << " ms, load " << load_ms
                 << " ms";
  return exec;
}

std::vector<uint8_t> graph_artifact(const ir::Graph& g, const Digest& hash, const Backend& backend,
                                    CompileContext& ctx) {
  check_usable(backend);
  const CompileKeys keys = compile_keys(hex(hash), backend);
  const cache::Key graph_key = keys.graph_key();
  cache::Cache* store = ctx.store();
  if (store) {
    if (auto e = store->get(graph_key, ctx.lookups())) {
      try {
        if (decode_artifact(e->payload).backend == backend.name()) return e->payload;
      } catch (const Error& err) {
        ZC_LOG(cache) << "graph " << hex(hash).substr(0, 16) << ": cached artifact unusable ("
                      << err.what() << "); building it afresh";
      }
    }
  }
  Timer timer;
  ir::verify(g);
  std::vector<uint8_t> lowered = lowered_bytes(g, backend, ctx, keys);
  Built built = generate_and_build(ir::read_canonical(lowered), backend, ctx, keys);
  std::vector<uint8_t> bytes = encode_artifact(
      Artifact{std::string(backend.name()), std::move(lowered), std::move(built.binary)});
  if (store) store->put(graph_key, bytes, timer.ms(), ctx.lookups());
  return bytes;
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
    // Once per process, for whichever compile or eager op first needs them: a context of its
    // own, its report in the log.
    CompileContext ctx;
    double ms = 0;
    CompileKeys keys = compile_keys("", backend);
    std::vector<uint8_t> binary =
        binary_for(keys, backend, ctx, codegen::GeneratedSource{std::move(source), 0, 0}, &ms);
    backend.load_support(binary);
    ZC_LOG(timing) << backend.name() << " support kernels ready"
                   << (ms > 0 ? " (built in " + std::to_string(ms) + " ms)" : " (cached)") << ": "
                   << ctx.report().str();
  }
  ready.insert(id);
}

void prefetch_graph_entries(std::span<const Digest> hashes, const Backend& backend,
                            CompileContext& ctx) {
  if (backend.interprets() || !backend.unavailable_reason().empty()) return;
  cache::Cache* store = ctx.store();
  if (!store || !store->remote()) return;
  std::vector<cache::Key> keys;
  for (const Digest& h : hashes) {
    // Graphs this process has loaded already are not looked up again.
    if (code_cache_contains(code_key(h, backend, false))) continue;
    const CompileKeys ck = compile_keys(hex(h), backend);
    keys.push_back(ck.graph_key());
    // Where a size template served the graph, its record is what the compile looks up.
    if (backend.serves_many_sizes()) keys.push_back(ck.sized_graph_key());
  }
  store->prefetch(keys);
}

std::future<void> prefetch_remote(const Backend& backend, CompileContext& ctx) {
  if (backend.interprets()) return {};
  cache::Cache* store = ctx.store();
  return store ? store->connect_remote_async() : std::future<void>{};
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

std::shared_ptr<const Executable> load_cached_graph(const Digest& hash, const Backend& backend,
                                                    bool size_templates, CompileContext& ctx) {
  if (backend.interprets() || !backend.unavailable_reason().empty()) return nullptr;
  return code_cache_get(
      code_key(hash, backend, size_templates),
      [&]() -> std::shared_ptr<const Executable> {
        cache::Cache* store = ctx.store();
        if (!store) return nullptr;
        const std::string graph_hex = hex(hash);
        auto e = store->get(compile_keys(graph_hex, backend).graph_key(), ctx.lookups());
        if (!e) return nullptr;
        return load_graph_entry(backend, graph_hex.substr(0, 16), e->payload, ctx);
      },
      ctx);
}

std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const Backend& backend,
                                                CompileContext& ctx, std::optional<Digest> hash,
                                                bool size_templates, ProductOptions products) {
  Digest h = hash ? *hash : ir::graph_hash(g);
  if (products.any() && !backend.interprets()) {
    return code_cache_get(
        code_key(h, backend, size_templates, products),
        [&] {
          std::shared_ptr<const Executable> exec =
              compile_graph(g, backend, ctx, h, size_templates);
          if (products.autotune) exec = autotuned(std::move(exec), ctx);
          if (products.bf16) exec = with_bf16_products(std::move(exec));
          if (products.tf32) {
            if (auto t = exec->with_tf32()) exec = std::move(t);
          }
          return exec;
        },
        ctx);
  }
  const std::string key = code_key(h, backend, size_templates);
  std::string short_hash = hex(h).substr(0, 16);
  return code_cache_get(
      key,
      [&]() -> std::shared_ptr<const Executable> {
        Timer t;
        ir::verify(g);
        ZC_LOG(graph) << "captured graph " << short_hash << ":\n" << ir::print(g);
        std::shared_ptr<const Executable> exec =
            backend.interprets() ? backend.interpret(g)
                                 : build_executable(g, backend, ctx, h, size_templates);
        ctx.add_time(stats::Stage::compile, t.ms());
        ZC_LOG(timing) << "compile " << short_hash << " (" << backend.name() << ")"
                       << (ctx.who().empty() ? "" : " for " + ctx.who()) << ": " << t.ms() << " ms";
        return exec;
      },
      ctx);
}

}  // namespace zc::runtime
