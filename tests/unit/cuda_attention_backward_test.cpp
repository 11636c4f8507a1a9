// The fused attention backward on the CUDA backend: attention_lse and attention_grad (see
// src/ops/attention_grad.cpp) kept whole, one kernel each (attention_lse: the forward's kernel
// without V, attention_tiled.cpp and attention.cpp; the gradients:
// attention_backward_tiled.cpp and attention_backward.cpp).
//  - Without a GPU (CudaCodegen.*): NVRTC builds every form of the kernels for sm_90, and a
//    compiled training step's attention backward is these kernels, with no product or softmax
//    recomputed.
//  - On a GPU (CudaCompile.*, CudaAutograd.*; skipped without one): compiled gradients equal the
//    CPU's, through heads viewed out of [B, T, 3, H, hd] and through operands that start off a
//    16-byte boundary; and the kernels give the same bits on every run.
// The op-by-op comparison of the kernels against the CPU is cuda_ops_attention_grad_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "ir/printer.h"
#include "lower/autodiff.h"
#include "lower/partition.h"
#include "lower/pipeline.h"
#include "ops/dispatch.h"
#include "unit/attention_grad_ops.h"
#include "unit/op_programs.h"
#include "unit/sm90_backend.h"
#include "unit/test_support.h"
#include "zc/cuda.h"
#include "zc/zc.h"

namespace zc {
namespace {

using ops::AttentionWrt;
using ops::OpId;

using test::grad_op;
using test::kEveryWrt;
using test::lse_op;

double default_scale(const Tensor& q) {
  return 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// lse, delta and every gradient of attention(q, k, v) for the output gradient g, as the
// derivative computes them: [lse, dq, dk, dv, dkv].
std::vector<Tensor> backward_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                 bool causal) {
  const double scale = default_scale(q);
  const DType ct = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor lse = lse_op(q, k, causal, scale);
  Tensor o = scaled_dot_product_attention(q, k, v, causal);
  Tensor delta = sum(g.to(ct) * o.to(ct), {-1});
  std::vector<Tensor> out{lse};
  for (AttentionWrt wrt : kEveryWrt) {
    out.push_back(grad_op({q, k, v, g, lse, delta}, causal, scale, wrt));
  }
  return out;
}

#if ZC_WITH_CUDA

using test::sm90;

int count_op(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const ir::Node& node : g.nodes) n += node.op == op;
  return n;
}

// Each form of the kernels, in each float dtype, builds with NVRTC: lse and the four gradients
// of one attention are one kernel each. q and g are heads viewed out of [B, T, H, hd] (strided
// rows). The source shows the form: the tiled form's shared tiles of the other side's rows (32
// x 68 floats up to 64 dims, 16 x 132 up to 128) and of dS (16 or 32 of the block's rows: 32
// when that still makes enough blocks), a partly idle last column group where a dim is not a
// multiple of 64, the rows form's tiles (float4 reads where the dims allow). f64 always takes
// the rows form and reads no float4.
TEST(CudaCodegen, AttentionBackwardBuildsInEveryForm) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  struct Case {
    Shape q, k, v;
    std::vector<const char*> f32_source;  // what the f32 and bf16 source must contain
  };
  const Case cases[] = {
      // 24 heads of 128 rows: 16-row blocks (96 of 32 rows would be too few); 96 of 512: 32.
      {{2, 12, 128, 64}, {2, 12, 128, 64}, {2, 12, 128, 64}, {"zc_ta[32][68]", "zc_ds[16][36]"}},
      {{8, 12, 512, 64}, {8, 12, 512, 64}, {8, 12, 512, 64}, {"zc_ta[32][68]", "zc_ds[32][36]"}},
      {{1, 2, 130, 128}, {1, 2, 130, 128}, {1, 2, 130, 96}, {"zc_ta[16][132]", "zc_tc[16][100]"}},
      {{2, 3, 40, 72},
       {2, 3, 40, 72},
       {2, 3, 40, 40},
       {"if (zc_tx * 4 + 64 < 72)", "if (zc_tx * 4 + 0 < 40)"}},
      {{2, 3, 40, 22}, {2, 3, 50, 22}, {2, 3, 50, 22}, {"zc_a[64][22]", "zc_d < 22"}},
      {{1, 2, 30, 192}, {1, 2, 30, 192}, {1, 2, 30, 192}, {"const float4 zc_t", "zc_a[16][192]"}},
  };
  for (const Case& c : cases) {
    // bf16 reads through the same code as f32 (converting loads): one shape shows it builds.
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
      if (dt == DType::bf16 && &c != &cases[0]) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + " q " + shape_str(c.q) + " v " + shape_str(c.v));
      manual_seed(5);
      Shape bthd{c.q[0], c.q[2], c.q[1], c.q[3]};  // q and g as [B, T, H, hd]
      Shape gs = bthd;
      gs.back() = c.v.back();
      std::vector<Tensor> in{randn(bthd).to(dt), randn(c.k).to(dt), randn(c.v).to(dt),
                             randn(gs).to(dt)};
      capture::Captured cap = capture::capture_function(in, [&] {
        return backward_ops(in[0].transpose(1, 2), in[1], in[2], in[3].transpose(1, 2), true);
      });
      lower::LowerContext lc;
      lc.keep = backend->native_ops();
      ir::Graph low = lower::lower(cap.graph, lc);
      EXPECT_EQ(count_op(low, OpId::attention_lse), 1);
      EXPECT_EQ(count_op(low, OpId::attention_grad), 4);
      codegen::CodegenResult code = codegen::codegen(low, *backend);
      int attention_kernels = 0;
      for (const codegen::Kernel& k : code.schedule.kernels)
        attention_kernels += k.kind == codegen::KernelKind::attention;
      EXPECT_EQ(attention_kernels, 6);  // the forward's, lse's, and one per gradient
      for (const char* part : c.f32_source) {
        if (dt != DType::f64) {
          EXPECT_TRUE(test::contains(code.source.text, part)) << part << "\n" << code.source.text;
        }
      }
      if (dt == DType::f64) {
        EXPECT_FALSE(test::contains(code.source.text, "float4")) << code.source.text;
      }
      EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source))) << code.source.text;
    }
  }
}

