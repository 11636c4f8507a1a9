// Load hints (runtime/records/load_hint.h): the graphs a compile loaded, recorded so that the next
// compile of the same thing loads them before it has worked out that it needs them. The
// hint's bytes round-trip and anything else is refused with the reason; a graph loads from
// the cache by its hash alone into the entry compile_graph would use, and a load that finds
// nothing leaves no entry (a compile waiting on it compiles); a training backward compiled a
// second time loads its graphs through the hint the first recorded, with the same gradients.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "capture/capture.h"
#include "captured_args.h"
#include "ir/canonical.h"
#include "runtime/driver/code_cache.h"
#include "runtime/driver/compile_graph.h"
#include "runtime/records/load_hint.h"
#include "test_support.h"
#include "util/stats.h"
#include "zc/zc.h"

namespace zc {
namespace {

std::string refusal(const std::vector<uint8_t>& bytes) {
  return test::error_message([&] { (void)runtime::decode_load_hint(bytes); });
}

Digest digest_of(uint8_t seed) {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(seed + i);
  return d;
}

TEST(LoadHint, RoundTripsAndRefusesWhatIsNotAHintWithTheReason) {
  const std::vector<Digest> graphs{digest_of(1), digest_of(40), digest_of(1)};
  EXPECT_EQ(runtime::decode_load_hint(runtime::encode_load_hint(graphs)), graphs);
  EXPECT_TRUE(runtime::decode_load_hint(runtime::encode_load_hint({})).empty());

  const std::vector<uint8_t> bytes = runtime::encode_load_hint(graphs);  // u32 version, u64 n
  std::vector<uint8_t> b = bytes;
  b[0] = 7;
  EXPECT_NE(refusal(b).find("load hint: version 7"), std::string::npos) << refusal(b);
  b = bytes;
  b[4 + 7] = 1;  // n's top byte
  EXPECT_NE(refusal(b).find("graphs, at most 4096"), std::string::npos) << refusal(b);
  b = bytes;
  b.pop_back();
  EXPECT_NE(refusal(b).find("load hint"), std::string::npos) << refusal(b);
  b = bytes;
  b.push_back(0);
  EXPECT_NE(refusal(b).find("1 bytes after the last graph"), std::string::npos) << refusal(b);
}

// An executable that only says which compile made it.
struct Marked final : codegen::Executable {
  explicit Marked(int id) : id(id) {}
  int id;
  std::vector<Tensor> run(std::span<const Tensor* const>) const override { return {}; }
  std::string_view backend() const override { return "test"; }
};

TEST(LoadHint, ALoadThatFindsNothingLeavesNoEntryAndItsWaiterCompiles) {
  const std::string key =
      "load-hint-test " +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  // The load owns the entry and finds nothing once the waiter is waiting on it.
  runtime::CompileContext load_ctx, waiter_ctx, other_ctx;
  auto load = std::async(std::launch::async, [&] {
    return runtime::code_cache_get(
        key,
        [&]() -> std::shared_ptr<const codegen::Executable> {
          started.set_value();
          go.wait();
          return nullptr;
        },
        load_ctx);
  });
  started.get_future().wait();
  std::atomic<int> compiles{0};
  auto waiter = std::async(std::launch::async, [&] {
    return runtime::code_cache_get(
        key,
        [&] {
          ++compiles;
          return std::make_shared<Marked>(2);
        },
        waiter_ctx);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it wait on the load
  release.set_value();
  EXPECT_EQ(load.get(), nullptr);
  auto got = std::dynamic_pointer_cast<const Marked>(waiter.get());
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->id, 2);
  EXPECT_EQ(compiles.load(), 1);
  EXPECT_TRUE(runtime::code_cache_contains(key));

  const std::string other = key + " alone";
  EXPECT_EQ(runtime::code_cache_get(
                other, [] { return nullptr; }, other_ctx),
            nullptr);
  EXPECT_FALSE(runtime::code_cache_contains(other));
}

TEST(LoadHint, AGraphLoadsByItsHashIntoTheEntryCompileGraphUses) {
  const auto& cpp = runtime::resolve_backend("cpp", Device::cpu());
  manual_seed(3);
  const std::vector<Tensor> x{randn({5, 7}), randn({7, 3})};
  // A graph of this run alone, so that the cache cannot hold it from an earlier one.
  const double salt =
      static_cast<double>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000003);
  capture::Captured cap = capture::capture_function(
      x, [&] { return std::vector<Tensor>{relu(matmul(x[0], x[1])) * salt}; });
  const Digest h = ir::graph_hash(cap.graph);
  runtime::CompileContext ctx;
  EXPECT_EQ(runtime::load_cached_graph(h, cpp, false, ctx), nullptr);  // never compiled

  const std::vector<const Tensor*> args = test::captured_args(cap, x);
  const Tensor want = runtime::compile_graph(cap.graph, cpp, ctx, h)->run(args)[0];
  compiler::reset();  // a new process, as far as loaded code goes
  const int64_t compiles = compiler::stats().compiler_invocations;
  auto loaded = runtime::load_cached_graph(h, cpp, false, ctx);
  ASSERT_NE(loaded, nullptr);
  EXPECT_TRUE(allclose(loaded->run(args)[0], want, 0, 0));
  EXPECT_EQ(runtime::compile_graph(cap.graph, cpp, ctx, h), loaded);  // the same entry
  EXPECT_EQ(compiler::stats().compiler_invocations, compiles);
}

// Compiled training twice in one process, the code cache emptied between: the second backward
// loads the graphs the first one recorded, before deriving which it needs, and its gradients
// are the first's.
TEST(LoadHint, ASecondTrainingBackwardLoadsTheRecordedGraphs) {
  auto gradients = [](int64_t* preloaded) {
    manual_seed(21);
    auto model = models::seed_model(6);
    CompiledModule fast = compile(model, CompileOptions{.regions = Regions::Auto});
    compiler::reset();
    const int64_t before = zc::stats::read(zc::stats::Counter::graphs_preloaded);
    Tensor loss = nn::functional::mse_loss(fast(randn({4, 10})), randn({4, 10}));
    loss.backward();
    *preloaded = zc::stats::read(zc::stats::Counter::graphs_preloaded) - before;
    std::vector<Tensor> grads;
    for (const Tensor& p : model->parameters()) grads.push_back(p.grad());
    return grads;
  };
  int64_t first = 0, second = 0;
  const std::vector<Tensor> a = gradients(&first), b = gradients(&second);
  // The first run may find a hint of an earlier process with this cache; the second always
  // finds the first's: the layer's backward and the glue's.
  EXPECT_EQ(second, 2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(allclose(a[i], b[i], 0, 0)) << "parameter " << i;
}

}  // namespace
}  // namespace zc
