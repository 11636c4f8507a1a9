// Weight-only int8 (zc::quantize, nn::Linear::quantize_int8): the int8 values and per-channel
// scales against their definition, a quantized layer's output eagerly and compiled, the CUDA
// backend's product reading the int8 weight itself (planned without a GPU, run with one), and
// the refusals. The fixtures' logits and greedy tokens are in pretrained_fixtures_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "capture/capture.h"
#include "codegen/pipeline.h"
#include "lower/pipeline.h"
#include "unit/op_programs.h"
#include "unit/test_support.h"
#include "zc/zc.h"

#if ZC_WITH_CUDA
#include "unit/sm90_backend.h"
#endif

namespace zc {
namespace {

TEST(Quantize, ALinearLayersWeightBecomesInt8WithAScalePerOutputChannel) {
  manual_seed(31);
  auto layer = std::make_shared<nn::Linear>(64, 48);
  const Tensor w = layer->weight.detach().clone();
  const Tensor x = randn({5, 64});
  NoGradGuard no_grad;
  const Tensor before = (*layer)(x);
  const QuantizeReport r = quantize(*layer);
  EXPECT_EQ(r.layers, 1);
  EXPECT_EQ(r.bytes_before, 64 * 48 * 4);
  EXPECT_EQ(r.bytes_after, 64 * 48 + 48 * 4);
  ASSERT_TRUE(layer->quantized());
  EXPECT_EQ(layer->weight.dtype(), DType::i8);
  EXPECT_EQ(layer->weight_scale.shape(), (Shape{48}));
  EXPECT_EQ(layer->dtype(), DType::f32);
  // Registered as buffers: no longer trained, moved and saved with the module.
  EXPECT_EQ(layer->parameters().size(), 1u);  // the bias
  EXPECT_EQ(layer->named_buffers().size(), 2u);
  // The definition, row by row: s = max|w| / 127, q = round(w / s).
  const Tensor q = layer->weight.to(DType::f32), s = layer->weight_scale;
  for (int64_t o = 0; o < 48; ++o) {
    const Tensor row = w.select(0, o);
    const double scale = amax(abs(row)).item<float>() / 127.0;
    EXPECT_NEAR(s.select(0, o).item<float>(), scale, 1e-6 * scale);
    EXPECT_TRUE(allclose(q.select(0, o), round(row / s.select(0, o)), 0, 0));
  }
  EXPECT_LE(amax(abs(q)).item<float>(), 127.0f);
  // Each weight within half a step of its scale: the output moves little.
  const Tensor after = (*layer)(x);
  EXPECT_TRUE(
      allclose(after, matmul(x, (q * s.unsqueeze(1)).transpose(0, 1)) + layer->bias, 1e-5, 1e-5));
  EXPECT_LT(amax(abs(after - before)).item<float>(), 0.02 * amax(abs(before)).item<float>());
  // Compiled on the CPU: the same values.
  EXPECT_TRUE(allclose(compile(layer)(x), after, 1e-5, 1e-5));
}

TEST(Quantize, WhatCannotBeQuantizedIsAnError) {
  auto model = models::llama([] {
    models::LlamaConfig c;
    c.vocab_size = 64, c.hidden_size = 32, c.intermediate_size = 48, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.max_position_embeddings = 32;
    return c;
  }());
  test::expect_error_containing([&] { quantize(*model, {.skip = {"lm_hed"}}); },
                                "skip names 'lm_hed', which is not an nn::Linear");
  const QuantizeReport r = quantize(*model, {.skip = {"lm_head"}});
  EXPECT_EQ(r.layers, 2 * 7);             // q, k, v, o, gate, up, down per layer; the head skipped
  EXPECT_EQ(quantize(*model).layers, 1);  // the head now; the rest are quantized already
  auto layer = std::make_shared<nn::Linear>(4, 4);
  layer->quantize_int8();
  test::expect_error_containing([&] { layer->quantize_int8(); }, "already quantized");
}

#if ZC_WITH_CUDA
// On the CUDA backend an int8 layer's product reads the int8 weight itself: at a decode step's
// one row the streamed-rows kernel, its scales fused; no kernel converts the weight first.
TEST(QuantizeCuda, TheProductReadsTheInt8Weight) {
  auto backend = test::sm90();
  SKIP_WITHOUT_NVRTC(*backend);
  NoGradGuard no_grad;
  for (int64_t m : {1, 64}) {
    auto layer = std::make_shared<nn::Linear>(2048, 256, false);
    layer->to(DType::bf16);
    layer->quantize_int8();
    const Tensor x = randn({m, 2048}).to(DType::bf16);
    ir::Graph g = capture::capture_module(*layer, x, nullptr, true).graph;
    codegen::CodegenResult code =
        codegen::codegen(lower::lower(g, lower::LowerContext{}), *backend);
    ASSERT_EQ(code.schedule.kernels.size(), 1u) << "M=" << m;
    const codegen::Kernel& k = code.schedule.kernels[0];
    EXPECT_EQ(k.kind, codegen::KernelKind::matmul);
    EXPECT_EQ(k.rows, m == 1);
    EXPECT_FALSE(k.library);
    EXPECT_TRUE(test::contains(code.source.text, "const int8_t* __restrict__"));
    EXPECT_TRUE(test::cubins_are_elf(backend->build(code.source)));
  }
}

TEST(QuantizeCuda, CompiledInt8LayersMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  manual_seed(32);
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 2048, 2048}, {2, 300, 5632}, {64, 256, 2048}, {1, 7, 40}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + " @ " + std::to_string(n));
    auto layer = std::make_shared<nn::Linear>(k, n);
    layer->to(DType::bf16);
    layer->quantize_int8();
    const Tensor x = randn({m, k}).to(DType::bf16);
    const Tensor want = (*layer)(x).to(DType::f32);
    layer->to(Device::cuda(0));
    const Tensor got = compile(layer)(x.to(Device::cuda(0))).to(Device::cpu()).to(DType::f32);
    EXPECT_TRUE(allclose(got, want, 2e-2, 2e-2));
  }
}
#endif

}  // namespace
}  // namespace zc