// Heads scaled elementwise by parameters: attention is the only thing in the graph that mixes
// positions, so its backward is all the backward's heavy work.
struct ScaledHeads : nn::Module {
  Tensor wq, wk, wv;
  bool causal;
  ScaledHeads(int64_t hd, bool causal, DType dt) : causal(causal) {
    wq = register_parameter("wq", (randn({hd}) + 1.0).to(dt));
    wk = register_parameter("wk", (randn({hd}) + 1.0).to(dt));
    wv = register_parameter("wv", (randn({hd}) + 1.0).to(dt));
  }
  Tensor forward(const Tensor& x) override {  // x [B, H, T, hd]
    return scaled_dot_product_attention(x * wq, x * wk, x * wv, causal);
  }
};

// A compiled training step's backward graph on the CUDA backend keeps the derivative's fused
// ops: one lse, one dq and one dk-and-dv kernel, and no product, softmax or mask recomputed
// (the composite backward had five batched products and two row reductions). The C++ backend
// decomposes the same graph into products.
TEST(CudaCodegen, ACompiledAttentionBackwardIsThreeFusedKernels) {
  auto backend = sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  manual_seed(6);
  ScaledHeads m(64, true, DType::f32);
  ir::Graph captured = capture::capture_module(m, randn({2, 3, 40, 64}), nullptr, true).graph;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < captured.inputs.size(); ++i) {
    if (captured.inputs[i].kind == ir::InputKind::parameter) wrt.push_back(i);
  }
  ASSERT_EQ(wrt.size(), 3u);
  lower::Partition part = lower::partition(captured, lower::joint_graph(captured, wrt));
  lower::LowerContext lc;
  lc.keep = backend->native_ops();
  ir::Graph low = lower::lower(part.backward, lc);
  std::string text = ir::print(low);
  EXPECT_EQ(count_op(low, OpId::attention_lse), 1) << text;
  EXPECT_EQ(count_op(low, OpId::attention_grad), 2) << text;  // q, and k with v
  EXPECT_EQ(count_op(low, OpId::matmul), 0) << text;
  EXPECT_EQ(count_op(low, OpId::amax), 0) << text;
  EXPECT_EQ(count_op(low, OpId::attention), 0) << text;  // the forward's output is saved
  codegen::CodegenResult code = codegen::codegen(low, *backend);
  int attention_kernels = 0;
  for (const codegen::Kernel& k : code.schedule.kernels)
    attention_kernels += k.kind == codegen::KernelKind::attention;
  EXPECT_EQ(attention_kernels, 3);
  EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source))) << code.source.text;

  ir::Graph cpu = lower::lower(part.backward, lower::LowerContext{});
  EXPECT_EQ(count_op(cpu, OpId::attention_grad), 0);
  EXPECT_EQ(count_op(cpu, OpId::attention_lse), 0);
  EXPECT_GT(count_op(cpu, OpId::matmul), 0);
}

