// The CUDA backend's code path that needs no GPU (emit, NVRTC, the kernel cache, keys and
// bundle provenance), which runs in CI; and compiled graphs on a GPU, which skip without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <thread>
#include <tuple>

#include "cache/bundle.h"
#include "cache/cache.h"
#include "cache/disk_tier.h"
#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/driver/compile_keys.h"
#include "runtime/dynamic/templates.h"
#include "unit/op_programs.h"
#include "unit/run_model.h"
#include "unit/sm90_backend.h"
#include "unit/test_support.h"
#include "zc/cuda.h"
#include "zc/zc.h"

#if ZC_WITH_CUDA
#include "codegen/backends/cuda/launch.h"
#include "codegen/backends/cuda/programs.h"
#endif

namespace zc {
namespace {

#if ZC_WITH_CUDA

using test::sm90;

ir::Graph captured(const test::Program& f, const Tensor& x) {
  test::Fn m(f);
  return capture::capture_module(m, x, nullptr, true).graph;
}

bool is_elf(const std::vector<uint8_t>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

TEST(CudaCodegen, EveryOpBuildsToACubin) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(2);
  Tensor w = randn({5, 4}), b = randn({5}), table = randn({7, 4});
  for (DType dt : {DType::f32, DType::bf16}) {
    for (const test::Program& f : test::every_op_programs(w, b, table)) {
      lower::LowerContext lc;
      lc.keep = backend->native_ops();  // attention stays whole: its fused kernel is built too
      ir::Graph low = lower::lower(captured(f, randn({3, 4}).to(dt)), lc);
      codegen::CodegenResult code = codegen::codegen(low, *backend);
      std::vector<uint8_t> cubin = backend->build(code.source);
      EXPECT_TRUE(test::cubins_are_elf(cubin)) << code.source.text;
      // Every kernel is generated but convolutions, which cuDNN runs where it is found.
      EXPECT_EQ(code.source.generated_kernels + code.source.extern_ops,
                static_cast<int>(code.schedule.kernels.size()));
    }
  }
}

TEST(CudaCodegen, LargeMatmulsGoToTheLibraryWithAGeneratedEpilogue) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(3);
  Tensor w = randn({256, 128}), b = randn({256});
  ir::Graph low = lower::lower(
      captured([=](const Tensor& x) { return gelu(linear(x, w, b), GeluApprox::tanh); },
               randn({4, 16, 128})),
      lower::LowerContext{});
  codegen::CodegenResult code = codegen::codegen(low, *backend);
  ASSERT_EQ(code.schedule.kernels.size(), 1u);
  EXPECT_EQ(code.schedule.kernels[0].kind, codegen::KernelKind::matmul);
  // No tiled product in the source: the bias and gelu read the library's product from memory.
  EXPECT_FALSE(test::contains(code.source.text, "zc_at[")) << code.source.text;
  EXPECT_TRUE(test::contains(code.source.text, "matmul epilogue")) << code.source.text;
  EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
}

// The launch forms of reductions and generated products: a sum over every dim but the last
// into enough results takes the column form, a sum along the last dim one block per row; a
// generated product of at least 64x64 register-tiles 4x4 elements per thread, a smaller one
// one element; and a loss-sized sum is split into two stages before it is scheduled.
TEST(CudaCodegen, ReductionsAndGeneratedProductsTakeTheirLaunchForms) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(3);
  lower::LowerContext lc;
  lc.split_long_reductions = backend->splits_long_reductions();
  auto launches = [&](const test::Program& f, const Tensor& x) {
    ir::Graph low = lower::lower(captured(f, x), lc);
    codegen::CodegenResult code = codegen::codegen(low, *backend);
    EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
    return codegen::cuda::launch_plan(code.schedule, code.plan);
  };
  auto columns = [](const Tensor& x) { return sum(x, {0, 1}); };
  std::vector<codegen::cuda::Launch> l = launches(columns, randn({4, 16, 3072}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_TRUE(l[0].columns);
  l = launches(columns, randn({4, 16, 768}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0].columns);  // too few rows for the column form
  l = launches([](const Tensor& x) { return sum(x, {2}); }, randn({4, 16, 3072}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0].columns);
  l = launches([](const Tensor& x) { return mean(x); }, randn({8, 128, 768}));
  EXPECT_EQ(l.size(), 2u);  // 1024 row sums, then one sum of them (and the mean's division)
  // Heads viewed out of [batch, tokens, heads, dim] (attention's layout) have batch strides
  // cuBLASLt cannot take: the product is generated.
  Tensor k = randn({2, 3, 64, 96});
  auto heads = [k](const Tensor& q) { return matmul(q.transpose(1, 2), k); };
  l = launches(heads, randn({2, 80, 3, 64}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_FALSE(l[0].library);
  EXPECT_EQ(l[0].micro, 4);
  l = launches(heads, randn({2, 20, 3, 64}));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].micro, 1);
}

// A bf16 transformer block in as many kernels as in f32: layer_norm's bf16 weight and bias are
// read and converted where they are (no cast kernels, no f32 copies), the products read bf16
// operands, and the attention kernel reads the bf16 projections.
TEST(CudaCodegen, ABf16TransformerBlockHasTheKernelsOfAnF32One) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(4);
  auto kernels = [&](DType dt) {
    nn::TransformerBlock block(64, 4, /*causal=*/true);
    block.eval();
    block.to(dt);
    lower::LowerContext lc;
    lc.keep = backend->native_ops();
    ir::Graph low = lower::lower(
        capture::capture_module(block, randn({2, 16, 64}).to(dt), nullptr, true).graph, lc);
    codegen::CodegenResult code = codegen::codegen(low, *backend);
    std::vector<codegen::KernelKind> kinds;
    for (const codegen::Kernel& k : code.schedule.kernels) kinds.push_back(k.kind);
    if (dt == DType::bf16) {
      EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
    }
    return kinds;
  };
  const std::vector<codegen::KernelKind> f32 = kernels(DType::f32), bf16 = kernels(DType::bf16);
  EXPECT_EQ(bf16, f32);
  EXPECT_EQ(std::count(bf16.begin(), bf16.end(), codegen::KernelKind::pointwise), 0);
}

// Pointwise kernels whose last dim allows it take 16 bytes per operand per step (4 f32 or 8
// bf16 elements), with an element loop kept for misaligned pointers; a last dim that is not a
// multiple of the width, or an operand strided along it, keeps the element loop only.
TEST(CudaCodegen, PointwiseKernelsTakeVectorSteps) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(4);
  struct Case {
    Shape shape;
    DType dtype;
    bool transposed;
    const char* step;  // in the source, or nullptr for no vector step
  };
  for (const Case& c :
       {Case{{8, 64}, DType::f32, false, "zc_v * 4"}, Case{{8, 64}, DType::bf16, false, "zc_v * 8"},
        Case{{8, 63}, DType::f32, false, nullptr}, Case{{64, 64}, DType::f32, true, nullptr}}) {
    Tensor bias = randn({c.shape.back()}).to(c.dtype);
    const bool t = c.transposed;
    ir::Graph low =
        lower::lower(captured([=](const Tensor& x) { return relu((t ? x.t() : x) * 2.0 + bias); },
                              randn(c.shape).to(c.dtype)),
                     lower::LowerContext{});
    codegen::CodegenResult code = codegen::codegen(low, *backend);
    ASSERT_EQ(code.schedule.kernels.size(), 1u);
    if (c.step) {
      EXPECT_TRUE(test::contains(code.source.text, c.step)) << code.source.text;
      EXPECT_TRUE(test::contains(code.source.text, "& 15) == 0")) << code.source.text;
    } else {
      EXPECT_FALSE(test::contains(code.source.text, "zc_v")) << code.source.text;
    }
    EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source))) << code.source.text;
  }
}

