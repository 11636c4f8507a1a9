// Channels-last convolutions on the CPU: the channels_last pass (convolutions converted, their
// epilogues fused, the graph's values unchanged), oneDNN's kernel against the columns
// decomposition for every attribute and epilogue combination, and the converted weights a
// compiled graph keeps: reused while a weight is unchanged, converted again when it changes,
// one per weight where a repeated block's executable serves several.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "codegen/backends/cpp/backend.h"
#include "codegen/backends/eager/interpreter.h"
#include "codegen/buffer_plan.h"
#include "codegen/pipeline.h"
#include "cpu/onednn_conv.h"
#include "lower/channels_last.h"
#include "lower/pipeline.h"
#include "ops/attrs.h"
#include "ops/registry.h"
#include "runtime/driver/backend_layout.h"
#include "runtime/regions/plan.h"
#include "tensor/assign.h"
#include "zc/zc.h"

namespace zc {
namespace {

using ops::Conv2dAttrs;
using ops::OpId;

Tensor run_graph(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  return codegen::eager::interpret(g, ptrs).at(0);
}

// The captured graph's inputs as the runtime binds them.
std::vector<Tensor> bound_inputs(const capture::Captured& c, const Tensor& x) {
  std::vector<Tensor> inputs;
  for (const capture::InputBinding& b : c.bindings)
    inputs.push_back(b.kind == ir::InputKind::user ? x : b.tensor);
  return inputs;
}

struct Block : nn::Module {
  std::shared_ptr<nn::Conv2d> c1, c2;
  explicit Block(int64_t ch) {
    c1 = register_module(
        "c1", std::make_shared<nn::Conv2d>(ch, ch, std::vector<int64_t>{3}, std::vector<int64_t>{1},
                                           std::vector<int64_t>{1}));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(ch, ch, std::vector<int64_t>{1}));
  }
  Tensor forward(const Tensor& x) override { return relu((*c2)(relu((*c1)(x))) + x); }
};

struct Blocks : nn::Module {
  std::shared_ptr<nn::ModuleList> blocks;
  Blocks(int64_t ch, int n) : Blocks([ch] { return std::make_shared<Block>(ch); }, n) {}
  // n blocks that `make` builds.
  Blocks(const std::function<std::shared_ptr<nn::Module>()>& make, int n) {
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < n; ++i) blocks->push_back(make());
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& b : *blocks) h = (*b)(h);
    return mean(h, {2, 3});
  }
};

TEST(ChannelsLast, ConvolutionsTakeTheirReluAndResidualAndTheValuesStay) {
  manual_seed(3);
  Block block(4);
  Tensor x = randn({2, 4, 9, 7});
  NoGradGuard no_grad;
  capture::Captured c = capture::capture_module(block, x, nullptr, true);
  const ir::Graph g = lower::channels_last(c.graph);
  int plain = 0, with_relu = 0, with_residual = 0;
  for (const ir::Node& n : g.nodes) {
    EXPECT_NE(n.op, OpId::conv2d) << "a convolution was left in [N, C, H, W]";
    EXPECT_NE(n.op, OpId::relu) << "a ReLU was not fused";
    EXPECT_NE(n.op, OpId::add) << "the residual add was not fused";
    if (n.op != OpId::conv2d_nhwc) continue;
    const auto& a = std::get<Conv2dAttrs>(n.attrs);
    ++plain;
    with_relu += a.relu;
    with_residual += a.residual;
  }
  EXPECT_EQ(plain, 2);
  EXPECT_EQ(with_relu, 2);
  EXPECT_EQ(with_residual, 1);
  EXPECT_EQ(g.inputs.size(), c.graph.inputs.size());
  const std::vector<Tensor> inputs = bound_inputs(c, x);
  EXPECT_TRUE(allclose(run_graph(g, inputs), run_graph(c.graph, inputs), 1e-5, 1e-5));
  // Idempotent: what a cache or a package reads back may pass through it again.
  EXPECT_EQ(lower::channels_last(g).nodes.size(), g.nodes.size());
}