// Self-attention with one fused projection whose heads are views of [B, T, 3, H, hd] (the
// layout nn::MultiheadAttention has), so the kernels read strided q, k and v.
struct FusedHeads : nn::Module {
  Tensor w;
  int64_t heads, hd;
  bool causal;
  FusedHeads(int64_t d, int64_t heads, bool causal, DType dt)
      : heads(heads), hd(d / heads), causal(causal) {
    w = register_parameter("w", (randn({3 * d, d}) * (1.0 / std::sqrt(double(d)))).to(dt));
  }
  Tensor forward(const Tensor& x) override {  // x [B, T, d]
    const int64_t b = x.size(0), t = x.size(1);
    Tensor qkv = linear(x, w).reshape({b, t, 3, heads, hd});
    Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
    Tensor v = qkv.select(2, 2).transpose(1, 2);
    return scaled_dot_product_attention(q, k, v, causal).transpose(1, 2).reshape({b, t, -1});
  }
};

struct Wrapped : nn::Module {
  CompiledModule fast;
  explicit Wrapped(CompiledModule f) : fast(std::move(f)) {}
  Tensor forward(const Tensor& x) override { return fast(x); }
};

// Forward and backward compiled on the GPU (the backward's attention through the fused kernels)
// against the CPU's eager gradients, of the weight and of the input, in each form: the tiled
// form with 64 and 128 dims, the rows form with 5 dims and in f64; causal and not; lengths that
// leave partial tiles.
TEST(CudaAutograd, CompiledAttentionGradientsMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t batch, tokens, d, heads;
    bool causal;
    DType dt;
    const char* form;
  };
  const Case cases[] = {
      {2, 37, 128, 2, true, DType::f32, "tiled 32 x 32, head dim 64"},
      {2, 128, 128, 2, false, DType::f32, "tiled 32 x 32, not causal"},
      {1, 130, 256, 2, true, DType::f32, "tiled 16 x 16, head dim 128"},
      {2, 19, 10, 2, true, DType::f32, "rows, head dim 5"},
      {2, 33, 128, 2, true, DType::f64, "rows, f64"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.form) + (c.causal ? ", causal" : "") + ", " +
                 std::to_string(c.tokens) + " tokens");
    manual_seed(41);
    auto cpu = std::make_shared<FusedHeads>(c.d, c.heads, c.causal, c.dt);
    manual_seed(41);
    auto gpu = std::make_shared<FusedHeads>(c.d, c.heads, c.causal, c.dt);
    gpu->to(Device::cuda(0));
    Wrapped compiled(compile(gpu));
    Tensor x = randn({c.batch, c.tokens, c.d}).to(c.dt), r = randn({c.batch, c.tokens, c.d});
    Tensor xc = x.detach().requires_grad_(), xg = x.to(Device::cuda(0)).requires_grad_();
    sum((*cpu)(xc)*r.to(c.dt)).backward();
    sum(compiled(xg) * r.to(c.dt).to(Device::cuda(0))).backward();
    const double tol = c.dt == DType::f64 ? 1e-9 : 1e-3;
    const Tensor& wg = gpu->named_parameters()[0].second.grad();
    ASSERT_TRUE(wg.defined());
    EXPECT_TRUE(
        allclose(wg.to(Device::cpu()), cpu->named_parameters()[0].second.grad(), tol, tol * 0.1))
        << "the weight's gradient";
    ASSERT_TRUE(xg.grad().defined());
    EXPECT_TRUE(allclose(xg.grad().to(Device::cpu()), xc.grad(), tol, tol * 0.1))
        << "the input's gradient";
  }
}