// The fused attention kernel in each of its forms: tiled (head dims that are multiples of 4 up
// to 128, also with a value dim that is not a multiple of 64), and by rows (four threads a row
// reading scalars, eight threads a row reading float4s, for dims the tiles do not take); NVRTC
// builds each, in each float dtype. f64 always takes the rows form.
TEST(CudaCodegen, AttentionBuildsInEveryTiling) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  struct Case {
    Shape q, v;
    const char* reads;  // what the source must contain
  };
  for (const Case& c : {Case{{2, 12, 128, 64}, {2, 12, 128, 64}, "float4 zc_qv"},
                        Case{{2, 3, 40, 24}, {2, 3, 40, 24}, "zc_tx * 4 + 0 < 24"},
                        Case{{1, 2, 130, 128}, {1, 2, 130, 96}, "zc_kv[32]"},
                        Case{{2, 3, 40, 22}, {2, 3, 40, 22}, "zc_d < 22"},
                        Case{{1, 2, 30, 192}, {1, 2, 30, 192}, "const float4 zc_t"}}) {
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      manual_seed(5);
      Tensor k = randn(c.q).to(dt), v = randn(c.v).to(dt);
      lower::LowerContext lc;
      lc.keep = backend->native_ops();
      ir::Graph low = lower::lower(
          captured([=](const Tensor& q) { return scaled_dot_product_attention(q, k, v, true); },
                   randn(c.q).to(dt)),
          lc);
      codegen::CodegenResult code = codegen::codegen(low, *backend);
      ASSERT_EQ(code.schedule.kernels.size(), 1u);
      EXPECT_EQ(code.schedule.kernels[0].kind, codegen::KernelKind::attention);
      // bf16 computes in float, so its tiles are float too; f64 reads doubles one at a time.
      if (dt != DType::f64) {
        EXPECT_TRUE(test::contains(code.source.text, c.reads)) << code.source.text;
      } else {
        EXPECT_FALSE(test::contains(code.source.text, "float4")) << code.source.text;
      }
      EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source))) << code.source.text;
    }
  }
}

// Code for many sizes: a GPT captured at five lengths gives one CUDA text whose sizes fit
// polynomials in the length, and that text, with the polynomials over the kernels' ZcSym in
// place, builds to one cubin (tests/unit/dynamic_shapes_test.cpp runs such code on a GPU).
TEST(CudaCodegen, AGptOfEveryLengthBuildsToOneCubin) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(3);
  auto gpt =
      models::gpt({.vocab_size = 64, .block_size = 64, .n_layer = 2, .n_head = 2, .d_model = 32});
  gpt->eval();
  std::vector<ir::Graph> family;
  for (int64_t t : {16, 15, 17, 14, 18}) {
    family.push_back(capture::capture_module(*gpt, randint(0, 64, {2, t}), nullptr, true).graph);
  }
  const int64_t made = compiler::stats().size_templates;
  cache::Cache store(cache::CacheConfig{.persistent = false});
  runtime::CompileContext ctx(&store);
  ASSERT_TRUE(runtime::make_size_template(family, *backend, ctx));
  EXPECT_EQ(compiler::stats().size_templates, made + 1);
}

TEST(CudaCodegen, ACubinIsCachedAndFoundAgain) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  cache::CacheConfig config;
  config.dir = test::test_dir("cuda_cache");
  config.local_lock_ms = 0;
  cache::Cache store(config);
  ir::Graph g = captured([](const Tensor& x) { return sigmoid(x * 3.0) + 1.0; }, randn({8, 8}));
  // Without a GPU the build succeeds and only the load fails; either way the cubin is stored.
  auto compile_once = [&] {
    compiler::reset_stats();
    try {
      runtime::CompileContext ctx(&store);
      runtime::build_executable(g, *backend, ctx);
    } catch (const Error& e) {
      EXPECT_FALSE(cuda::is_available()) << e.what();
    }
    return compiler::stats().compiler_invocations;
  };
  EXPECT_EQ(compile_once(), 1);
  EXPECT_EQ(compile_once(), 0);  // the cubin (or the whole graph) came from the cache
  int cubins = 0;
  for (const cache::TierListing& l : store.disk()->list()) {
    if (l.info.level != cache::Level::kernel) continue;
    cache::GetResult r = store.disk()->get(l.info.level, l.info.key);
    ASSERT_EQ(r.outcome, cache::Outcome::hit);
    auto unwrapped = cache::unwrap_payload(r.entry->payload);
    ASSERT_TRUE(unwrapped);
    EXPECT_TRUE(is_elf(unwrapped->second));
    EXPECT_EQ(unwrapped->first.target, "cuda{arch=sm_90}");
    ++cubins;
  }
  EXPECT_GE(cubins, 1);
}

