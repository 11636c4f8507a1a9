#include "runtime/compile_graph.h"

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "cache/cache.h"
#include "cache/fingerprint.h"
#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/pipeline.h"
#include "runtime/code_cache.h"
#include "runtime/cpp_artifact.h"
#include "runtime/cpp_executable.h"
#include "runtime/interpreter.h"
#include "runtime/stats.h"
#include "toolchain/compiler.h"
#include "toolchain/target.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

namespace {

// Without a compiler the graph still runs, through the interpreter; the user hears once.
bool have_compiler() {
  static const bool available = [] {
    bool ok = toolchain::compiler_available();
    if (!ok) {
      std::fprintf(stderr,
                   "[zc] warning: no C++ compiler found (set ZC_CXX to one); compiled modules "
                   "run through the graph interpreter instead of generated code\n");
    }
    return ok;
  }();
  return available;
}

// The graph level's key: a hit skips lowering, code generation and the compiler.
cache::Key graph_key_of(const std::string& graph_hex, const codegen::CodegenContext& ctx,
                        const cache::Fingerprint& fp) {
  cache::Key key(cache::Level::graph);
  key.add("graph", graph_hex)
      .add("backend", "cpp")
      .add("codegen", describe(ctx))
      .made_for({fp.build_id, fp.target, fp.toolchain});
  return key;
}

}  // namespace

std::shared_ptr<const Executable> compile_cpp_graph(const ir::Graph& g,
                                                    const codegen::CodegenContext& ctx) {
  return compile_cpp_graph(g, ctx, nullptr);
}

