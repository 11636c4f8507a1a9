#include "util/stats.h"

#include <atomic>
#include <iomanip>
#include <sstream>

#include "runtime/debug/accuracy_check.h"
#include "runtime/products/autotune.h"
#include "zc/compile.h"

namespace zc::compiler {

using zc::stats::Counter;
using zc::stats::Stage;

Stats stats() {
  auto c = [](Counter k) { return zc::stats::read(k); };
  auto t = [](Stage k) { return zc::stats::read_ms(k); };
  Stats out;
  out.graphs_captured = c(Counter::graphs_captured);
  out.recompiles = c(Counter::recompiles);
  out.graph_breaks = c(Counter::graph_breaks);
  out.code_cache_hits = c(Counter::code_cache_hits);
  out.code_cache_misses = c(Counter::code_cache_misses);
  out.guard_hits = c(Counter::guard_hits);
  out.compiler_invocations = c(Counter::compiler_invocations);
  out.kernels_generated = c(Counter::kernels_generated);
  out.extern_ops = c(Counter::extern_ops);
  out.regions_found = c(Counter::regions_found);
  out.region_graphs = c(Counter::region_graphs);
  out.parts_compiled = c(Counter::parts_compiled);
  out.parts_reused = c(Counter::parts_reused);
  out.graph_recordings = c(Counter::graph_recordings);
  out.graph_replays = c(Counter::graph_replays);
  out.size_templates = c(Counter::size_templates);
  out.template_hits = c(Counter::template_hits);
  out.template_refusals = c(Counter::template_refusals);
  out.backwards_derived = c(Counter::backwards_derived);
  out.autotune_timings = c(Counter::autotune_timings);
  out.autotune_hits = c(Counter::autotune_hits);
  out.graphs_preloaded = c(Counter::graphs_preloaded);
  out.async_compiles = c(Counter::async_compiles);
  out.eager_calls = c(Counter::eager_calls);
  out.accuracy_checks = c(Counter::accuracy_checks);
  out.accuracy_failures = c(Counter::accuracy_failures);
  out.weights_kept = c(Counter::weights_kept);
  out.training_calls = c(Counter::training_calls);
  out.saved_bytes = c(Counter::saved_bytes);
  out.ready_ms = t(Stage::ready);
  out.capture_ms = t(Stage::capture);
  out.compile_ms = t(Stage::compile);
  out.lower_ms = t(Stage::lower);
  out.codegen_ms = t(Stage::codegen);
  out.cxx_ms = t(Stage::cxx);
  out.load_ms = t(Stage::load);
  out.autotune_ms = t(Stage::autotune);
  return out;
}

std::vector<std::string> autotune_choices() {
  std::vector<std::string> out;
  for (const runtime::TunedProduct& t : runtime::chosen_products()) {
    out.push_back(runtime::describe_tuned(t));
  }
  return out;
}

void reset_stats() {
  zc::stats::reset();
  runtime::clear_accuracy_reports();
}

std::string Stats::str() const {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3);
  os << "graphs captured     " << graphs_captured << "\n"
     << "recompiles          " << recompiles << "\n"
     << "graph breaks        " << graph_breaks << "\n"
     << "code cache hits     " << code_cache_hits << "\n"
     << "code cache misses   " << code_cache_misses << "\n"
     << "guard hits (calls)  " << guard_hits << "\n"
     << "compiler runs       " << compiler_invocations << "\n"
     << "kernels generated   " << kernels_generated << "\n"
     << "extern ops          " << extern_ops << "\n"
     << "regions found       " << regions_found << "\n"
     << "region graphs       " << region_graphs << "\n"
     << "parts compiled      " << parts_compiled << "\n"
     << "parts reused        " << parts_reused << "\n"
     << "CUDA graphs recorded " << graph_recordings << "\n"
     << "CUDA graph replays  " << graph_replays << "\n"
     << "size templates      " << size_templates << "\n"
     << "template hits       " << template_hits << "\n"
     << "template refusals   " << template_refusals << "\n"
     << "backwards derived   " << backwards_derived << "\n"
     << "autotune timings    " << autotune_timings << "\n"
     << "autotune hits       " << autotune_hits << "\n"
     << "graphs preloaded    " << graphs_preloaded << "\n"
     << "async compiles      " << async_compiles << "\n"
     << "eager calls         " << eager_calls << "\n"
     << "accuracy checks     " << accuracy_checks << "\n"
     << "accuracy failures   " << accuracy_failures << "\n"
     << "weights kept        " << weights_kept << "\n"
     << "training calls      " << training_calls << "\n"
     << "saved bytes         " << saved_bytes << "\n"
     << "ready ms            " << ready_ms << "\n"
     << "capture ms          " << capture_ms << "\n"
     << "compile ms          " << compile_ms << "\n"
     << "  lower ms          " << lower_ms << "\n"
     << "  codegen ms        " << codegen_ms << "\n"
     << "  c++ compiler ms   " << cxx_ms << "\n"
     << "  load ms           " << load_ms << "\n"
     << "  autotune ms       " << autotune_ms << "\n";
  return os.str();
}

std::string Stats::json() const {
  std::ostringstream os;
  os << "{\"graphs_captured\":" << graphs_captured << ",\"recompiles\":" << recompiles
     << ",\"graph_breaks\":" << graph_breaks << ",\"code_cache_hits\":" << code_cache_hits
     << ",\"code_cache_misses\":" << code_cache_misses << ",\"guard_hits\":" << guard_hits
     << ",\"compiler_invocations\":" << compiler_invocations
     << ",\"kernels_generated\":" << kernels_generated << ",\"extern_ops\":" << extern_ops
     << ",\"regions_found\":" << regions_found << ",\"region_graphs\":" << region_graphs
     << ",\"parts_compiled\":" << parts_compiled << ",\"parts_reused\":" << parts_reused
     << ",\"graph_recordings\":" << graph_recordings << ",\"graph_replays\":" << graph_replays
     << ",\"size_templates\":" << size_templates << ",\"template_hits\":" << template_hits
     << ",\"template_refusals\":" << template_refusals
     << ",\"backwards_derived\":" << backwards_derived
     << ",\"autotune_timings\":" << autotune_timings << ",\"autotune_hits\":" << autotune_hits
     << ",\"graphs_preloaded\":" << graphs_preloaded << ",\"async_compiles\":" << async_compiles
     << ",\"eager_calls\":" << eager_calls << ",\"accuracy_checks\":" << accuracy_checks
     << ",\"accuracy_failures\":" << accuracy_failures << ",\"weights_kept\":" << weights_kept
     << ",\"training_calls\":" << training_calls << ",\"saved_bytes\":" << saved_bytes
     << ",\"ready_ms\":" << ready_ms << ",\"capture_ms\":" << capture_ms
     << ",\"compile_ms\":" << compile_ms << ",\"lower_ms\":" << lower_ms
     << ",\"codegen_ms\":" << codegen_ms << ",\"cxx_ms\":" << cxx_ms << ",\"load_ms\":" << load_ms
     << ",\"autotune_ms\":" << autotune_ms << "}";
  return os.str();
}

}  // namespace zc::compiler
