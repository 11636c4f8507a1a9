// State in compiled graphs: index_copy (the op, eagerly, decomposed and compiled) and a module's
// buffer updated in place inside forward() (a KV cache), captured as an update applied once per
// call after the graph ran, equal to eager call after call; and the refusals (an input updated,
// a graph break after an update, gradients, packages).
#include <gtest/gtest.h>

#include <functional>

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "ops/dispatch.h"
#include "ops/registry.h"
#include "runtime/driver/compile_graph.h"
#include "unit/op_programs.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

// The definition, written out over a [outer, len, inner] view of dim.
Tensor reference_index_copy(const Tensor& self, int64_t dim, const std::vector<int64_t>& index,
                            const Tensor& source) {
  Tensor out = self.to(DType::f64).contiguous();
  Tensor src = source.to(DType::f64).contiguous();
  const Shape& s = self.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= s[d];
  const int64_t len = s[dim], n = static_cast<int64_t>(index.size());
  double* o = out.data<double>();
  const double* x = src.data<double>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t i = n - 1; i >= 0; --i)  // an index given twice keeps its first slice
      for (int64_t b = 0; b < inner; ++b)
        o[(a * len + index[i]) * inner + b] = x[(a * n + i) * inner + b];
  return out;
}

Tensor ids(const std::vector<int64_t>& v) {
  return from_values(v, {static_cast<int64_t>(v.size())});
}

TEST(IndexCopy, EagerDecomposedAndCompiledEqualTheDefinition) {
  manual_seed(3);
  NoGradGuard no_grad;
  struct Case {
    Shape self;
    int64_t dim;
    std::vector<int64_t> index;
  };
  const std::vector<Case> cases{{{6, 4}, 0, {2}},
                                {{6, 4}, 0, {5, 0, 3}},
                                {{2, 7, 3}, 1, {6, 1, 1, 4}},  // 1 twice: the first slice
                                {{2, 3, 5}, 2, {4, 0}},
                                {{3, 5}, -1, {}},
                                {{2, 3, 5}, 1, {1}},
                                {{1, 2, 16, 8}, 2, {9}}};  // a KV cache's decode step
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.self) + " dim " + std::to_string(c.dim) + ", " +
                 std::to_string(c.index.size()) + " indices");
    const int64_t dim = c.dim < 0 ? c.dim + static_cast<int64_t>(c.self.size()) : c.dim;
    Shape src_shape = c.self;
    src_shape[dim] = static_cast<int64_t>(c.index.size());
    const Tensor self = randn(c.self), source = randn(src_shape), index = ids(c.index);
    const Tensor want = reference_index_copy(self, dim, c.index, source);
    const Tensor eager = index_copy(self, c.dim, index, source);
    EXPECT_TRUE(allclose(eager.to(DType::f64), want, 0, 0));
    const std::vector<Tensor> in{self, index, source};
    const std::vector<Tensor> decomposed =
        ops::op_def(ops::OpId::index_copy).decompose(in, ops::DimAttrs{dim});
    EXPECT_TRUE(allclose(decomposed[0].to(DType::f64), want, 0, 0));
    auto m = std::make_shared<test::MultiFn>([c](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{index_copy(x[0], c.dim, x[1], x[2]) * 1.0};
    });
    const Tensor compiled = compile(m)({self, index, source})[0];
    EXPECT_TRUE(allclose(compiled.to(DType::f64), want, 0, 0));
  }
}

// A decode step's update (one index) is one elementwise kernel: no match, argmax or gather.
TEST(IndexCopy, OneIndexIsOneElementwiseKernel) {
  const std::vector<Tensor> in{randn({1, 2, 16, 8}), ids({9}), randn({1, 2, 1, 8})};
  capture::Captured cap = capture::capture_function(
      in, [&] { return std::vector<Tensor>{index_copy(in[0], 2, in[1], in[2]) * 1.0}; });
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  lower::LowerContext lc;
  lc.keep = cpp.native_ops();
  const codegen::CodegenResult code = codegen::codegen(lower::lower(cap.graph, lc), cpp);
  ASSERT_EQ(code.schedule.kernels.size(), 1u);
  EXPECT_EQ(code.schedule.kernels[0].kind, codegen::KernelKind::pointwise);
}

TEST(IndexCopy, BadArgumentsAreErrors) {
  const Tensor self = zeros({4, 3});
  test::expect_error_containing(
      [&] {
        index_copy(self, 0, ids({4}), zeros({1, 3}));
      },
      "index 4 is out of range for dim 0 of size 4");
  test::expect_error_containing(
      [&] {
        index_copy(self, 0, ids({1, 2}), zeros({1, 3}));
      },
      "expected a source [2,3] f32");
  test::expect_error_containing(
      [&] {
        index_copy(self, 0, zeros({1}), zeros({1, 3}));
      },
      "expected a 1-D index of i32 or i64");
  test::expect_error_containing(
      [&] {
        index_copy(self, 2, ids({0}), zeros({1, 3}));
      },
      "out of range");
  const Tensor leaf = zeros({4, 3}).requires_grad_();
  test::expect_error_containing(
      [&] {
        index_copy_(leaf, 0, ids({0}), zeros({1, 3}));
      },
      "wants gradients");
}

