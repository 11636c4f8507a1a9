#include "runtime/compile_graph.h"

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "codegen/pipeline.h"
#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "lower/pipeline.h"
#include "runtime/code_cache.h"
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

}  // namespace

std::shared_ptr<const Executable> compile_cpp_graph(const ir::Graph& g,
                                                    const codegen::CodegenContext& ctx) {
  std::string short_hash = hex(ir::graph_hash(g)).substr(0, 16);
  Timer t;
  ir::Graph lowered = lower::lower(g, lower::LowerContext{});
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
  t = Timer();
  auto found = toolchain::find_cxx();
  if (!found) throw Error("no C++ compiler found to build generated code; set ZC_CXX");
  const auto& cxx = *found;
  toolchain::CompileResult built =
      toolchain::compile_shared_object(cxx, toolchain::cpu_target(), code.module.source, "");
  double cxx_ms = t.ms();
  stats::add(stats::Counter::compiler_invocations);
  stats::add_time(stats::Stage::cxx, cxx_ms);
  t = Timer();
  auto lib = toolchain::SharedLibrary::open(built.so_path);
  std::error_code ec;
  std::filesystem::remove(built.so_path, ec);  // loaded: the mapping outlives the file
  auto exec = make_cpp_executable(std::move(code), std::move(lib));
  double load_ms = t.ms();
  stats::add_time(stats::Stage::load, load_ms);
  ZC_LOG(timing) << "graph " << short_hash << ": lower " << lower_ms << " ms, codegen "
                 << codegen_ms << " ms, c++ " << cxx_ms << " ms, load " << load_ms << " ms";
  return exec;
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

std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const std::string& backend) {
  Digest h = ir::graph_hash(g);
  std::string effective = backend == "cpp" && !have_compiler() ? "eager" : backend;
  std::string key = hex(h) + ":" + effective;
  std::string short_hash = hex(h).substr(0, 16);
  return code_cache_get(key, [&]() -> std::shared_ptr<const Executable> {
    Timer t;
    ir::verify(g);
    ZC_LOG(graph) << "captured graph " << short_hash << ":\n" << ir::print(g);
    std::shared_ptr<const Executable> exec = effective == "cpp"
                                                 ? compile_cpp_graph(g, codegen::CodegenContext{})
                                                 : make_interpreter_executable(g);
    stats::add_time(stats::Stage::compile, t.ms());
    ZC_LOG(timing) << "compile " << short_hash << " (" << effective << "): " << t.ms() << " ms";
    return exec;
  });
}

}  // namespace zc::runtime
