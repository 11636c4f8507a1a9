// One compiled module called from many threads at once, with new input shapes arriving while
// the calls run (recompiles: size templates under Dynamic::Auto, background compiles under
// async_compile). Every result is checked against the eager result of its input. Shared by the
// unit tests and the ThreadSanitizer build (tests/threads).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zc/zc.h"

namespace zc::test {

struct ThreadsCase {
  int mismatches = 0;
  int errors = 0;
  std::string first_error;
};

struct ThreadsMlp : nn::Module {
  std::shared_ptr<nn::Linear> a, b;
  ThreadsMlp() {
    a = register_module("a", std::make_shared<nn::Linear>(16, 32));
    b = register_module("b", std::make_shared<nn::Linear>(32, 16));
  }
  Tensor forward(const Tensor& x) override { return (*b)(gelu((*a)(x))) + x; }
};

// `threads` threads make `calls` calls each; thread t starts on batch size sizes[t % 4] and
// meets a new size every calls/4 calls, so the first calls of most sizes race each other.
inline ThreadsCase run_threads_case(int threads, int calls, bool async) {
  NoGradGuard no_grad;
  auto m = std::make_shared<ThreadsMlp>();
  const std::vector<int64_t> sizes = {2, 3, 5, 8, 13};
  std::vector<Tensor> inputs, wants;
  for (int64_t n : sizes) {
    inputs.push_back(randn({n, 16}));
    wants.push_back((*m)(inputs.back()));
  }
  // Nothing compiled earlier in this process serves the module: its graphs compile (or load)
  // while the threads call it.
  compiler::reset();
  CompileOptions options;
  options.async_compile = async;
  CompiledModule fast = compile(m, options);
  ThreadsCase out;
  std::mutex mu;
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      NoGradGuard thread_no_grad;  // grad mode is per thread
      for (int i = 0; i < calls; ++i) {
        size_t k = (static_cast<size_t>(t) + static_cast<size_t>(i / std::max(1, calls / 4))) %
                   sizes.size();
        try {
          if (!allclose(fast(inputs[k]), wants[k], 1e-4, 1e-5)) ++mismatches;
        } catch (const std::exception& e) {
          if (errors++ == 0) {
            std::lock_guard lock(mu);
            out.first_error = e.what();
          }
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  fast.wait_for_compiles();
  out.mismatches = mismatches;
  out.errors = errors;
  return out;
}

}  // namespace zc::test