// A decoder layer's state, reduced to its use of the cache: the step's keys written at their
// positions, then every position read (masked to those written so far).
struct Cached : nn::Module {
  Tensor cache, w;
  explicit Cached(int64_t len, int64_t d) {
    cache = register_buffer("cache", zeros({len, d}));
    w = register_parameter("w", randn({d, d}));
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor &x = in[0], &pos = in[1];  // x [n, d], pos [n] i64
    index_copy_(cache, 0, pos, matmul(x, w));
    // Reads after the update see it; the scale by the positions seen makes each step's result
    // depend on every row written before.
    const Tensor at = arange(cache.size(0)).to(cache.device());
    const Tensor seen = cast(le(at, amax(pos)), DType::f32).reshape({-1, 1});
    return {sum(cache * seen, {0}) + sum(x, {0})};
  }
};

Tensor positions(int64_t start, int64_t n) {
  return arange(start + n).slice(0, start, start + n);
}

TEST(BufferUpdates, ACompiledCacheUpdateIsAppliedOncePerCallAndEqualsEager) {
  NoGradGuard no_grad;
  manual_seed(5);
  auto eager = std::make_shared<Cached>(16, 8);
  manual_seed(5);  // the same weights
  auto compiled_model = std::make_shared<Cached>(16, 8);
  compiler::reset();
  compiler::reset_stats();
  CompiledModule fast = compile(compiled_model);
  // A prompt of 5 positions, then one position a step: two graphs, each compiled once.
  std::vector<std::pair<int64_t, int64_t>> steps{{0, 5}};
  for (int64_t p = 5; p < 12; ++p) steps.push_back({p, 1});
  for (const auto& [start, n] : steps) {
    SCOPED_TRACE("positions " + std::to_string(start) + ".." + std::to_string(start + n - 1));
    const Tensor x = randn({n, 8});
    const Tensor want = (*eager)({x, positions(start, n)})[0];
    const Tensor got = fast({x, positions(start, n)})[0];
    EXPECT_TRUE(allclose(got, want, 1e-5, 1e-5));
    // The buffer itself, after the call: the update was applied, once.
    EXPECT_TRUE(allclose(compiled_model->cache, eager->cache, 1e-5, 1e-5));
  }
  EXPECT_EQ(compiler::stats().graphs_captured, 2);
  // Rows never written stay zero.
  EXPECT_EQ(amax(abs(compiled_model->cache.slice(0, 12, 16))).item<float>(), 0.0f);
}

// Two updates of one buffer in one call keep the second, and two buffers are both written.
struct TwoBuffers : nn::Module {
  Tensor a = register_buffer("a", zeros({4, 2}));
  Tensor b = register_buffer("b", zeros({3}));
  Tensor forward(const Tensor& x) override {  // x [2]
    index_copy_(a, 0, from_values<int64_t>({1}, {1}), x.reshape({1, 2}));
    index_copy_(a, 0, from_values<int64_t>({1, 3}, {2}), stack({x * 2.0, x * 3.0}));
    index_copy_(b, 0, from_values<int64_t>({2}, {1}), sum(x, {0}).reshape({1}));
    return sum(a, {0});
  }
};

TEST(BufferUpdates, TwoUpdatesOfABufferKeepTheLastAndEveryBufferIsWritten) {
  NoGradGuard no_grad;
  auto eager = std::make_shared<TwoBuffers>();
  auto compiled_model = std::make_shared<TwoBuffers>();
  CompiledModule fast = compile(compiled_model);
  for (int call = 0; call < 3; ++call) {
    const Tensor x = from_values<float>({1.0f + call, -2.0f}, {2});
    EXPECT_TRUE(allclose(fast(x), (*eager)(x), 0, 0));
    EXPECT_TRUE(allclose(compiled_model->a, eager->a, 0, 0));
    EXPECT_TRUE(allclose(compiled_model->b, eager->b, 0, 0));
  }
  EXPECT_EQ(compiled_model->a.select(0, 1).data<float>()[0], 6.0f);  // 2 * x, not x
}

// Repeated blocks, each with its own cache (a decoder's layers): the block compiles once, and
// every layer's cache is its own.
struct Layers : nn::Module {
  std::shared_ptr<nn::ModuleList> layers =
      register_module("layers", std::make_shared<nn::ModuleList>());
  explicit Layers(int n) {
    for (int i = 0; i < n; ++i) layers->push_back(std::make_shared<Cached>(8, 4));
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    Tensor h = in[0];
    for (const auto& l : *layers) h = tanh((*l)({h.reshape({1, 4}) * 0.5, in[1]})[0]);
    return {h};
  }
};