// A source with many kernels is cut between kernels into programs, each with the shared head:
// every kernel in exactly one, in order; a small source (or one kernel) is one program, itself.
TEST(CudaPrograms, ALargeSourceIsCutBetweenKernelsIntoProgramsWithTheHead) {
  using codegen::cuda::kKernelMarker;
  using codegen::cuda::kMaxPrograms;
  using codegen::cuda::kProgramBytes;
  using codegen::cuda::split_programs;
  const std::string head = "// prelude\n__device__ int zc_helper() { return 1; }\n";
  auto source_of = [&](int kernels, size_t bytes_each) {
    std::string s = head;
    for (int k = 0; k < kernels; ++k) {
      std::string body = std::string(kKernelMarker) + std::to_string(k) + ": pointwise\n";
      body += std::string(bytes_each - body.size() - 1, 'x') + "\n";
      s += body;
    }
    return s;
  };
  EXPECT_EQ(split_programs(source_of(3, 1000)), std::vector<std::string>{source_of(3, 1000)});
  EXPECT_EQ(split_programs(source_of(1, 4 * kProgramBytes)).size(), 1u);  // one kernel
  EXPECT_EQ(split_programs(head).size(), 1u);                             // no kernel
  for (const auto& [kernels, bytes] : std::vector<std::pair<int, size_t>>{
           {24, 1800}, {5, 3 * kProgramBytes}, {200, 2000}, {17, 1024}}) {
    SCOPED_TRACE(std::to_string(kernels) + " kernels of " + std::to_string(bytes) + " bytes");
    const std::string source = source_of(kernels, bytes);
    const std::vector<std::string> programs = split_programs(source);
    const size_t want = std::min({kMaxPrograms, static_cast<size_t>(kernels),
                                  (kernels * bytes + kProgramBytes - 1) / kProgramBytes});
    EXPECT_EQ(programs.size(), want);
    std::string kernels_in_order;
    for (const std::string& p : programs) {
      ASSERT_EQ(p.substr(0, head.size()), head);
      ASSERT_TRUE(p.substr(head.size()).starts_with(kKernelMarker));
      kernels_in_order += p.substr(head.size());
    }
    EXPECT_EQ(head + kernels_in_order, source);
    EXPECT_EQ(split_programs(source), programs);  // the same cut every time
  }
}

// A kernel's marker may give it a weight (NVRTC's time per byte of an attention kernel is about
// five times a pointwise one's): its bytes count so many times, and the cut makes the costliest
// program as cheap as it can, so a heavy kernel is compiled in a program of its own.
TEST(CudaPrograms, AHeavyKernelIsCompiledInAProgramOfItsOwn) {
  using codegen::cuda::kKernelMarker;
  using codegen::cuda::kWeightMarker;
  using codegen::cuda::split_programs;
  const std::string head = "// prelude\n";
  auto kernel = [&](int k, size_t bytes, int weight) {
    std::string body = std::string(kKernelMarker) + std::to_string(k) + ": attention";
    if (weight) body += std::string(kWeightMarker) + std::to_string(weight);
    body += "\n";
    return body + std::string(bytes - body.size() - 1, 'x') + "\n";
  };
  // Eight kernels of 1.5 KB, the sixth weighing five times its bytes: 18 KB of cost, so three
  // programs of about 6 KB: [0..4], [5], [6, 7].
  std::string source = head;
  for (int k = 0; k < 8; ++k) source += kernel(k, 1536, k == 5 ? 5 : 0);
  const std::vector<std::string> programs = split_programs(source);
  ASSERT_EQ(programs.size(), 3u);
  EXPECT_EQ(programs[1], head + kernel(5, 1536, 5));
  EXPECT_EQ(programs[2], head + kernel(6, 1536, 0) + kernel(7, 1536, 0));
  // Unweighted, the same bytes are one program (9 KB of kernels, under two programs' worth).
  std::string light = head;
  for (int k = 0; k < 8; ++k) light += kernel(k, 1536, 0);
  EXPECT_EQ(split_programs(light).size(), 1u);
}

// Several cubins travel as one binary and come back as they were; one cubin is itself (an ELF
// file, as every cached cubin was before programs were cut); a container cut short or garbled is
// a zc::Error.
TEST(CudaPrograms, CubinsPackAndUnpackAndABadContainerIsAnError) {
  using codegen::cuda::pack_cubins;
  using codegen::cuda::unpack_cubins;
  const std::vector<uint8_t> elf{0x7f, 'E', 'L', 'F', 1, 2, 3};
  EXPECT_EQ(pack_cubins({elf}), elf);
  EXPECT_EQ(unpack_cubins(elf), std::vector<std::vector<uint8_t>>{elf});
  EXPECT_TRUE(unpack_cubins({}).empty());
  const std::vector<std::vector<uint8_t>> three{
      elf, {0x7f, 'E', 'L', 'F'}, {9, 9, 9, 9, 9, 9, 9, 9, 9}};
  const std::vector<uint8_t> packed = pack_cubins(three);
  EXPECT_EQ(unpack_cubins(packed), three);
  std::vector<uint8_t> short_one(packed.begin(), packed.end() - 5);
  EXPECT_TRUE(test::contains(test::error_message([&] { unpack_cubins(short_one); }), "cubins"));
  std::vector<uint8_t> longer = packed;
  longer.push_back(0);
  EXPECT_TRUE(test::contains(test::error_message([&] { unpack_cubins(longer); }), "garbled"));
  std::vector<uint8_t> count = packed;
  count[8] = 200;  // the count of cubins
  EXPECT_TRUE(test::contains(test::error_message([&] { unpack_cubins(count); }), "garbled"));
}

// A transformer block at GPT-2 small's width builds to several cubins through NVRTC, each an
// ELF file, and every kernel the launches name is in one of them.
TEST(CudaPrograms, ALargeGraphBuildsToSeveralCubinsHoldingEveryKernel) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(5);
  NoGradGuard no_grad;
  auto block = std::make_shared<nn::TransformerBlock>(768, 12, /*causal=*/true);
  block->eval();
  ir::Graph g = capture::capture_module(*block, randn({2, 64, 768}), nullptr, true).graph;
  lower::LowerContext lc;
  lc.keep = backend->native_ops();
  lc.split_long_reductions = backend->splits_long_reductions();
  codegen::CodegenResult code = codegen::codegen(lower::lower(g, lc), *backend);
  const size_t programs = codegen::cuda::split_programs(code.source.text).size();
  ASSERT_GT(programs, 1u) << code.source.text.size() << " bytes of source";
  const std::vector<std::vector<uint8_t>> cubins =
      codegen::cuda::unpack_cubins(backend->build(code.source));
  ASSERT_EQ(cubins.size(), programs);
  for (const auto& c : cubins) EXPECT_TRUE(is_elf(c));
  for (const codegen::cuda::Launch& l : codegen::cuda::launch_plan(code.schedule, code.plan)) {
    if (!l.has_kernel) continue;
    int holders = 0;
    for (const auto& c : cubins) {
      holders += std::search(c.begin(), c.end(), l.symbol.begin(), l.symbol.end()) != c.end();
    }
    EXPECT_EQ(holders, 1) << l.symbol;
  }
}