// A ReLU6 (one clamp to [0, 6], as ONNX's Clip and MobileNets write it) joins a channels-last
// convolution; a clamp to other bounds does not, nor does a ReLU6 join a convolution in place
// (cuDNN's fused kernel here takes a ReLU only).
struct Relu6Block : nn::Module {
  std::shared_ptr<nn::Conv2d> c1 = register_module(
      "c1", std::make_shared<nn::Conv2d>(4, 4, std::vector<int64_t>{3}, std::vector<int64_t>{1},
                                         std::vector<int64_t>{1}));
  std::shared_ptr<nn::Conv2d> c2 =
      register_module("c2", std::make_shared<nn::Conv2d>(4, 4, std::vector<int64_t>{1}));
  Tensor forward(const Tensor& x) override {
    return clamp((*c2)(clamp((*c1)(x), 0.0, 6.0)), 0.0, 5.0);
  }
};

TEST(ChannelsLast, AConvolutionTakesAReluSixOnlyChannelsLast) {
  manual_seed(4);
  auto block = std::make_shared<Relu6Block>();
  Tensor x = randn({2, 4, 9, 7}) * 8.0;
  NoGradGuard no_grad;
  capture::Captured c = capture::capture_module(*block, x, nullptr, true);
  const std::vector<Tensor> inputs = bound_inputs(c, x);
  for (bool nhwc : {true, false}) {
    SCOPED_TRACE(nhwc ? "channels-last" : "in place");
    const ir::Graph g = nhwc ? lower::channels_last(c.graph) : lower::conv_epilogues(c.graph);
    int clamps = 0, relu6 = 0;
    for (const ir::Node& n : g.nodes) {
      clamps += n.op == OpId::clamp;
      if (n.op == OpId::conv2d_nhwc || n.op == OpId::conv2d)
        relu6 += std::get<Conv2dAttrs>(n.attrs).relu6;
    }
    EXPECT_EQ(relu6, nhwc ? 1 : 0);
    EXPECT_EQ(clamps, nhwc ? 1 : 2);  // the clamp to [0, 5] stays
    EXPECT_TRUE(allclose(run_graph(g, inputs), run_graph(c.graph, inputs), 1e-5, 1e-5));
  }
  // Compiled (oneDNN's post-op) as eager.
  CompiledModule fast = compile(block);
  EXPECT_TRUE(allclose(fast(x), (*block)(x), 1e-5, 1e-5));
}

// conv_epilogues (cuDNN's layout): the same fusion with the convolutions left in [N, C, H, W],
// in every float dtype, and nothing permuted.
TEST(ChannelsLast, EpiloguesJoinConvolutionsInPlaceInEveryFloatType) {
  for (DType dt : {DType::f32, DType::f64, DType::f16}) {
    manual_seed(3);
    Block block(4);
    block.to(dt);
    Tensor x = randn({2, 4, 9, 7}).to(dt);
    NoGradGuard no_grad;
    capture::Captured c = capture::capture_module(block, x, nullptr, true);
    const ir::Graph g = lower::conv_epilogues(c.graph);
    int convs = 0, with_relu = 0, with_residual = 0;
    for (const ir::Node& n : g.nodes) {
      EXPECT_NE(n.op, OpId::conv2d_nhwc) << dtype_name(dt);
      EXPECT_NE(n.op, OpId::permute) << dtype_name(dt);
      EXPECT_NE(n.op, OpId::relu) << "a ReLU was not fused (" << dtype_name(dt) << ")";
      EXPECT_NE(n.op, OpId::add) << "the residual add was not fused (" << dtype_name(dt) << ")";
      if (n.op != OpId::conv2d) continue;
      const auto& a = std::get<Conv2dAttrs>(n.attrs);
      ++convs;
      with_relu += a.relu;
      with_residual += a.residual;
    }
    EXPECT_EQ(convs, 2);
    EXPECT_EQ(with_relu, 2);
    EXPECT_EQ(with_residual, 1);
    const std::vector<Tensor> inputs = bound_inputs(c, x);
    const double tol = dt == DType::f16 ? 1e-2 : 1e-5;
    EXPECT_TRUE(allclose(run_graph(g, inputs).to(DType::f64),
                         run_graph(c.graph, inputs).to(DType::f64), tol, tol))
        << dtype_name(dt);
    EXPECT_EQ(lower::conv_epilogues(g).nodes.size(), g.nodes.size());
  }
}