TEST(BufferUpdates, RepeatedBlocksEachUpdateTheirOwnCache) {
  NoGradGuard no_grad;
  manual_seed(9);
  auto eager = std::make_shared<Layers>(4);
  manual_seed(9);  // the same weights
  auto compiled_model = std::make_shared<Layers>(4);
  compiler::reset();
  compiler::reset_stats();
  CompiledModule fast = compile(compiled_model);
  for (int64_t p = 0; p < 6; ++p) {
    const Tensor x = randn({4});
    EXPECT_TRUE(
        allclose(fast({x, positions(p, 1)})[0], (*eager)({x, positions(p, 1)})[0], 1e-5, 1e-5));
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(allclose(std::dynamic_pointer_cast<Cached>((*compiled_model->layers)[i])->cache,
                         std::dynamic_pointer_cast<Cached>((*eager->layers)[i])->cache, 1e-5, 1e-5))
        << "layer " << i;
  }
  EXPECT_EQ(compiler::stats().region_graphs, 1);
}

// On a GPU, the update follows the graph's launches (and its CUDA graph's replays, the
// default): the cache after each call equals the CPU's eager one.
TEST(BufferUpdatesGpu, ACacheOnTheGpuIsUpdatedOncePerCallWhenReplayedToo) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  manual_seed(5);
  auto eager = std::make_shared<Cached>(16, 8);
  manual_seed(5);
  auto on_gpu = std::make_shared<Cached>(16, 8);
  on_gpu->to(Device::cuda(0));
  CompiledModule fast = compile(on_gpu);
  std::vector<std::pair<int64_t, int64_t>> steps{{0, 4}};
  for (int64_t p = 4; p < 12; ++p) steps.push_back({p, 1});
  for (const auto& [start, n] : steps) {
    SCOPED_TRACE("positions " + std::to_string(start) + ".." + std::to_string(start + n - 1));
    const Tensor x = randn({n, 8});
    const Tensor want = (*eager)({x, positions(start, n)})[0];
    const Tensor got = fast({x.to(Device::cuda(0)), positions(start, n).to(Device::cuda(0))})[0];
    EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 1e-4, 1e-5));
    EXPECT_TRUE(allclose(on_gpu->cache.to(Device::cpu()), eager->cache, 1e-4, 1e-5));
  }
}

TEST(BufferUpdates, WhatACompiledGraphCannotUpdateIsAnError) {
  NoGradGuard no_grad;
  // Forward's own input.
  auto input = std::make_shared<test::MultiFn>([](const std::vector<Tensor>& x) {
    index_copy_(x[0], 0, from_values<int64_t>({0}, {1}), x[1]);
    return std::vector<Tensor>{x[0] * 1.0};
  });
  test::expect_error_containing(
      [&] {
        compile(input)({zeros({3, 2}), ones({1, 2})});
      },
      "updates its input tensor in place");
  // A member that is no registered buffer.
  struct Unregistered : nn::Module {
    Tensor state = zeros({3, 2});
    Tensor forward(const Tensor& x) override {
      index_copy_(state, 0, from_values<int64_t>({0}, {1}), x);
      return x * 1.0;
    }
  };
  test::expect_error_containing(
      [&] {
        compile(std::make_shared<Unregistered>())(ones({1, 2}));
      },
      "not a registered buffer");
  // A graph break after the update.
  struct BreakAfter : nn::Module {
    Tensor cache = register_buffer("cache", zeros({3, 2}));
    Tensor forward(const Tensor& x) override {
      index_copy_(cache, 0, from_values<int64_t>({0}, {1}), x);
      return x * sum(cache).item<float>();
    }
  };
  test::expect_error_containing(
      [&] {
        compile(std::make_shared<BreakAfter>())(ones({1, 2}));
      },
      "in-place updates need a whole graph");
  // A package.
  struct Update : nn::Module {
    Tensor cache = register_buffer("cache", zeros({3, 2}));
    Tensor forward(const Tensor& x) override {
      index_copy_(cache, 0, from_values<int64_t>({0}, {1}), x);
      return cache * 1.0;
    }
  };
  test::expect_error_containing(
      [&] {
        package::save(std::make_shared<Update>(), {{ones({1, 2})}},
                      test::test_dir("buffer_updates") + "/p.zcpkg");
      },
      "does not hold such updates");
}

TEST(BufferUpdates, GradientsThroughAnUpdateAreRefused) {
  struct Trainable : nn::Module {
    Tensor cache = register_buffer("cache", zeros({3, 2}));
    Tensor w = register_parameter("w", ones({2}));
    Tensor forward(const Tensor& x) override {
      index_copy_(cache, 0, from_values<int64_t>({0}, {1}), (x * w).detach());
      return sum(x * w);
    }
  };
  // The stored value wants no gradients, the call does: compiled training of an update is
  // refused, naming the way out.
  test::expect_error_containing(
      [&] {
        compile(std::make_shared<Trainable>())(ones({1, 2}));
      },
      "NoGradGuard");
}

}  // namespace
}  // namespace zc
