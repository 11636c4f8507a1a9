#include "runtime/dynamic/sizes_first.h"

#include <algorithm>
#include <string_view>
#include <system_error>
#include <thread>

#include "cache/cache.h"
#include "codegen/schedule.h"
#include "ir/canonical.h"
#include "ops/shape_rules.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/templates.h"
#include "runtime/records/codec.h"
#include "util/bytes.h"
#include "util/env.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/timer.h"
#include "zc/autocast.h"
#include "zc/autograd.h"

namespace zc::runtime {

bool sizes_first_pays(const ir::Graph& captured, const codegen::Backend& backend) {
  using codegen::SchedulePolicy;
  const SchedulePolicy& policy = backend.policy();
  bool library = false;
  for (const ir::Node& n : captured.nodes) {
    switch (n.op) {
      case ops::OpId::conv2d:
      case ops::OpId::conv2d_nhwc:
      case ops::OpId::im2col:
      case ops::OpId::max_pool2d:
      case ops::OpId::avg_pool2d:
        return false;
      case ops::OpId::matmul:
      case ops::OpId::linear: {
        if (n.inputs.size() < 2 || n.outputs.empty()) break;
        const Shape& a = captured.meta(n.inputs[0]).shape;
        Shape b = captured.meta(n.inputs[1]).shape;
        if (n.op == ops::OpId::linear) {
          if (b.size() != 2) break;
          std::swap(b[0], b[1]);  // the weight is [out, in]: the product is x @ w^T
        }
        try {
          const ops::MatmulShapes d = ops::matmul_shapes(a, b);
          library = library || policy.matmul_path(d, captured.meta(n.outputs[0]).dtype) ==
                                   SchedulePolicy::MatmulPath::library;
        } catch (const Error&) {
          // Shapes that do not multiply: the capture would have raised; nothing to decide on.
        }
        break;
      }
      default:
        break;
    }
  }
  return library;
}

namespace {

// The record's key: the captured graph's structure with every input's and constant's shape, the
// user inputs' dims of size 2 or more left out (the sizes the templates serve), and what the
// templates were made with.
cache::Key record_key(const ir::Graph& captured, const codegen::Backend& backend,
                      bool hierarchical) {
  std::string shapes;
  auto add = [&](const Shape& s, bool user) {
    shapes += "[";
    for (int64_t d : s) shapes += (user && d >= 2 ? std::string("?") : std::to_string(d)) + ",";
    shapes += "]";
  };
  for (const ir::Input& in : captured.inputs) {
    add(captured.meta(in.value).shape, in.kind == ir::InputKind::user);
  }
  for (const ir::Constant& c : captured.constants) add(captured.meta(c.value).shape, false);
  return compile_keys("", backend)
      .sizes_first_key(hex(ir::structure_hash(captured)), shapes, hierarchical);
}

// What a record says: the dims covered and the templates' structures.
struct Record {
  std::vector<DynamicRange> covered;
  std::vector<std::string> templates;
};

std::vector<uint8_t> encode(const Record& r) {
  RecordWriter w(kSizesFirstFormat);
  w.u32(static_cast<uint32_t>(r.covered.size()));
  for (const DynamicRange& d : r.covered) {
    w.u32(static_cast<uint32_t>(d.input));
    w.u32(static_cast<uint32_t>(d.dim));
  }
  w.u32(static_cast<uint32_t>(r.templates.size()));
  for (const std::string& t : r.templates) w.str(t);
  return w.take();
}

// Raises zc::Error for malformed bytes, or dims this call does not have among `dims`.
Record decode(std::span<const uint8_t> bytes, const std::vector<DynamicRange>& dims) {
  RecordReader r(bytes, kSizesFirstFormat);
  Record rec;
  const uint32_t n = r.count32(static_cast<uint32_t>(dims.size()), "dims the call varies");
  for (uint32_t i = 0; i < n; ++i) {
    const size_t input = r.u32();
    const int64_t dim = r.u32();
    auto d = std::find_if(dims.begin(), dims.end(),
                          [&](const DynamicRange& x) { return x.input == input && x.dim == dim; });
    if (d == dims.end()) r.fail("a dim this call does not vary");
    rec.covered.push_back(*d);
  }
  const uint32_t t = r.count32(4096, "templates");
  for (uint32_t i = 0; i < t; ++i) rec.templates.push_back(r.str());
  r.finish("template");
  return rec;
}

}  // namespace

bool sizes_first_in_background(const codegen::Backend& backend) {
  if (const std::optional<std::string> v = env::non_empty(env::Var::sizes_first)) {
    const std::string_view mode(*v);
    if (mode == "background") return true;
    if (mode == "inline") return false;
    throw Error("ZC_SIZES_FIRST=" + std::string(mode) +
                ": expected background (the first call's templates on a thread of their own) or "
                "inline (before the first call's own code)");
  }
  return backend.device() != Device::Type::cpu && std::thread::hardware_concurrency() >= 4;
}

std::optional<std::vector<DynamicRange>> recorded_sizes_first(
    const std::string& who, const std::vector<DynamicRange>& dims, const ir::Graph& captured,
    const codegen::Backend& backend, bool hierarchical, CompileContext& ctx) {
  cache::Cache* store = ctx.store();
  if (!store) return std::nullopt;
  auto e = store->get(record_key(captured, backend, hierarchical), ctx.lookups());
  if (!e) return std::nullopt;
  try {
    Record rec = decode(e->payload, dims);
    // A template evicted since (or never carried here): made again.
    const bool all_held =
        std::all_of(rec.templates.begin(), rec.templates.end(),
                    [&](const std::string& s) { return holds_size_template(s, backend, ctx); });
    if (all_held) return rec.covered;
    ZC_LOG(recompiles) << who << ": a template its sizes-first record names is gone; made again";
  } catch (const Error& err) {
    ZC_LOG(cache) << who << ": sizes-first record unusable (" << err.what() << "); made again";
  }
  return std::nullopt;
}

std::optional<SizeSamples> trace_sizes_first(nn::Module& module, std::span<const Tensor> inputs,
                                             const std::vector<DynamicRange>& dims,
                                             const ir::Graph& captured,
                                             const codegen::Backend& backend) {
  return trace_size_samples(module, inputs, dims, captured, backend, /*leave_out_refused=*/true);
}

std::vector<DynamicRange> build_sizes_first(SizeSamples samples, const ir::Graph& captured,
                                            const codegen::Backend& backend, bool hierarchical,
                                            CompileContext& ctx) {
  Timer t;
  // Parts whose templates could not be made (a slice that covers its input at this size) are
  // compiled per size, as under marked dims; the dims count as covered by the others.
  AllSizes made = make_templates_of_samples(std::move(samples), backend, hierarchical, ctx);
  if (made.covered.empty()) return {};
  if (cache::Cache* store = ctx.store()) {
    store->put(record_key(captured, backend, hierarchical),
               encode(Record{made.covered, made.templates}), t.ms(), ctx.lookups());
  }
  return made.covered;
}

std::future<std::optional<SizeSamples>> trace_sizes_first_beside(nn::Module& module,
                                                                 std::span<const Tensor> inputs,
                                                                 std::vector<DynamicRange> dims,
                                                                 const ir::Graph& captured,
                                                                 const codegen::Backend& backend) {
  auto trace = [&module, inputs, dims = std::move(dims), &captured, &backend,
                grad = GradMode::is_enabled(), autocast = autocast_dtype()] {
    GradMode::set_enabled(grad);  // traced as the call's own thread would trace
    std::optional<AutocastGuard> cast;
    if (autocast) cast.emplace(*autocast);
    return trace_sizes_first(module, inputs, dims, captured, backend);
  };
  try {
    return std::async(std::launch::async, trace);
  } catch (const std::system_error&) {
    // No thread to spare: traced here, before the call's own build.
    std::promise<std::optional<SizeSamples>> traced;
    traced.set_value(trace());
    return traced.get_future();
  }
}

SizesFirstBuild::SizesFirstBuild(std::string who, std::span<const Tensor> inputs,
                                 SizeSamples samples, ir::Graph captured,
                                 const codegen::Backend& backend, bool hierarchical,
                                 std::function<void()> done)
    : inputs_(inputs.begin(), inputs.end()) {
  auto promise = std::make_shared<std::promise<Built>>();
  built_ = promise->get_future().share();
  auto shared = std::make_shared<SizeSamples>(std::move(samples));
  auto build = [who = std::move(who), shared, captured = std::move(captured), &backend,
                hierarchical, promise, done = std::move(done)] {
    // A compile of its own: the first call that began it has returned.
    CompileContext ctx;
    ctx.set_who(who);
    Built built;
    try {
      built.covered = build_sizes_first(std::move(*shared), captured, backend, hierarchical, ctx);
    } catch (const std::exception& e) {
      // Later sizes then compile as they would without sizes first; nothing was recorded.
      ZC_LOG(recompiles) << who << ": code for all sizes failed on its thread: " << e.what();
    }
    built.report = ctx.report();
    promise->set_value(std::move(built));
    done();
  };
  try {
    std::thread(build).detach();
  } catch (const std::system_error&) {
    build();  // no thread to spare: made here, before the call's own code runs
  }
}

}  // namespace zc::runtime