TEST(ChannelsLast, AnAddThatBroadcastsOrAValueReadTwiceStaysOutsideTheConvolution) {
  struct Net : nn::Module {
    std::shared_ptr<nn::Conv2d> c;
    Net() { c = register_module("c", std::make_shared<nn::Conv2d>(3, 5, std::vector<int64_t>{3})); }
    Tensor forward(const Tensor& x) override {
      Tensor y = (*c)(x);
      Tensor shifted = y + ones({5, 1, 1});  // broadcasts: not a residual
      return relu(shifted) * y;              // y read twice: not fused either
    }
  } net;
  Tensor x = randn({1, 3, 8, 8});
  NoGradGuard no_grad;
  capture::Captured c = capture::capture_module(net, x, nullptr, true);
  const ir::Graph g = lower::channels_last(c.graph);
  for (const ir::Node& n : g.nodes) {
    if (n.op == OpId::conv2d_nhwc) {
      EXPECT_FALSE(std::get<Conv2dAttrs>(n.attrs).residual);
      EXPECT_FALSE(std::get<Conv2dAttrs>(n.attrs).relu);
    }
  }
  const std::vector<Tensor> inputs = bound_inputs(c, x);
  EXPECT_TRUE(allclose(run_graph(g, inputs), run_graph(c.graph, inputs), 1e-5, 1e-5));
}