// A product of a few rows whose weight is read along k (a decode step's linear layer, and its
// attention's scores against a cached key) is one generated kernel that streams the weight:
// rows form, a warp per output column, its epilogue fused; more rows, or a right operand dense
// along n, keep their path.
TEST(CudaCodegen, ProductsOfFewRowsStreamTheirWeight) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(21);
  NoGradGuard no_grad;
  auto plan_graph = [&](const ir::Graph& g) {
    ir::Graph low = lower::lower(g, lower::LowerContext{});
    codegen::CodegenResult code = codegen::codegen(low, *backend);
    EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
    return std::make_pair(code.schedule, codegen::cuda::launch_plan(code.schedule, code.plan));
  };
  auto plan = [&](const test::Program& f, const Tensor& x) { return plan_graph(captured(f, x)); };
  // A cache is a buffer: its transpose is a view of a graph input, read in place.
  struct Cached : nn::Module {
    Tensor cache = register_buffer("cache", randn({4, 131, 64}));
    bool transposed;
    explicit Cached(bool t) : transposed(t) {}
    Tensor forward(const Tensor& x) override {
      return matmul(x, transposed ? cache.transpose(1, 2) : cache);
    }
  };
  auto plan_cached = [&](bool transposed, const Tensor& x) {
    Cached m(transposed);
    return plan_graph(capture::capture_module(m, x, nullptr, true).graph);
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor w = randn({300, 2048}).to(dt), b = randn({300}).to(dt);
    // Long rows (k = 2048): at most kRowsLongMaxM of them; more go to the library.
    for (int64_t m : {1, 2, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " M=" + std::to_string(m));
      auto [s, l] = plan([&](const Tensor& x) { return gelu(linear(x, w, b)) + 1.0; },
                         randn({m, 2048}).to(dt));
      int rows = 0;
      for (size_t k = 0; k < s.kernels.size(); ++k) {
        if (!s.kernels[k].rows) continue;
        ++rows;
        EXPECT_EQ(l[k].grid_x, (300 + codegen::cuda::kRowsWarps - 1) / codegen::cuda::kRowsWarps);
        EXPECT_EQ(l[k].vector, dt == DType::bf16 ? 8 : 4);  // 16 bytes a load
        EXPECT_GT(s.kernels[k].nodes.size(), 1u);           // the bias and gelu joined it
      }
      EXPECT_EQ(rows, m <= codegen::cuda::kRowsLongMaxM ? 1 : 0);
    }
  }
  // A weight broadcast over a batch (x [8, 1, k]: eight products of one row against one weight)
  // would be read once per batch element: not streamed.
  const Tensor wb = randn({300, 2048}).to(DType::bf16);
  auto [sb, lb] =
      plan([&](const Tensor& x) { return linear(x, wb); }, randn({8, 1, 2048}).to(DType::bf16));
  EXPECT_TRUE(std::none_of(sb.kernels.begin(), sb.kernels.end(),
                           [](const codegen::Kernel& k) { return k.rows; }));
  // A k that 16 bytes do not divide: one element at a time.
  const Tensor w3 = randn({300, 2051});
  auto [s3, l3] = plan([&](const Tensor& x) { return linear(x, w3); }, randn({2, 2051}));
  for (size_t k = 0; k < s3.kernels.size(); ++k) {
    if (s3.kernels[k].rows) {
      EXPECT_EQ(l3[k].vector, 1);
    }
  }
  // Short rows: up to eight of them; nine are not streamed.
  const Tensor w = randn({300, 64});
  for (int64_t m : {8, 9}) {
    auto [s9, l9] = plan([&](const Tensor& x) { return linear(x, w); }, randn({m, 64}));
    EXPECT_EQ(std::count_if(s9.kernels.begin(), s9.kernels.end(),
                            [](const codegen::Kernel& k) { return k.rows; }),
              m <= codegen::cuda::kRowsMaxM ? 1 : 0);
  }
  // Scores against a cached key (k dense along the head dim: B = k^T is dense along k), batched.
  auto [sq, lq] = plan_cached(true, randn({4, 8, 64}));
  EXPECT_EQ(std::count_if(sq.kernels.begin(), sq.kernels.end(),
                          [](const codegen::Kernel& k) { return k.rows; }),
            1);
  // Probabilities times cached values: B dense along n, not along k: not streamed.
  auto [sv, lv] = plan_cached(false, randn({4, 8, 131}));
  EXPECT_TRUE(std::none_of(sv.kernels.begin(), sv.kernels.end(),
                           [](const codegen::Kernel& k) { return k.rows; }));
}

