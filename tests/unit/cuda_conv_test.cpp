// Convolutions on a GPU through cuDNN (cuda/cudnn.h): every attribute the ops take (strides,
// padding cuDNN cannot express, dilation, groups, depthwise, a strided input, bias or none) and
// every epilogue (residual, ReLU) in every float type equals the CPU's eager result; a block of
// convolutions compiles with no generated kernel; a network of them serves many batch sizes
// from one size template. Each test says why it skips: no GPU, or no cuDNN on the machine.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "codegen/backend.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "ops/attrs.h"
#include "ops/registry.h"
#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_CUDA
#include "cuda/cudnn.h"
#endif

namespace zc {
namespace {

#ifdef ZC_WITH_CUDA
// cuDNN's convolutions are opt-in (ZC_CUDA_CONV=cudnn); these tests turn them on for their own
// process (each test is one) unless the variable says otherwise.
#define ZC_SKIP_WITHOUT_CUDNN()                                                             \
  do {                                                                                      \
    ZC_SKIP_WITHOUT_GPU();                                                                  \
    std::string why;                                                                        \
    if (!::zc::cuda::find_cudnn(&why)) GTEST_SKIP() << why;                                 \
    ::setenv("ZC_CUDA_CONV", "cudnn", 0);                                                   \
    if (!::zc::cuda::cudnn_convolutions()) GTEST_SKIP() << "ZC_CUDA_CONV is not \"cudnn\""; \
  } while (0)
#else
#define ZC_SKIP_WITHOUT_CUDNN() GTEST_SKIP() << "zc was built without the CUDA backend"
#endif

using ops::Conv2dAttrs;

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dAttrs attrs;
  bool bias;
  bool strided_input = false;  // x a transposed view
};

std::vector<ConvCase> cases() {
  return {
      {"3x3 pad 1 bias", {2, 3, 9, 7}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, true},
      {"stem 7x7 stride 2", {1, 3, 17, 16}, {8, 3, 7, 7}, {2, 2, 3, 3, 3, 3, 1, 1, 1}, true},
      {"1x1 stride 2 no bias", {2, 8, 6, 6}, {4, 8, 1, 1}, {2, 2, 0, 0, 0, 0, 1, 1, 1}, false},
      {"pads (0, 1, 2, 1)", {1, 2, 7, 6}, {3, 2, 2, 3}, {1, 1, 0, 1, 2, 1, 1, 1, 1}, true},
      {"dilation (2, 1)", {1, 2, 9, 8}, {3, 2, 3, 3}, {1, 1, 2, 1, 2, 1, 2, 1, 1}, false},
      {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 2}, true},
      {"depthwise stride 2", {1, 6, 8, 8}, {6, 1, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 6}, true},
      {"strided input", {2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, true, true},
      {"one pixel", {3, 5, 1, 1}, {2, 5, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, true},
  };
}

// The op on `device`, inputs made in f64 on the CPU and converted.
Tensor conv_on(Device device, DType dt, const ConvCase& c, const Conv2dAttrs& a,
               const std::vector<Tensor>& in64) {
  std::vector<Tensor> in;
  for (const Tensor& t : in64) in.push_back(t.to(dt).to(device));
  if (c.strided_input) in[0] = in[0].transpose(2, 3).contiguous().transpose(2, 3);
  return ops::call1(ops::OpId::conv2d, in, a).to(Device::cpu()).to(DType::f64);
}

TEST(CudaConvGpu, EveryConvolutionAndEpilogueEqualsTheCpuInEveryFloatType) {
  ZC_SKIP_WITHOUT_CUDNN();
  manual_seed(41);
  for (const ConvCase& c : cases()) {
    for (int epilogue = 0; epilogue < 4; ++epilogue) {
      Conv2dAttrs a = c.attrs;
      a.residual = epilogue & 1;
      a.relu = epilogue & 2;
      std::vector<Tensor> in;
      in.push_back(randn(c.x, DType::f64));
      in.push_back(randn(c.w, DType::f64));
      if (c.bias) in.push_back(randn({c.w[0]}, DType::f64));
      const Tensor plain = ops::call1(ops::OpId::conv2d, in, Conv2dAttrs(c.attrs));
      if (a.residual) in.push_back(randn(plain.shape(), DType::f64));
      for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        SCOPED_TRACE(std::string(c.name) + ", epilogue " + std::to_string(epilogue) + ", " +
                     std::string(dtype_name(dt)));
        // The CPU computes the same rounded operands in f64.
        std::vector<Tensor> rounded;
        for (const Tensor& t : in) rounded.push_back(t.to(dt).to(DType::f64));
        const Tensor want = ops::call1(ops::OpId::conv2d, rounded, a);
        const Tensor got = conv_on(Device::cuda(0), dt, c, a, in);
        const double tol = dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : 5e-2;
        EXPECT_TRUE(allclose(got, want, tol, tol));
      }
    }
  }
}

struct ConvBlock : nn::Module {
  std::shared_ptr<nn::Conv2d> c1, c2;
  explicit ConvBlock(int64_t ch) {
    c1 = register_module(
        "c1", std::make_shared<nn::Conv2d>(ch, ch, std::vector<int64_t>{3}, std::vector<int64_t>{1},
                                           std::vector<int64_t>{1}));
    c2 = register_module("c2", std::make_shared<nn::Conv2d>(ch, ch, std::vector<int64_t>{1}));
  }
  Tensor forward(const Tensor& x) override { return relu((*c2)(relu((*c1)(x))) + x); }
};

// A block of convolutions whose ReLUs and residual joined them is cuDNN calls alone: lowered
// for the CUDA backend, nothing is left to generate; compiled, it gives the CPU's values, run
// directly and replayed from a CUDA graph.
TEST(CudaConvGpu, ABlockOfConvolutionsGeneratesNoKernel) {
  ZC_SKIP_WITHOUT_CUDNN();
  manual_seed(42);
  auto block = std::make_shared<ConvBlock>(8);
  NoGradGuard no_grad;
  Tensor x = randn({2, 8, 12, 10});
  Tensor want = (*block)(x);
  block->to(Device::cuda(0));
  const Tensor xg = x.to(Device::cuda(0));
  const codegen::Backend& cuda = *codegen::backend_for(Device::Type::cuda);
  capture::Captured c = capture::capture_module(*block, xg, nullptr, true);
  lower::LowerContext ctx;
  ctx.keep = cuda.native_ops();
  const ir::Graph lowered = lower::lower(c.graph, ctx);
  int convs = 0;
  for (const ir::Node& n : lowered.nodes) convs += n.op == ops::OpId::conv2d;
  EXPECT_EQ(convs, 2);
  const codegen::CodegenResult code = codegen::codegen(lowered, cuda);
  EXPECT_EQ(code.source.generated_kernels, 0) << code.source.text;
  EXPECT_EQ(code.source.extern_ops, 2);
  EXPECT_FALSE(cuda.needs_build(code.source));
  // The first call runs the executable, the second records its cuDNN calls into a CUDA graph,
  // later ones replay it: each the CPU's values.
  CompiledModule fast = compile(block);
  for (int call = 0; call < 4; ++call) {
    EXPECT_TRUE(allclose(fast(xg).to(Device::cpu()), want, 1e-4, 1e-4)) << "call " << call;
  }
  const compiler::Stats stats = compiler::stats();
  EXPECT_GT(stats.graph_replays, 0) << "the calls were not replayed from a CUDA graph";
}

// Batch sizes of one network: the second size makes a template whose convolutions are planned
// per size when each size's executable loads; every size equals the CPU.
TEST(CudaConvGpu, ANetworkOfConvolutionsServesManyBatchSizes) {
  ZC_SKIP_WITHOUT_CUDNN();
  manual_seed(43);
  struct Net : nn::Module {
    std::shared_ptr<nn::Conv2d> stem;
    std::shared_ptr<ConvBlock> b1, b2;
    Net() {
      stem = register_module(
          "stem", std::make_shared<nn::Conv2d>(3, 8, std::vector<int64_t>{3},
                                               std::vector<int64_t>{2}, std::vector<int64_t>{1}));
      b1 = register_module("b1", std::make_shared<ConvBlock>(8));
      b2 = register_module("b2", std::make_shared<ConvBlock>(8));
    }
    Tensor forward(const Tensor& x) override {
      return mean((*b2)((*b1)(relu((*stem)(x)))), {2, 3});
    }
  };
  auto net = std::make_shared<Net>();
  NoGradGuard no_grad;
  std::vector<Tensor> xs, wants;
  for (int64_t batch : {2, 3, 5, 4}) {
    xs.push_back(randn({batch, 3, 16, 16}));
    wants.push_back((*net)(xs.back()));
  }
  net->to(Device::cuda(0));
  CompiledModule fast = compile(net);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_TRUE(allclose(fast(xs[i].to(Device::cuda(0))).to(Device::cpu()), wants[i], 1e-4, 1e-4))
        << "batch " << xs[i].size(0);
  }
}