// Every combination the kernel takes, against the op's decomposition (columns and a product).
TEST(ChannelsLast, OneDnnKernelEqualsTheColumnsForEveryAttributeAndEpilogue) {
  if (!cpu::onednn_conv_available()) GTEST_SKIP() << "this build has no oneDNN convolutions";
  struct Case {
    Shape x, w;  // x channels-last [N, H, W, C]
    Conv2dAttrs a;
  };
  std::vector<Case> cases = {
      {{1, 7, 7, 3}, {8, 3, 3, 3}, {1, 1, 1, 1, 1, 1}},
      {{2, 9, 5, 4}, {6, 4, 1, 1}, {}},
      {{1, 11, 13, 6}, {4, 3, 3, 2}, {2, 1, 0, 1, 1, 0, 1, 1, 2}},    // groups, asymmetric pads
      {{2, 10, 10, 4}, {4, 1, 3, 3}, {1, 2, 2, 2, 2, 2, 2, 2, 4}},    // depthwise, dilation 2
      {{1, 224, 17, 3}, {16, 3, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}},  // a stem
      {{1, 1, 1, 5}, {7, 5, 1, 1}, {}},                               // size 1
      {{1, 30, 29, 16}, {24, 16, 3, 3}, {1, 1, 1, 1, 1, 1}},          // Winograd where wanted
      {{2, 28, 28, 8}, {8, 8, 3, 3}, {}},                             // and without padding
  };
  manual_seed(11);
  for (const Case& c : cases) {
    for (int variant = 0; variant < 12; ++variant) {
      Conv2dAttrs a = c.a;
      const bool bias = variant & 1;
      a.residual = (variant & 2) != 0;
      a.relu = (variant & 4) != 0;
      a.relu6 = variant >= 8;  // inputs scaled so that outputs pass 6
      std::vector<Tensor> in{randn(c.x) * (a.relu6 ? 6.0 : 1.0), randn(c.w) * 0.3};
      if (bias) in.push_back(randn({c.w[0]}));
      const ops::OpDef& def = ops::op_def(OpId::conv2d_nhwc);
      std::vector<ops::TensorMeta> metas;
      for (const Tensor& t : in) metas.push_back(ops::meta_of(t));
      const Shape out_shape =
          def.infer(metas, Conv2dAttrs{a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.pad_bottom,
                                       a.pad_right, a.dilation_h, a.dilation_w, a.groups})
              .at(0)
              .shape;
      if (a.residual) in.push_back(randn(out_shape));
      NoGradGuard no_grad;
      const Tensor want = def.decompose(in, a).at(0);
      Tensor got = Tensor::empty(out_shape, DType::f32);
      cpu::OnednnConv kernel(a);
      kernel.run(in[0], in[1], bias ? &in[2] : nullptr, a.residual ? &in.back() : nullptr, got, {});
      EXPECT_TRUE(allclose(got, want, 1e-4, 1e-4))
          << "x " << shape_str(c.x) << " w " << shape_str(c.w) << " groups " << a.groups << " bias "
          << bias << " residual " << a.residual << " relu " << a.relu << " relu6 " << a.relu6;
      // The op's eager kernel is the same kernel.
      std::vector<ops::TensorMeta> all;
      for (const Tensor& t : in) all.push_back(ops::meta_of(t));
      const std::vector<ops::TensorMeta> outs = ops::infer_outputs(def, all, a);
      EXPECT_TRUE(allclose(def.eager(in, a, outs).at(0), want, 1e-4, 1e-4));
    }
  }
  // Winograd, where wanted, serves a 3x3 stride-1 convolution of at least 28x28 outputs without
  // a residual (the cases above compared it), and no other.
  {
    Tensor x = randn({1, 30, 30, 16}), w = randn({8, 16, 3, 3}) * 0.3;
    Tensor got = Tensor::empty({1, 28, 28, 8}, DType::f32);
    cpu::OnednnConv wide(Conv2dAttrs{});
    wide.run(x, w, nullptr, nullptr, got, {});
    EXPECT_EQ(wide.winograd_runs(), cpu::onednn_winograd_wanted() ? 1 : 0);
    Tensor small = Tensor::empty({1, 14, 14, 8}, DType::f32);
    cpu::OnednnConv narrow(Conv2dAttrs{});
    narrow.run(randn({1, 16, 16, 16}), w, nullptr, nullptr, small, {});
    EXPECT_EQ(narrow.winograd_runs(), 0);
    Conv2dAttrs with_residual;
    with_residual.residual = true;
    cpu::OnednnConv summed(with_residual);
    summed.run(x, w, nullptr, &got, got, {});
    EXPECT_EQ(summed.winograd_runs(), 0);
    cpu::OnednnConv once(Conv2dAttrs{}, cpu::OnednnConv::Use::once);
    once.run(x, w, nullptr, nullptr, got, {});
    EXPECT_EQ(once.winograd_runs(), 0);
  }
  // A strided input (a permuted view) is read as its values, not its memory.
  Tensor nchw = randn({1, 4, 6, 6}), w = randn({3, 4, 3, 3});
  Tensor got = Tensor::empty({1, 4, 4, 3}, DType::f32);
  cpu::OnednnConv(Conv2dAttrs{}).run(nchw.permute({0, 2, 3, 1}), w, nullptr, nullptr, got, {});
  EXPECT_TRUE(allclose(got, conv2d(nchw, w).permute({0, 2, 3, 1}), 1e-4, 1e-4));
}

