// nn::checkpoint (zc/nn.h): a checkpointed block gives the gradients the block gives, eagerly
// (its backward runs it again) and compiled (the partitioner recomputes its region), and a
// compiled call saves less for its backward.
#include <gtest/gtest.h>

#include "autograd/node.h"
#include "lower/partition.h"
#include "test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

std::shared_ptr<nn::Module> block() {
  auto b = std::make_shared<nn::Sequential>();
  b->push_back(std::make_shared<nn::Linear>(32, 64));
  b->push_back(std::make_shared<nn::GELU>());
  b->push_back(std::make_shared<nn::Linear>(64, 32));
  b->push_back(std::make_shared<nn::ReLU>());
  return b;
}

// Four blocks, each checkpointed or not; the same weights either way (seeded alike).
std::shared_ptr<nn::Sequential> model(bool checkpointed) {
  manual_seed(71);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    std::shared_ptr<nn::Module> b = block();
    m->push_back(checkpointed ? nn::checkpoint(b) : b);
  }
  return m;
}

// The parameters' gradients and the input's from one mse loss through `call`.
std::vector<Tensor> gradients(nn::Module& m, const std::function<Tensor(const Tensor&)>& call) {
  manual_seed(72);
  Tensor x = randn({16, 32}).requires_grad_(true);
  Tensor target = randn({16, 32});
  m.zero_grad();
  nn::functional::mse_loss(call(x), target).backward();
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad());
  out.push_back(x.grad());
  return out;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << i;
    EXPECT_TRUE(allclose(got[i], want[i], 1e-6, 1e-6)) << "gradient " << i;
  }
}

TEST(Checkpoint, EagerGradientsAreTheBlocksAndItsGraphIsOneNode) {
  auto plain = model(false), ckpt = model(true);
  const std::vector<Tensor> want = gradients(*plain, [&](const Tensor& x) { return (*plain)(x); });
  expect_close(gradients(*ckpt, [&](const Tensor& x) { return (*ckpt)(x); }), want);
  // The block's ops recorded nothing: its output's producer is the checkpoint's one node.
  Tensor y = (*(*ckpt)[0])(randn({2, 32}).requires_grad_(true));
  ASSERT_TRUE(autograd::meta_of(y).grad_fn);
  EXPECT_EQ(autograd::meta_of(y).grad_fn->name(), "checkpoint(zc::nn::Sequential)");
  // Under no_grad it is the block.
  NoGradGuard off;
  EXPECT_FALSE((*(*ckpt)[0])(randn({2, 32})).requires_grad());
}

TEST(Checkpoint, CompiledGradientsAreTheBlocksAndTheCallSavesLess) {
  EXPECT_EQ(nn::Checkpoint(block()).type_name(), lower::kCheckpointRegion);
  auto plain = model(false), ckpt = model(true);
  const std::vector<Tensor> want = gradients(*plain, [&](const Tensor& x) { return (*plain)(x); });
  std::vector<int64_t> saved;
  for (const auto& m : {plain, ckpt}) {
    CompiledModule fast = compile(m);
    const compiler::Stats before = compiler::stats();
    expect_close(gradients(*m, [&](const Tensor& x) { return fast(x); }), want);
    saved.push_back(compiler::stats().saved_bytes - before.saved_bytes);
  }
  EXPECT_LT(saved[1], saved[0]);
}

// A GPT's blocks wrapped in place (ModuleList::set): attention, layer norms and products run
// again in the backward; the gradients are the unwrapped model's.
TEST(Checkpoint, AGptWithEveryBlockCheckpointedKeepsItsGradients) {
  manual_seed(73);
  auto gpt =
      models::gpt({.vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .d_model = 16});
  const Tensor tokens = randint(0, 13, {2, 8}), targets = randint(0, 13, {16});
  auto grads = [&](const std::function<Tensor(const Tensor&)>& call) {
    gpt->zero_grad();
    nn::functional::cross_entropy(call(tokens).reshape({-1, 13}), targets).backward();
    std::vector<Tensor> out;
    for (const Tensor& p : gpt->parameters()) out.push_back(p.grad());
    return out;
  };
  const std::vector<Tensor> want = grads([&](const Tensor& x) { return (*gpt)(x); });
  for (size_t i = 0; i < gpt->blocks->size(); ++i) {
    gpt->blocks->set(i, nn::checkpoint((*gpt->blocks)[i]));
  }
  EXPECT_EQ(gpt->named_parameters()[2].first.find("blocks.0.module."), 0u);
  expect_close(grads([&](const Tensor& x) { return (*gpt)(x); }), want);
  CompiledModule fast = compile(gpt);
  expect_close(grads([&](const Tensor& x) { return fast(x); }), want);
  EXPECT_TRUE(
      test::contains(test::error_message([&] { gpt->blocks->set(9, nn::checkpoint(block())); }),
                     "index 9 is out of range"));
}

TEST(Checkpoint, ANullModuleIsAnError) {
  EXPECT_TRUE(
      test::contains(test::error_message([] { nn::checkpoint(nullptr); }), "the module is null"));
}

}  // namespace
}  // namespace zc