std::shared_ptr<const Executable> compile_cpp_graph(const ir::Graph& g,
                                                    const codegen::CodegenContext& ctx,
                                                    cache::Cache* store,
                                                    std::optional<Digest> hash) {
  Digest graph_digest = hash ? *hash : ir::graph_hash(g);
  std::string graph_hex = hex(graph_digest), short_hash = graph_hex.substr(0, 16);
  auto found = toolchain::find_cxx();
  if (!found) throw Error("no C++ compiler found to build generated code; set ZC_CXX");
  const cache::Fingerprint& fp = cache::process_fingerprint();
  Timer total;
  const cache::Key graph_key = graph_key_of(graph_hex, ctx, fp);
  auto load_cached = [&](const std::vector<uint8_t>& payload) -> std::shared_ptr<const Executable> {
    try {
      Timer t;
      auto exec = load_artifact(decode_artifact(payload));
      stats::add_time(stats::Stage::load, t.ms());
      ZC_LOG(timing) << "graph " << short_hash << ": loaded from the cache in " << t.ms() << " ms";
      return exec;
    } catch (const Error& err) {
      // A verified entry that still does not load (another format): compile afresh.
      ZC_LOG(cache) << "graph " << short_hash << ": cached artifact unusable (" << err.what()
                    << "); compiling";
      return nullptr;
    }
  };
  if (store) {
    if (auto e = store->get(graph_key)) {
      if (auto exec = load_cached(e->payload)) return exec;
    }
  }
  // Another process may be compiling this very graph: wait for its entry rather than repeat
  // the work. The lock, if taken, is released once the entry is stored (or on an exception).
  cache::Cache::Flight flight;
  if (store) {
    flight = store->begin_flight(graph_key);
    if (flight.entry) {
      if (auto exec = load_cached(flight.entry->payload)) return exec;
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

  // Lowering level.
  Timer t;
  cache::Key lower_key(cache::Level::lowering);
  lower_key.add("graph", graph_hex).add("lower", "v1").made_for({fp.build_id, "", ""});
  std::vector<uint8_t> lowered_bytes;
  if (store) {
    if (auto e = store->get(lower_key)) lowered_bytes = std::move(e->payload);
  }
  if (lowered_bytes.empty()) {
    lowered_bytes = ir::canonical_bytes(lower::lower(g, lower::LowerContext{}));
    if (store) store->put(lower_key, lowered_bytes, t.ms());
  }
  // Scheduled from canonical numbering, exactly as a later load of the artifact will be.
  ir::Graph lowered = ir::read_canonical(lowered_bytes);
  double lower_ms = t.ms();
  stats::add_time(stats::Stage::lower, lower_ms);

  t = Timer();
  codegen::CodegenResult code = codegen::codegen_cpp(lowered, ctx);
  double codegen_ms = t.ms();
  stats::add_time(stats::Stage::codegen, codegen_ms);
  stats::add(stats::Counter::kernels_generated, code.module.generated_kernels);
  stats::add(stats::Counter::extern_ops, code.module.extern_ops);
  if (code.module.extern_ops) {
    ZC_LOG(output_code) << code.module.extern_ops << " op(s) of graph " << short_hash
                        << " run as extern calls to their eager kernels";
  }

  // Kernel level: the binary for this exact source, compiler and target.
  t = Timer();
  const toolchain::Target& target = toolchain::cpu_target();
  cache::Key kernel_key(cache::Level::kernel);
  kernel_key.add("source", hex(sha256(code.module.source))).made_for({"", fp.target, fp.toolchain});
  std::vector<uint8_t> binary;
  if (store) {
    if (auto e = store->get(kernel_key)) binary = std::move(e->payload);
  }
  double cxx_ms = 0;
  if (binary.empty()) {
    toolchain::CompileResult built =
        toolchain::compile_shared_object(*found, target, code.module.source, "");
    binary = toolchain::read_file_bytes(built.so_path);
    std::error_code ec;
    std::filesystem::remove(built.so_path, ec);
    cxx_ms = t.ms();
    stats::add(stats::Counter::compiler_invocations);
    stats::add_time(stats::Stage::cxx, cxx_ms);
    if (store) store->put(kernel_key, binary, cxx_ms);
  }

  t = Timer();
  auto exec = make_cpp_executable(std::move(code), toolchain::SharedLibrary::from_bytes(binary));
  double load_ms = t.ms();
  stats::add_time(stats::Stage::load, load_ms);
  if (store) {
    CppArtifact artifact{std::move(lowered_bytes), ctx, std::move(binary)};
    store->put(graph_key, encode_artifact(artifact), total.ms());
  }
  ZC_LOG(timing) << "graph " << short_hash << ": lower " << lower_ms << " ms, codegen "
                 << codegen_ms << " ms, c++ " << cxx_ms << " ms, load " << load_ms << " ms";
  return exec;
}

void prefetch_graph_entries(std::span<const Digest> hashes, const std::string& backend) {
  if (backend != "cpp" || !have_compiler()) return;
  cache::Cache& store = cache::process_cache();
  if (!store.remote()) return;
  const cache::Fingerprint& fp = cache::process_fingerprint();
  std::vector<cache::Key> keys;
  for (const Digest& h : hashes) {
    // Graphs this process has loaded already are not looked up again.
    if (code_cache_contains(hex(h) + ":cpp")) continue;
    keys.push_back(graph_key_of(hex(h), codegen::CodegenContext{}, fp));
  }
  store.prefetch(keys);
}

std::future<void> prefetch_remote(const std::string& backend) {
  if (backend != "cpp") return {};
  return cache::process_cache().connect_remote_async();
}

std::string resolve_backend(const std::string& requested) {
  if (requested == "auto" || requested == "cpp") return "cpp";
  if (requested == "eager") return "eager";
  if (requested == "cuda") {
    throw Error(
        "backend \"cuda\" is not available in this build (no CUDA backend yet); use "
        "\"auto\", \"cpp\" or \"eager\"");
  }
  throw Error("unknown backend \"" + requested +
              "\"; expected \"auto\", \"cpp\", \"cuda\" or \"eager\"");
}

std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const std::string& backend,
                                                std::optional<Digest> hash) {
  Digest h = hash ? *hash : ir::graph_hash(g);
  std::string effective = backend == "cpp" && !have_compiler() ? "eager" : backend;
  std::string key = hex(h) + ":" + effective;
  std::string short_hash = hex(h).substr(0, 16);
  return code_cache_get(key, [&]() -> std::shared_ptr<const Executable> {
    Timer t;
    ir::verify(g);
    ZC_LOG(graph) << "captured graph " << short_hash << ":\n" << ir::print(g);
    std::shared_ptr<const Executable> exec =
        effective == "cpp"
            ? compile_cpp_graph(g, codegen::CodegenContext{}, &cache::process_cache(), h)
            : make_interpreter_executable(g);
    stats::add_time(stats::Stage::compile, t.ms());
    ZC_LOG(timing) << "compile " << short_hash << " (" << effective << "): " << t.ms() << " ms";
    return exec;
  });
}

}  // namespace zc::runtime