// oneDNN's max pool (eager and in compiled graphs), in both layouts, against the taps.
TEST(ChannelsLast, OneDnnMaxPoolEqualsTheTapsInBothLayouts) {
  if (!cpu::onednn_conv_available()) GTEST_SKIP() << "this build has no oneDNN convolutions";
  const ops::OpDef& def = ops::op_def(OpId::max_pool2d);
  // Each with whether oneDNN takes it; where it does not, the taps run.
  std::vector<std::pair<ops::Pool2dAttrs, bool>> cases = {
      {{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true}, true},   // a ResNet stem
      {{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}, true},    // ceil mode: past the padding
      {{2, 3, 1, 2, 0, 1, 1, 1, 1, 1, false, true}, true},   // asymmetric window and padding
      {{2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, true}, false},  // the last row left out
      {{2, 2, 1, 1, 0, 0, 0, 0, 2, 1, false, true}, false},  // dilation
  };
  manual_seed(4);
  for (auto [a, onednn] : cases) {
    for (bool cl : {false, true}) {
      a.channels_last = cl;
      const Tensor x = cl ? randn({2, 9, 7, 5}) : randn({2, 5, 9, 7});
      EXPECT_EQ(cpu::onednn_max_pool_applies(x, a), onednn) << ops::attrs_str(a);
      NoGradGuard no_grad;
      const Tensor want = def.decompose({&x, 1}, a).at(0);
      const ops::TensorMeta xm = ops::meta_of(x);
      const std::vector<ops::TensorMeta> outs = ops::infer_outputs(def, {&xm, 1}, a);
      EXPECT_TRUE(allclose(def.eager({&x, 1}, a, outs).at(0), want, 0, 0)) << ops::attrs_str(a);
      // A strided input (a permuted view) is read as its values.
      const Tensor view = cl ? x.permute({0, 3, 1, 2}).contiguous().permute({0, 2, 3, 1}) : x;
      Tensor into = Tensor::empty(outs[0].shape, DType::f32);
      def.eager_into({&view, 1}, a, {&into, 1});
      EXPECT_TRUE(allclose(into, want, 0, 0)) << ops::attrs_str(a);
    }
  }
}

TEST(ChannelsLast, AWeightIsConvertedOncePerIdentity) {
  if (!cpu::onednn_conv_available()) GTEST_SKIP() << "this build has no oneDNN convolutions";
  Tensor x = randn({1, 5, 5, 2}), w = randn({3, 2, 3, 3}), out = Tensor::empty({1, 3, 3, 3});
  const Storage& s = *w.impl_ptr()->storage;
  cpu::OnednnConv conv(Conv2dAttrs{});
  for (int i = 0; i < 3; ++i) conv.run(x, w, nullptr, nullptr, out, {s.uid(), s.version()});
  EXPECT_EQ(conv.conversions(), 1);
  const Tensor before = out.clone();
  assign_values(w, w * 2.0);  // bumps the version
  conv.run(x, w, nullptr, nullptr, out, {s.uid(), s.version()});
  EXPECT_EQ(conv.conversions(), 2);
  EXPECT_TRUE(allclose(out, before * 2.0, 1e-4, 1e-4));
  // Unknown identity: converted on every call, never kept.
  conv.run(x, w, nullptr, nullptr, out, {});
  conv.run(x, w, nullptr, nullptr, out, {});
  EXPECT_EQ(conv.conversions(), 4);
}