// Consecutive kernels that do not depend on each other run as one packed launch (packs.h): a
// decode step's query, key and value products of one input are one kernel; a product of a
// product's result is not packed with it; a member's blocks read their own numbers.
TEST(CudaCodegen, IndependentKernelsArePackedIntoOneLaunch) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(23);
  NoGradGuard no_grad;
  const Tensor wq = randn({256, 512}).to(DType::bf16), wk = randn({64, 512}).to(DType::bf16),
               wv = randn({64, 512}).to(DType::bf16);
  auto plan = [&](const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f) {
    test::MultiFn m(f);
    const std::vector<Tensor> in{randn({1, 512}).to(DType::bf16)};
    ir::Graph low =
        lower::lower(capture::capture_module(m, in, nullptr, true).graph, lower::LowerContext{});
    codegen::CodegenResult code = codegen::codegen(low, *backend);
    EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
    return std::make_pair(code, codegen::cuda::launch_plan(code.schedule, code.plan));
  };
  auto [code, l] = plan([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{linear(in[0], wq), linear(in[0], wk), linear(in[0], wv)};
  });
  ASSERT_EQ(l.size(), 3u);
  ASSERT_TRUE(l[0].pack);
  EXPECT_EQ(l[0].pack->members, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(l[1].packed_into, 0);
  EXPECT_EQ(l[2].packed_into, 0);
  EXPECT_NE(code.source.text.find("zc_pack0("), std::string::npos);
  EXPECT_EQ(code.source.generated_kernels, 3);
  // Chained: the second product reads the first's result.
  const Tensor w2 = randn({64, 256}).to(DType::bf16);
  auto [code2, l2] = plan([&](const std::vector<Tensor>& in) {
    const Tensor h = linear(in[0], wq);
    return std::vector<Tensor>{h, linear(h, w2)};
  });
  ASSERT_EQ(l2.size(), 2u);
  EXPECT_FALSE(l2[0].pack);
  EXPECT_EQ(l2[1].packed_into, -1);
  // A Llama decode step: the q, k and v products are one pack, and so are the rotary passes of
  // q and k, though the buffer plan would put k's rotated values over q's product (dead after
  // q's pass) were they not one run (SchedulePolicy::runs_together).
  models::LlamaConfig c;
  c.vocab_size = 64;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 64;
  auto llama = models::llama(c);
  llama->to(DType::bf16);
  llama->allocate_cache(1, 32);
  const std::vector<Tensor> step{randint(0, 64, {1, 1}), from_values<int64_t>({5}, {1})};
  lower::LowerContext lc;
  lc.keep = backend->native_ops();
  ir::Graph low = lower::lower(capture::capture_module(*llama, step, nullptr, true).graph, lc);
  codegen::CodegenResult step_code = codegen::codegen(low, *backend);
  EXPECT_TRUE(test::cubins_are_elf(backend->build(step_code.source)));
  const std::vector<codegen::cuda::Launch> launches =
      codegen::cuda::launch_plan(step_code.schedule, step_code.plan);
  std::vector<std::vector<codegen::KernelKind>> packs;
  for (const codegen::cuda::Launch& l : launches) {
    if (!l.pack) continue;
    packs.emplace_back();
    for (int32_t m : l.pack->members) packs.back().push_back(launches[m].kind);
  }
  using codegen::KernelKind;
  EXPECT_NE(std::find(packs.begin(), packs.end(), std::vector<KernelKind>(3, KernelKind::matmul)),
            packs.end());
  EXPECT_NE(
      std::find(packs.begin(), packs.end(), std::vector<KernelKind>(2, KernelKind::pointwise)),
      packs.end());
}

TEST(CudaCodegen, KeysNameTheArchitectureAndNvrtc) {
  auto a = sm90();
  SKIP_WITHOUT_NVRTC(*a);
  auto b = codegen::cuda::make_cuda_backend({.arch = "sm_80"});
  EXPECT_EQ(a->key_parts().target, "cuda{arch=sm_90}");
  EXPECT_TRUE(test::contains(a->key_parts().toolchain, "nvrtc{")) << a->key_parts().toolchain;
  std::string graph(64, 'c');
  EXPECT_NE(runtime::compile_keys(graph, *a).graph_key().hex(),
            runtime::compile_keys(graph, *b).graph_key().hex());
  EXPECT_NE(runtime::compile_keys(graph, *a).kernel_key("s").hex(),
            runtime::compile_keys(graph, *b).kernel_key("s").hex());
  // A lowered graph does not depend on the GPU.
  EXPECT_EQ(runtime::compile_keys(graph, *a).lowering_key().hex(),
            runtime::compile_keys(graph, *b).lowering_key().hex());
}

TEST(CudaCodegen, ABundleForAnotherArchitectureIsRefusedWithTheReason) {
  cache::Entry e;
  e.level = cache::Level::kernel;
  e.key = sha256("a cubin");
  e.payload = {1, 2, 3};
  std::vector<cache::BundleItem> items{{e, cache::Provenance{"", "cuda{arch=sm_80}", "nvrtc{x}"}}};
  std::vector<uint8_t> bytes = cache::write_bundle(items);
  // This process builds for its CPU and an sm_90 GPU.
  std::vector<cache::Provenance> here{{"b", "target{isa=native}", "g++"},
                                      {"b", "cuda{arch=sm_90}", "nvrtc{x}"}};
  cache::BundleContents c = cache::read_bundle(bytes, here);
  ASSERT_EQ(c.items.size(), 1u);
  EXPECT_EQ(c.items[0].status, cache::ItemStatus::wrong_target);
  EXPECT_TRUE(test::contains(c.items[0].reason, "cuda{arch=sm_80}")) << c.items[0].reason;
  EXPECT_TRUE(test::contains(c.items[0].reason, "cuda{arch=sm_90}")) << c.items[0].reason;
  // The same architecture is accepted.
  items[0].provenance.target = "cuda{arch=sm_90}";
  EXPECT_EQ(cache::read_bundle(cache::write_bundle(items), here).items[0].status,
            cache::ItemStatus::ok);
}

TEST(CudaBackend, NamedWithoutAGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is here: the backend is usable";
  auto m = models::seed_model(1);
  std::string msg = test::error_message([&] { compile(m, {.backend = "cuda"}); });
  EXPECT_TRUE(test::contains(msg, "backend \"cuda\" cannot run in this process")) << msg;
  EXPECT_FALSE(test::contains(msg, "no zc::Error")) << msg;
}

// Compiled graphs on a GPU.

TEST(CudaCompile, Seed64AndGptMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(7);
  auto seed = models::seed_model(64);
  Tensor x = randn({10, 10});
  Tensor want = (*seed)(x);
  seed->to(Device::cuda(0));
  Tensor got = compile(seed)(x.to(Device::cuda(0)));
  EXPECT_EQ(got.device(), Device::cuda(0));
  EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 1e-4, 1e-5));

  models::GPTConfig cfg{
      .vocab_size = 64, .block_size = 16, .n_layer = 2, .n_head = 2, .d_model = 32};
  auto gpt = models::gpt(cfg);
  gpt->eval();
  Tensor tokens = randint(0, 64, {2, 16});
  Tensor gpt_want = (*gpt)(tokens);
  gpt->to(Device::cuda(0));
  Tensor gpt_got = compile(gpt)(tokens.to(Device::cuda(0)));
  EXPECT_TRUE(allclose(gpt_got.to(Device::cpu()), gpt_want, 1e-3, 1e-4));
}

