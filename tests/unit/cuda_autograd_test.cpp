// Eager autograd on the GPU: the derivative rules are tensor code, so on CUDA tensors they run
// as CUDA ops (embedding_backward through its decomposition). A small GPT's gradients and an
// AdamW step on the GPU must equal the CPU's. Skipped without a GPU.
#include <gtest/gtest.h>

#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

std::shared_ptr<models::GPT> small_gpt() {
  manual_seed(31);
  models::GPTConfig cfg{
      .vocab_size = 17, .block_size = 16, .n_layer = 2, .n_head = 4, .d_model = 32};
  return models::gpt(cfg);
}

// Gradient of the mean cross entropy of predicting each next token.
Tensor next_token_loss(nn::Module& model, const Tensor& tokens) {
  Tensor logits = model(tokens.slice(1, 0, tokens.size(1) - 1));
  Tensor targets = tokens.slice(1, 1, tokens.size(1));
  return nn::functional::cross_entropy(logits.reshape({-1, 17}), targets.reshape({-1}));
}

TEST(CudaAutograd, GptGradientsAndAnAdamWStepMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  auto cpu = small_gpt();
  auto gpu = small_gpt();
  gpu->to(Device::cuda(0));
  manual_seed(32);
  Tensor tokens = randint(0, 17, {3, 12});

  Tensor loss_cpu = next_token_loss(*cpu, tokens);
  Tensor loss_gpu = next_token_loss(*gpu, tokens.to(Device::cuda(0)));
  EXPECT_NEAR(loss_gpu.item<double>(), loss_cpu.item<double>(), 1e-4);
  loss_cpu.backward();
  loss_gpu.backward();
  auto cpu_params = cpu->named_parameters();
  auto gpu_params = gpu->named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const Tensor& g = gpu_params[i].second.grad();
    ASSERT_TRUE(g.defined()) << gpu_params[i].first;
    EXPECT_EQ(g.device(), Device::cuda(0)) << gpu_params[i].first;
    EXPECT_TRUE(allclose(g.to(Device::cpu()), cpu_params[i].second.grad(), 1e-3, 1e-5))
        << gpu_params[i].first;
  }

  // A large eps: Adam's first step is lr * g / (|g| + eps), about lr * sign(g), which turns the
  // rounding noise of a gradient that is zero in exact arithmetic (the key bias's: it shifts
  // every score of a row alike) into full-size steps of either sign.
  optim::AdamW on_cpu(cpu->parameters(), {.lr = 0.01, .eps = 1e-3});
  optim::AdamW on_gpu(gpu->parameters(), {.lr = 0.01, .eps = 1e-3});
  on_cpu.step();
  on_gpu.step();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TRUE(allclose(gpu_params[i].second.to(Device::cpu()), cpu_params[i].second, 1e-4, 1e-5))
        << gpu_params[i].first;
  }
}

// The compiled backward on the GPU (NVRTC kernels, cuBLASLt products) gives the CPU's
// eager gradients.
TEST(CudaAutograd, CompiledGptGradientsMatchTheCpu) {
  ZC_SKIP_WITHOUT_GPU();
  auto cpu = small_gpt();
  auto gpu = small_gpt();
  gpu->to(Device::cuda(0));
  CompiledModule fast = compile(gpu);
  manual_seed(33);
  Tensor tokens = randint(0, 17, {3, 12});
  struct Compiled : nn::Module {
    CompiledModule fast;
    explicit Compiled(CompiledModule f) : fast(std::move(f)) {}
    Tensor forward(const Tensor& x) override { return fast(x); }
  } compiled(fast);
  Tensor loss_cpu = next_token_loss(*cpu, tokens);
  Tensor loss_gpu = next_token_loss(compiled, tokens.to(Device::cuda(0)));
  EXPECT_NEAR(loss_gpu.item<double>(), loss_cpu.item<double>(), 1e-4);
  loss_cpu.backward();
  loss_gpu.backward();
  auto cpu_params = cpu->named_parameters();
  auto gpu_params = gpu->named_parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    const Tensor& g = gpu_params[i].second.grad();
    ASSERT_TRUE(g.defined()) << gpu_params[i].first;
    EXPECT_TRUE(allclose(g.to(Device::cpu()), cpu_params[i].second.grad(), 1e-3, 1e-5))
        << gpu_params[i].first;
    // The compiled backward's outputs are allocated together (one allocation, adjacent
    // blocks), which lets the fused AdamW read the gradients as one flat view.
    EXPECT_NE(g.unsafe_impl()->storage->group(), 0) << gpu_params[i].first;
    EXPECT_EQ(g.unsafe_impl()->storage->group(),
              gpu_params[0].second.grad().unsafe_impl()->storage->group())
        << gpu_params[i].first;
  }
  // A fused AdamW step over those gradients (a view, no copy) equals the CPU's eager step; the
  // parameters then lie in one flat tensor on the GPU.
  optim::AdamW on_cpu(cpu->parameters(), {.lr = 0.01, .eps = 1e-3});
  optim::AdamW on_gpu(gpu->parameters(), {.lr = 0.01, .eps = 1e-3, .fused = true});
  on_cpu.step();
  on_gpu.step();
  gpu_params = gpu->named_parameters();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TRUE(allclose(gpu_params[i].second.to(Device::cpu()), cpu_params[i].second, 1e-4, 1e-5))
        << gpu_params[i].first;
    EXPECT_EQ(gpu_params[i].second.unsafe_impl()->storage,
              gpu_params[0].second.unsafe_impl()->storage)
        << gpu_params[i].first;
  }
  // A second compiled step (the forward replayed as a CUDA graph over the moved parameters)
  // still matches the CPU.
  cpu->zero_grad();
  on_gpu.zero_grad();
  Tensor loss2_cpu = next_token_loss(*cpu, tokens);
  Tensor loss2_gpu = next_token_loss(compiled, tokens.to(Device::cuda(0)));
  EXPECT_NEAR(loss2_gpu.item<double>(), loss2_cpu.item<double>(), 1e-4);
  loss2_cpu.backward();
  loss2_gpu.backward();
  on_cpu.step();
  on_gpu.step();
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TRUE(allclose(gpu_params[i].second.to(Device::cpu()), cpu_params[i].second, 1e-4, 1e-5))
        << gpu_params[i].first;
  }
}

}  // namespace
}  // namespace zc