// One convolution's primitive, made on this thread, run from eight threads at once with a
// residual and ReLU (a compiled net called from many threads): each equals the decomposition.
// Each thread passes its own scratchpad (cpu::dnnl_kept_attr), and a Winograd convolution's
// blocked input and output are the thread's own: with a residual (direct) and without
// (Winograd where wanted, cpu/onednn_conv.h).
TEST(ChannelsLast, AConvolutionRunsFromManyThreadsAtOnce) {
  if (!cpu::onednn_conv_available()) GTEST_SKIP() << "this build has no oneDNN convolutions";
  manual_seed(12);
  for (const bool residual : {true, false}) {
    SCOPED_TRACE(residual ? "with a residual" : "without a residual");
    Conv2dAttrs a{1, 1, 1, 1, 1, 1, 1, 1, 1};
    a.residual = residual;
    a.relu = true;
    const Tensor w = randn({64, 64, 3, 3}) * 0.05, bias = randn({64});
    const ops::OpDef& def = ops::op_def(OpId::conv2d_nhwc);
    constexpr int kThreads = 8;
    std::vector<Tensor> xs, rs, want;
    NoGradGuard no_grad;
    for (int t = 0; t < kThreads; ++t) {
      xs.push_back(randn({1, 28, 28, 64}));
      rs.push_back(randn({1, 28, 28, 64}));
      const std::vector<Tensor> in = residual ? std::vector<Tensor>{xs.back(), w, bias, rs.back()}
                                              : std::vector<Tensor>{xs.back(), w, bias};
      want.push_back(def.decompose(in, a).at(0));
    }
    cpu::OnednnConv conv(a);
    const Tensor* r0 = residual ? &rs[0] : nullptr;
    Tensor first = Tensor::empty({1, 28, 28, 64}, DType::f32);
    conv.run(xs[0], w, &bias, r0, first, {});
    EXPECT_TRUE(allclose(first, want[0], 1e-4, 1e-4));
    std::vector<int> wrong(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < 10; ++r) {
          Tensor out = Tensor::empty({1, 28, 28, 64}, DType::f32);
          conv.run(xs[t], w, &bias, residual ? &rs[t] : nullptr, out, {});
          if (!allclose(out, want[t], 1e-4, 1e-4)) ++wrong[t];
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t << " of 10 runs";
    EXPECT_EQ(conv.winograd_runs(), !residual && cpu::onednn_winograd_wanted() ? 81 : 0);
  }
}

// A compiled model whose weights change in place (an optimizer step, a loaded checkpoint)
// computes with the new ones; a repeated block's one executable keeps each instance's weights.
TEST(ChannelsLast, CompiledConvolutionsFollowTheirWeightsAcrossCallsAndBlocks) {
  manual_seed(5);
  auto net = std::make_shared<Blocks>(4, 3);
  net->eval();
  NoGradGuard no_grad;
  Tensor x = randn({2, 4, 10, 10});
  compiler::reset();
  compiler::reset_stats();
  CompiledModule fast = compile(net);
  EXPECT_TRUE(allclose(fast(x), (*net)(x), 1e-4, 1e-4));
  EXPECT_EQ(compiler::stats().region_graphs, 1);  // one executable serves the three blocks
  EXPECT_TRUE(allclose(fast(x), (*net)(x), 1e-4, 1e-4));
  for (auto& [name, p] : net->named_parameters()) {
    if (name.find("blocks.1.c1.weight") != std::string::npos) assign_values(p, p * -0.5);
  }
  EXPECT_TRUE(allclose(fast(x), (*net)(x), 1e-4, 1e-4));
}

// Where the residual dies at its convolution (each block's input after the first: a value of
// the arena), the convolution's output is placed over it and no copy of the residual is made;
// where it is read later, or is the graph's input, the two keep their own bytes. The values
// stay those of eager either way.
struct ReadAgain : nn::Module {
  std::shared_ptr<nn::Conv2d> c;
  ReadAgain() {
    c = register_module("c", std::make_shared<nn::Conv2d>(4, 4, std::vector<int64_t>{1}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*c)(x));
    Tensor y = relu((*c)(h) + h);  // h is read again below
    return mean(y + h, {2, 3});
  }
};

// Blocks whose residual is computed inside them (a 1x1 convolution of the input, as a ResNet
// stage's first block), each ending in its part's output.
struct DownBlock : nn::Module {
  std::shared_ptr<nn::Conv2d> c1, c2, d;
  DownBlock() {
    c1 = register_module("c1", std::make_shared<nn::Conv2d>(4, 8, std::vector<int64_t>{1}));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(8, 4, std::vector<int64_t>{1}));
    d = register_module("d", std::make_shared<nn::Conv2d>(4, 4, std::vector<int64_t>{1}));
  }
  Tensor forward(const Tensor& x) override { return relu((*c2)(relu((*c1)(x))) + (*d)(x)); }
};