// A capture on a GPU computes what it makes from constants alone (a mask from positions, as a
// transformer's attention mask is) on the host: the values are constants of the graph either
// way, and on the device each such op's first call compiled a graph of its own (30-40 ms of
// NVRTC each). The compile is the graph's alone, and its values are the eager ones.
TEST(CudaCompile, ValuesMadeFromConstantsAtCaptureCompileNothingOfTheirOwn) {
  ZC_SKIP_WITHOUT_GPU();
  struct Masked : nn::Module {
    Tensor pos;  // a constant: not registered, not traced
    explicit Masked(Device d) : pos(arange(16).to(d)) {}
    Tensor forward(const Tensor& x) override {
      const Tensor keep = cast(lt(pos, 11.0), DType::f32) * cast(ge(pos, 2.0), DType::f32);
      return x * (keep * 2.0 - 1.0) + cast(pos, DType::f32);
    }
  };
  NoGradGuard no_grad;
  manual_seed(17);
  const Tensor x = randn({3, 16});
  Masked on_cpu(Device::cpu());
  const Tensor want = on_cpu(x);
  compiler::reset();
  compiler::reset_stats();
  const Tensor got = compile(std::make_shared<Masked>(Device::cuda(0)))(x.to(Device::cuda(0)));
  EXPECT_EQ(compiler::stats().code_cache_misses, 1);
  EXPECT_EQ(got.device(), Device::cuda(0));
  EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 0, 0));
}

// A tensor of several elements made on the CPU inside a GPU module's forward (a select mask)
// is lifted to an input of the graph: the compiled graph reads it on the GPU (it was passed as
// a host pointer, an illegal address in the kernel), also inside a repeated block.
TEST(CudaCompile, ACpuTensorMadeInForwardIsReadOnTheGpu) {
  ZC_SKIP_WITHOUT_GPU();
  struct Select : nn::Module {
    Tensor forward(const Tensor& x) override {
      const Tensor first = from_values<bool>({true, false}, {2, 1});  // on the CPU
      return where(first, x, -x);
    }
  };
  struct Blocks : nn::Module {
    std::vector<std::shared_ptr<Select>> blocks;
    Blocks() {
      for (int i = 0; i < 3; ++i)
        blocks.push_back(register_module("b" + std::to_string(i), std::make_shared<Select>()));
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (const auto& b : blocks) h = (*b)(h)*2.0;
      return h;
    }
  };
  NoGradGuard no_grad;
  manual_seed(18);
  const Tensor x = randn({2, 5});
  const Tensor row = from_values<double>({1.0, -1.0}, {2, 1}).to(DType::f32);
  const Tensor want = x * row * 8.0;  // three selects, each times 2
  const Tensor got = compile(std::make_shared<Blocks>())(x.to(Device::cuda(0)));
  EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 1e-6, 1e-6));
}

// Products of a few rows on a GPU (the rows form): a linear layer with its epilogue, f32 and bf16,
// sizes that do not divide the warps, and batched scores against cached keys, against the CPU.
TEST(CudaCompile, ProductsOfFewRowsMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  manual_seed(22);
  for (DType dt : {DType::f32, DType::bf16}) {
    for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{{1, 2048, 2048},
                                                              {3, 301, 40},
                                                              {2, 5, 5632},
                                                              {8, 33, 64},
                                                              {1, 32000, 64},
                                                              {2, 7, 2051}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(m) + "x" + std::to_string(k) +
                   " @ " + std::to_string(k) + "x" + std::to_string(n));
      const Tensor w = (randn({n, k}) * (1.0 / std::sqrt(static_cast<double>(k)))).to(dt);
      const Tensor b = randn({n}).to(dt), x = randn({m, k}).to(dt), r = randn({m, n}).to(dt);
      auto f = std::make_shared<test::MultiFn>([](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{gelu(linear(in[0], in[1], in[2])) + in[3]};
      });
      const Tensor want = (*f)({x, w, b, r})[0].to(DType::f32);
      const Device g = Device::cuda(0);
      const Tensor got =
          compile(f)({x.to(g), w.to(g), b.to(g), r.to(g)})[0].to(Device::cpu()).to(DType::f32);
      const double tol = dt == DType::bf16 ? 2e-2 : 1e-4;
      EXPECT_TRUE(allclose(got, want, tol, tol));
    }
  }
  // Keys as an input: their transpose is a view the kernel reads in place.
  const Tensor q = randn({4, 8, 64}), keys = randn({4, 131, 64});
  auto scores = std::make_shared<test::MultiFn>([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1].transpose(1, 2)) * 0.125};
  });
  const Tensor want = (*scores)({q, keys})[0];
  const Tensor got =
      compile(scores)({q.to(Device::cuda(0)), keys.to(Device::cuda(0))})[0].to(Device::cpu());
  EXPECT_TRUE(allclose(got, want, 1e-4, 1e-4));
}

// Packed launches (packs.h) on the GPU: products of one input and pointwise kernels packed
// together, each member's blocks renumbered from 0, compute what they compute alone.
TEST(CudaCompile, PackedLaunchesMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  manual_seed(24);
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor wq = randn({2048, 2048}).to(dt) * 0.02, wk = randn({256, 2048}).to(dt) * 0.02,
                 wv = randn({256, 2048}).to(dt) * 0.02, x = randn({1, 2048}).to(dt),
                 a = randn({3000}).to(dt), b = randn({70000}).to(dt);
    auto f = std::make_shared<test::MultiFn>([](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{linear(in[0], in[1]), linear(in[0], in[2]) + 1.0,
                                 linear(in[0], in[3]), sigmoid(in[4]), in[5] * 3.0};
    });
    const std::vector<Tensor> in{x, wq, wk, wv, a, b};
    const std::vector<Tensor> want = (*f)(in);
    std::vector<Tensor> on_gpu;
    for (const Tensor& t : in) on_gpu.push_back(t.to(Device::cuda(0)));
    const std::vector<Tensor> got = compile(f)(on_gpu);
    ASSERT_EQ(got.size(), want.size());
    const double tol = dt == DType::bf16 ? 2e-2 : 1e-4;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(
          allclose(got[i].to(Device::cpu()).to(DType::f32), want[i].to(DType::f32), tol, tol))
          << "output " << i;
    }
  }
}

// Dims of size 0 on a GPU: a sum over an empty dim stores its identity per row (its rows are
// launched though none has an element), and a kernel over no elements launches nothing.
TEST(CudaCompile, EmptyDimsMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  const std::vector<std::pair<test::Program, Shape>> cases = test::empty_dim_programs();
  for (size_t i = 0; i < cases.size(); ++i) {
    auto m = std::make_shared<test::Fn>(cases[i].first);
    const Tensor x = randn(cases[i].second);
    const Tensor want = (*m)(x);
    const Tensor got = compile(m)(x.to(Device::cuda(0))).to(Device::cpu());
    ASSERT_EQ(got.shape(), want.shape()) << "case " << i;
    EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6)) << "case " << i;
  }
}

