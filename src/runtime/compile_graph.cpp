#include "runtime/compile_graph.h"

#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/code_cache.h"
#include "runtime/interpreter.h"
#include "runtime/stats.h"
#include "util/log.h"
#include "util/timer.h"

namespace zc::runtime {

std::string resolve_backend(const std::string& requested) {
  if (requested == "auto" || requested == "eager") return "eager";
  if (requested == "cpp") {
    throw Error("backend \"cpp\" is not available in this build yet; use \"auto\" or \"eager\"");
  }
  if (requested == "cuda") {
    throw Error(
        "backend \"cuda\" is not available in this build (no CUDA backend yet); use "
        "\"auto\" or \"eager\"");
  }
  throw Error("unknown backend \"" + requested +
              "\"; expected \"auto\", \"cpp\", \"cuda\" or \"eager\"");
}

std::shared_ptr<const Executable> compile_graph(const ir::Graph& g, const std::string& backend) {
  Digest h = ir::graph_hash(g);
  std::string key = hex(h) + ":" + backend;
  return code_cache_get(key, [&]() -> std::shared_ptr<const Executable> {
    Timer t;
    ir::verify(g);
    ZC_LOG(graph) << "graph " << hex(h).substr(0, 16) << ":\n" << ir::print(g);
    std::shared_ptr<const Executable> exec = make_interpreter_executable(g);
    stats::add_time(stats::Stage::compile, t.ms());
    ZC_LOG(timing) << "compile " << hex(h).substr(0, 16) << " (" << backend << "): " << t.ms()
                   << " ms";
    return exec;
  });
}

}  // namespace zc::runtime