TEST(ChannelsLast, AConvolutionTakesOverTheBytesOfAResidualThatDiesThere) {
  manual_seed(7);
  NoGradGuard no_grad;
  auto backend = codegen::cpp::make_cpp_backend({});
  auto over_residual = [&](nn::Module& m, const Tensor& x, int* with_residual) {
    capture::Captured c = capture::capture_module(m, x, nullptr, true);
    lower::LowerContext ctx;
    ctx.keep = backend->native_ops();
    const ir::Graph g = lower::lower(runtime::in_backend_layout(c.graph, *backend), ctx);
    const codegen::CodegenResult r = codegen::codegen(g, *backend, false);
    int taken = 0;
    *with_residual = 0;
    for (const ir::Node& n : r.schedule.graph.nodes) {
      if (n.op != OpId::conv2d_nhwc || !std::get<Conv2dAttrs>(n.attrs).residual) continue;
      ++*with_residual;
      const auto& out = r.plan.slot[n.outputs[0]];
      const auto& res = r.plan.slot[n.inputs.back()];
      const auto& in = r.plan.slot[n.inputs[0]];
      if (out.kind == codegen::BufferKind::arena && res.kind == codegen::BufferKind::arena &&
          out.index == res.index) {
        ++taken;
        EXPECT_FALSE(in.kind == codegen::BufferKind::arena && in.index == out.index)
            << "a convolution writes over the input it reads";
      }
    }
    return taken;
  };
  Blocks blocks(4, 3);
  blocks.eval();
  Tensor x = randn({2, 4, 10, 10});
  int residuals = 0;
  EXPECT_EQ(over_residual(blocks, x, &residuals), 2);  // the first block's residual is the input
  EXPECT_EQ(residuals, 3);
  ReadAgain again;
  again.eval();
  EXPECT_EQ(over_residual(again, x, &residuals), 0);
  EXPECT_EQ(residuals, 1);
  // A block on its own (a part of a hierarchical graph): its input is the residual, so a
  // caller whose input dies there may give the output the input's buffer
  // (Executable::outputs_over_inputs), and a residual computed inside a block whose last
  // convolution writes the graph's output is written there in the first place.
  // The schedule and plan of each repeated block of m, as the hierarchical compile makes them.
  auto block_code = [&](nn::Module& m) {
    capture::Captured c = capture::capture_module(m, x, nullptr, true);
    const runtime::RegionPlan regions =
        runtime::plan_regions(runtime::in_backend_layout(c.graph, *backend), {});
    std::vector<codegen::CodegenResult> out;
    for (const runtime::GraphPart& part : regions.parts) {
      if (!part.outlined) continue;
      lower::LowerContext ctx;
      ctx.keep = backend->native_ops();
      out.push_back(codegen::codegen(lower::lower(part.sub.graph, ctx), *backend, false));
    }
    return out;
  };
  {
    int calls = 0;
    for (const codegen::CodegenResult& r : block_code(blocks)) {
      ++calls;
      const auto pairs = codegen::outputs_over_inputs(r.schedule, r.plan);
      ASSERT_EQ(pairs.size(), 1u);  // the block's one input is its residual
      EXPECT_EQ(pairs[0], std::make_pair(size_t{0}, size_t{0}));
    }
    EXPECT_GE(calls, 2);  // the first block reads the graph's input in [N, C, H, W]
  }
  Blocks down([] { return std::make_shared<DownBlock>(); }, 3);
  down.eval();
  {
    int written_in_output = 0;
    for (const codegen::CodegenResult& r : block_code(down)) {
      for (const ir::Node& n : r.schedule.graph.nodes) {
        if (n.op != OpId::conv2d_nhwc || !std::get<Conv2dAttrs>(n.attrs).residual) continue;
        const auto& out = r.plan.slot[n.outputs[0]];
        const auto& res = r.plan.slot[n.inputs.back()];
        written_in_output += out.kind == codegen::BufferKind::output &&
                             res.kind == codegen::BufferKind::output && res.index == out.index;
      }
    }
    EXPECT_GE(written_in_output, 2);
  }
  // One flat graph, and blocks called by a hierarchical executable that passes a dying input's
  // buffer as the block's output.
  for (Regions regions : {Regions::None, Regions::Auto}) {
    for (nn::Module* m : std::vector<nn::Module*>{&blocks, &again, &down}) {
      compiler::reset();
      CompiledModule fast = compile(std::shared_ptr<nn::Module>(m, [](nn::Module*) {}),
                                    CompileOptions{.regions = regions});
      EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-4, 1e-4));
      EXPECT_TRUE(allclose(fast(x), (*m)(x), 1e-4, 1e-4));  // the residual is whole again
    }
  }
}

}  // namespace
}  // namespace zc