// The tiled attention reads its q/k/v tiles 16 bytes at a time and writes four output columns
// at once when the pointers allow; the same compiled kernel over q, k and v that start 4 bytes
// (f32) or 2 bytes (bf16) into their storage reads the same elements one at a time.
TEST(CudaCompile, AttentionVectorReadsAndTheMisalignedPathMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(13);
  const Shape shape{2, 3, 40, 64};
  const int64_t n = shape_numel(shape);
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor flat = randn({3 * n + 1}).to(dt);
    auto qkv = [&](const Tensor& storage, int64_t shift) {
      std::vector<Tensor> out;
      for (int64_t i = 0; i < 3; ++i)
        out.push_back(storage.slice(0, shift + i * n, shift + (i + 1) * n).view(shape));
      return out;
    };
    auto f = [](const std::vector<Tensor>& v) {
      return scaled_dot_product_attention(v[0], v[1], v[2], true);
    };
    Tensor flat_gpu = flat.to(Device::cuda(0));
    auto fast = compile(std::make_shared<test::Fn>(
        [f, k = qkv(flat_gpu, 0)[1], v = qkv(flat_gpu, 0)[2]](const Tensor& q) {
          return f({q, k, v});
        }));
    for (int64_t shift : {0, 1}) {
      std::vector<Tensor> cpu = qkv(flat, shift), gpu = qkv(flat_gpu, shift);
      Tensor got = fast(gpu[0]).to(Device::cpu());
      const double tol = dt == DType::f32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(allclose(got.to(DType::f32),
                           f({cpu[0], qkv(flat, 0)[1], qkv(flat, 0)[2]}).to(DType::f32), tol, tol))
          << "shift " << shift << " " << dtype_name(dt);
    }
  }
}

// A bf16 transformer block on the GPU (bf16 products on the tensor cores, layer_norm reading its
// bf16 parameters in place, the tiled attention over bf16 projections) against the CPU's eager
// bf16 block, within bf16's rounding.
TEST(CudaCompile, ABf16TransformerBlockMatchesTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(9);
  auto block = std::make_shared<nn::TransformerBlock>(128, 2, /*causal=*/true);
  block->eval();
  block->to(DType::bf16);
  Tensor x = randn({2, 40, 128}).to(DType::bf16);
  Tensor want = (*block)(x).to(DType::f32);
  block->to(Device::cuda(0));
  Tensor got = compile(block)(x.to(Device::cuda(0))).to(Device::cpu()).to(DType::f32);
  EXPECT_TRUE(allclose(got, want, 3e-2, 3e-2));
}

// The same compiled kernel over an aligned input (vector steps) and over one that starts 4
// bytes into its storage (the element loop), and with a row broadcast and a bias.
TEST(CudaCompile, VectorStepsAndTheMisalignedElementLoopMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(12);
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor bias = randn({256}).to(dt);
    auto program = [](const Tensor& b) {
      return [b](const Tensor& x) { return gelu(x * 2.0 + b) - x.slice(1, 0, 1); };
    };
    test::Program f = program(bias);
    Tensor flat = randn({8 * 256 + 1}).to(dt);
    Tensor aligned = flat.slice(0, 0, 8 * 256).view({8, 256});
    Tensor shifted = flat.slice(0, 1, 8 * 256 + 1).view({8, 256});
    auto fast = compile(std::make_shared<test::Fn>(program(bias.to(Device::cuda(0)))));
    Tensor flat_gpu = flat.to(Device::cuda(0));
    for (const auto& [name, cpu, gpu] :
         {std::tuple{"aligned", aligned, flat_gpu.slice(0, 0, 8 * 256).view({8, 256})},
          std::tuple{"shifted", shifted, flat_gpu.slice(0, 1, 8 * 256 + 1).view({8, 256})}}) {
      Tensor got = fast(gpu).to(Device::cpu());
      const double tol = dt == DType::f32 ? 1e-5 : 2e-2;
      EXPECT_TRUE(allclose(got.to(DType::f32), f(cpu).to(DType::f32), tol, tol))
          << name << " " << dtype_name(dt);
    }
  }
}

// Column sums (with a lane past the last row, and an element epilogue), a split loss-sized
// mean, and register-tiled generated products (edges that are not multiples of the tile, a
// transposed operand) on the GPU against the CPU.
TEST(CudaCompile, ColumnSumsSplitMeansAndTiledProductsMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(21);
  const Tensor k = randn({2, 3, 70, 97});
  // Each program over the weight k on a device.
  using Make = std::function<test::Program(const Tensor&)>;
  std::vector<std::pair<Make, Tensor>> cases = {
      {[](const Tensor&) -> test::Program {
         return [](const Tensor& x) { return sum(x * 2.0, {0, 1}) + 1.0; };
       },
       randn({7, 33, 2100})},
      {[](const Tensor&) -> test::Program {
         return [](const Tensor& x) { return mean((x - 0.5) * (x - 0.5)); };
       },
       randn({8, 128, 768})},
      {[](const Tensor& w) -> test::Program {
         return [w](const Tensor& q) { return relu(matmul(q.transpose(1, 2), w)); };
       },
       randn({2, 81, 3, 70})},
      {[](const Tensor& w) -> test::Program {
         return [w](const Tensor& q) { return matmul(q.transpose(1, 2).transpose(2, 3), w); };
       },
       randn({2, 70, 3, 66})},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [make, x] = cases[i];
    Tensor want = make(k)(x);
    Tensor got =
        compile(std::make_shared<test::Fn>(make(k.to(Device::cuda(0)))))(x.to(Device::cuda(0)));
    EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 1e-4, 1e-4)) << "case " << i;
  }
}

TEST(CudaCompile, AWarmProcessRunsNoNvrtc) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(8);
  auto m = models::seed_model(4);
  m->to(Device::cuda(0));
  Tensor x = randn({10, 10}).to(Device::cuda(0));
  compile(m)(x);
  compiler::reset();  // drops the loaded executables; the process cache stays
  cache::process_cache().clear_memory();
  compiler::reset_stats();
  compile(m)(x);
  EXPECT_EQ(compiler::stats().compiler_invocations, 0);
}