// The kernels read dense rows 16 bytes at a time when their pointers allow it; q, k, v and g
// here are views into one storage starting 0 or 1 element in, so the same compiled kernels take
// their vector loads (shift 0) and their element loads (shift 1). Both give the CPU's values,
// in f32 and in bf16 (converted in registers).
TEST(CudaCompile, AttentionBackwardReadsVectorsAndMisalignedOperands) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(42);
  const Shape shape{2, 3, 40, 64};
  const int64_t n = shape_numel(shape);
  // Everything one output: lse, dq and dk-dv side by side, flattened.
  auto f = [shape, n](const Tensor& x) {
    std::vector<Tensor> part;
    for (int64_t i = 0; i < 4; ++i) part.push_back(x.slice(0, i * n, (i + 1) * n).view(shape));
    std::vector<Tensor> b = backward_ops(part[0], part[1], part[2], part[3], true);
    return cat({b[0].flatten().to(DType::f32), b[1].flatten(), b[4].flatten()}, 0);
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor flat = randn({4 * n + 1}).to(dt);
    Tensor flat_gpu = flat.to(Device::cuda(0));
    auto fast = compile(std::make_shared<test::Fn>(f));
    for (int64_t shift : {0, 1}) {
      Tensor got = fast(flat_gpu.slice(0, shift, shift + 4 * n)).to(Device::cpu());
      Tensor want = f(flat.slice(0, shift, shift + 4 * n));
      EXPECT_TRUE(allclose(got, want, 1e-3, 1e-4)) << "shift " << shift << " " << dtype_name(dt);
    }
  }
}

// The GPT-2 small attention ([8, 12, 128, 64] f32, causal): the gradients equal the CPU's and are
// the same bits on every run (each output element is summed by one thread in a fixed order).
// Each kernel's time on this shape is bench/cuda_ops's (attention_lse_causal,
// attention_grad_q_causal, attention_grad_kv_causal).
TEST(CudaCompile, AttentionBackwardOnTheGptShapeIsDeterministic) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(43);
  const Device gpu = Device::cuda(0);
  const Shape shape{8, 12, 128, 64};
  Tensor q = randn(shape), k = randn(shape), v = randn(shape), g = randn(shape);
  std::vector<Tensor> want = backward_ops(q, k, v, g, true);
  std::vector<Tensor> first = backward_ops(q.to(gpu), k.to(gpu), v.to(gpu), g.to(gpu), true);
  std::vector<Tensor> again = backward_ops(q.to(gpu), k.to(gpu), v.to(gpu), g.to(gpu), true);
  const char* names[] = {"lse", "dq", "dk", "dv", "dkv"};
  for (size_t i = 0; i < want.size(); ++i) {
    Tensor a = first[i].to(Device::cpu()), b = again[i].to(Device::cpu());
    EXPECT_TRUE(allclose(a, want[i], 1e-3, 1e-4)) << names[i];
    EXPECT_EQ(sum(ne(a, b)).item<int64_t>(), 0) << names[i] << " differs from run to run";
  }
}

#endif  // ZC_WITH_CUDA

}  // namespace
}  // namespace zc