// A conv net with a linear head, for MatmulPrecision::Tf32.
struct ConvHead : nn::Module {
  std::shared_ptr<ConvBlock> block;
  std::shared_ptr<nn::Linear> head;
  ConvHead() {
    block = register_module("block", std::make_shared<ConvBlock>(32));
    head = register_module("head", std::make_shared<nn::Linear>(32, 64));
  }
  Tensor forward(const Tensor& x) override { return (*head)(mean((*block)(x), {2, 3})); }
};

// MatmulPrecision::Tf32 on a GPU: the products (the convolutions' columns and the head) round
// their operands to TF32, so the result moves off Highest's by about 1e-3 and stays within
// TF32's error of the CPU's.
TEST(CudaConvGpu, Tf32ProductsAreCloseButNotEqualToHighest) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(44);
  auto net = std::make_shared<ConvHead>();
  NoGradGuard no_grad;
  Tensor x = randn({4, 32, 16, 16});
  Tensor want = (*net)(x);
  net->to(Device::cuda(0));
  const Tensor xg = x.to(Device::cuda(0));
  CompileOptions tf32;
  tf32.matmul_precision = MatmulPrecision::Tf32;
  Tensor highest = compile(net)(xg).to(Device::cpu());
  Tensor rounded = compile(net, tf32)(xg).to(Device::cpu());
  EXPECT_TRUE(allclose(highest, want, 1e-4, 1e-4));
  EXPECT_TRUE(allclose(rounded, want, 2e-2, 2e-2));
  EXPECT_FALSE(allclose(rounded, highest, 1e-6, 1e-6)) << "TF32 changed nothing";
}

// On the CPU Tf32 is Highest, bit for bit.
TEST(CudaConv, Tf32OnTheCpuIsHighest) {
  manual_seed(45);
  auto net = std::make_shared<ConvHead>();
  NoGradGuard no_grad;
  Tensor x = randn({2, 32, 8, 8});
  CompileOptions tf32;
  tf32.matmul_precision = MatmulPrecision::Tf32;
  EXPECT_TRUE(allclose(compile(net, tf32)(x), compile(net)(x), 0, 0));
}

}  // namespace
}  // namespace zc