TEST(CudaCompile, TenThousandCallsOfAModelLeakNothing) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(9);
  NoGradGuard no_grad;  // inference: no saved values held by autograd between calls
  auto m = models::seed_model(2);
  m->to(Device::cuda(0));
  auto fast = compile(m);
  Tensor x = randn({10, 10}).to(Device::cuda(0));
  fast(x);  // runs as it is
  fast(x);  // records its CUDA graph, whose buffers it keeps
  (*m)(x);
  auto calls = [&] {
    for (int i = 0; i < 10000; ++i) {
      Tensor compiled = fast(x);
      if (i % 10 == 0) Tensor eager = (*m)(x);
    }
    cuda::synchronize();
    return cuda::memory_stats(0);
  };
  cuda::synchronize();
  const cuda::MemoryStats before = cuda::memory_stats(0);
  // The first 10,000 calls may settle the cache on a block or two more (another interleaving of
  // the eager and compiled calls' lifetimes); the next 10,000 ask the driver for nothing.
  const cuda::MemoryStats settled = calls();
  const cuda::MemoryStats after = calls();
  EXPECT_EQ(settled.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_LE(settled.device_mallocs - before.device_mallocs, 2u);
  EXPECT_EQ(after.device_mallocs, settled.device_mallocs);
  EXPECT_EQ(after.reserved_bytes, settled.reserved_bytes);
  EXPECT_GE(after.cache_hits - settled.cache_hits, 10000u);
}

TEST(CudaCompile, ABundleWarmsAnEmptyCacheWithoutNvrtc) {
  ZC_SKIP_WITHOUT_GPU();
  const std::string a = test::test_dir("cuda_bundle_a"), b = test::test_dir("cuda_bundle_b");
  const std::string bundle = a + "/seed.zcb";
  test::ProcessRun cold =
      test::run_model("ZC_CACHE_DIR=" + a, "--device cuda --layers 8 --save " + bundle);
  ASSERT_EQ(cold.rc, 0) << cold.out;
  EXPECT_GE(cold.num("compiler", "compiler_invocations"), 1) << cold.out;
  test::ProcessRun warm =
      test::run_model("ZC_CACHE_DIR=" + b, "--device cuda --layers 8 --load " + bundle);
  ASSERT_EQ(warm.rc, 0) << warm.out;
  EXPECT_EQ(warm.num("compiler", "compiler_invocations"), 0) << warm.out;
  EXPECT_EQ(warm.num("load", "refused"), 0) << warm.out;
  EXPECT_EQ(warm.lines["output"], cold.lines["output"]);
}

// CUDA graphs (CompileOptions::cuda_graphs, on by default): recorded at the second call,
// replayed after; results must equal eager whatever happens to the inputs.
struct GraphedSeed {
  std::shared_ptr<nn::Module> m = models::seed_model(8);
  CompiledModule fast;
  GraphedSeed() : fast((m->to(Device::cuda(0)), compile(m))) {}
  // Compiled and eager results on `x` agree.
  bool agrees(const Tensor& x) {
    Tensor got = fast(x), want = (*m)(x);
    return allclose(got.to(Device::cpu()), want.to(Device::cpu()), 1e-5, 1e-6);
  }
};

TEST(CudaGraphs, NewInputDataEveryCallReplaysOneRecording) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(10);
  GraphedSeed s;
  compiler::reset_stats();
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(s.agrees(randn({10, 10}).to(Device::cuda(0)))) << i;
  EXPECT_EQ(compiler::stats().graph_recordings, 1);
  // The first call runs as it is; the second records, and replays its recording like the rest.
  EXPECT_EQ(compiler::stats().graph_replays, 19);
}

TEST(CudaGraphs, InputsFreedAndReallocatedBetweenCalls) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(11);
  GraphedSeed s;
  std::vector<Tensor> cpu;
  for (int i = 0; i < 10; ++i) cpu.push_back(randn({10, 10}));
  std::vector<Tensor> results;
  for (int i = 0; i < 10; ++i) {
    Tensor x = cpu[i].to(Device::cuda(0));  // freed at the end of each iteration
    results.push_back(s.fast(x));
    Tensor junk = full({64, 64}, 7.0).to(Device::cuda(0));  // takes the freed blocks
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(allclose(results[i].to(Device::cpu()),
                         (*s.m)(cpu[i].to(Device::cuda(0))).to(Device::cpu()), 1e-5, 1e-6))
        << i;
  }
}

TEST(CudaGraphs, TwoThreadsAtOnce) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(12);
  GraphedSeed s;
  std::vector<Tensor> xs, want;
  for (int t = 0; t < 2; ++t) {
    xs.push_back(randn({10, 10}).to(Device::cuda(0)));
    want.push_back((*s.m)(xs.back()).to(Device::cpu()));
  }
  s.fast(xs[0]);
  std::vector<int> good(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        good[t] += allclose(s.fast(xs[t]).to(Device::cpu()), want[t], 1e-5, 1e-6);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good[0], 200);
  EXPECT_EQ(good[1], 200);
}

TEST(CudaGraphs, MovedParametersAreRecordedAgain) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(13);
  GraphedSeed s;
  Tensor x = randn({10, 10}).to(Device::cuda(0));
  EXPECT_TRUE(s.agrees(x));
  EXPECT_TRUE(s.agrees(x));
  // Moving the module away and back gives its parameters new storage in the same handles.
  s.m->to(Device::cpu());
  s.m->to(Device::cuda(0));
  compiler::reset_stats();
  EXPECT_TRUE(s.agrees(x));
  EXPECT_EQ(compiler::stats().graph_recordings, 1);
}

TEST(CudaGraphs, OffLaunchesEveryKernel) {
  ZC_SKIP_WITHOUT_GPU();
  auto m = models::seed_model(4);
  m->to(Device::cuda(0));
  auto fast = compile(m, {.cuda_graphs = false});
  Tensor x = randn({10, 10}).to(Device::cuda(0));
  compiler::reset_stats();
  for (int i = 0; i < 5; ++i) fast(x);
  EXPECT_EQ(compiler::stats().graph_recordings, 0);
  EXPECT_EQ(compiler::stats().graph_replays, 0);
}

#else

TEST(CudaCodegen, BuiltWithoutCuda) {
  GTEST_SKIP() << "this build has no CUDA backend (no CUDA toolkit headers were found)";
}

#endif

}  // namespace
}  // namespace zc
