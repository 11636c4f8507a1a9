// Ahead-of-time packages: built here, loaded in a fresh process (the run_package tool, which has
// no model code) with ZC_CXX naming no compiler and an empty cache directory, where they run,
// equal eager and compile and capture nothing; and every way a package is refused: truncated,
// corrupt, not a package, another zc build, another CPU, a bad or missing signature, inputs
// it was not built for.
#include <gtest/gtest.h>

#include "unit/run_model.h"
#include "unit/test_support.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ir/canonical.h"
#include "runtime/package/file.h"
#include "runtime/regions/plan.h"
#include "tools/pooled_gpt.h"
#include "zc/npy.h"
#include "zc/zc.h"

namespace zc {
namespace {

namespace fs = std::filesystem;
using test::contains;
using test::ProcessRun;

std::string test_dir() {
  return test::test_dir("package");
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// No compiler, an empty cache directory of its own: a serving machine.
std::string serving_env(const std::string& dir) {
  fs::create_directories(dir + "/empty_cache");
  return "ZC_CXX=/nonexistent/c++ ZC_CACHE_DIR=" + dir + "/empty_cache";
}

// Runs `package` in a fresh process on `calls` (each written as .npy files) and returns the
// process's report; outputs[k] are call k's outputs.
struct Served {
  ProcessRun run;
  std::vector<std::vector<Tensor>> outputs;
};
Served serve(const std::string& dir, const std::string& package,
             const std::vector<std::vector<Tensor>>& calls, const std::string& env) {
  const std::string out = dir + "/out";
  fs::create_directories(out);
  std::string args = package + " " + out;
  for (size_t k = 0; k < calls.size(); ++k) {
    args += " --call ";
    for (size_t i = 0; i < calls[k].size(); ++i) {
      const std::string f =
          dir + "/call" + std::to_string(k) + "_input_" + std::to_string(i) + ".npy";
      zc_cli::write_npy(f, calls[k][i]);
      args += (i ? "," : "") + f;
    }
  }
  Served s;
  s.run = test::run_tool("run_package", env, args);
  if (s.run.rc != 0) return s;
  for (size_t k = 0; k < calls.size(); ++k) {
    s.outputs.emplace_back();
    for (size_t i = 0;; ++i) {
      const std::string f =
          out + "/call" + std::to_string(k) + "_output_" + std::to_string(i) + ".npy";
      if (!fs::exists(f)) break;
      s.outputs.back().push_back(zc_cli::read_npy(f));
    }
  }
  return s;
}

void expect_served_without_compiler(const Served& s) {
  ASSERT_EQ(s.run.rc, 0) << s.run.out;
  EXPECT_EQ(s.run.lines.at("compiler_invocations"), "0") << s.run.out;
  EXPECT_EQ(s.run.lines.at("graphs_captured"), "0") << s.run.out;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
    EXPECT_TRUE(allclose(got[i], want[i], 1e-4, 1e-5)) << "output " << i;
  }
}

// Nothing was written to the serving process's cache directory.
void expect_no_files(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    EXPECT_FALSE(e.is_regular_file()) << e.path();
  }
}

models::GPTConfig tiny_gpt(int64_t layers) {
  return models::GPTConfig{
      .vocab_size = 96, .block_size = 32, .n_layer = layers, .n_head = 2, .d_model = 32};
}

TEST(PackageProcess, SeedModelRunsWithNoCompilerAndEqualsEager) {
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(1);
  auto model = models::seed_model(6);
  model->eval();
  const Tensor x = randn({10, 10});
  const Tensor eager = (*model)(x);
  const Tensor compiled = compile(model)(x);
  package::save(model, {{x}}, dir + "/seed.zcpkg");
  Served s = serve(dir, dir + "/seed.zcpkg", {{x}}, serving_env(dir));
  expect_served_without_compiler(s);
  expect_close(s.outputs.at(0), {eager});
  expect_close(s.outputs.at(0), {compiled});
  expect_no_files(dir + "/empty_cache");
}

TEST(PackageProcess, HierarchicalGptStoresItsBlockOnceAndEqualsEager) {
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(2);
  auto model = models::gpt(tiny_gpt(3));
  model->eval();
  const Tensor a = randint(0, 96, {2, 16}), b = randint(0, 96, {1, 24});
  const std::vector<uint8_t> bytes = package::build(model, {{a}, {b}});
  write_bytes(dir + "/gpt.zcpkg", bytes);
  // Per size, one block graph serves its three calls: the package holds fewer graphs than
  // the specializations run parts.
  const runtime::PackageContents c = runtime::read_package(bytes);
  ASSERT_EQ(c.manifest.calls.size(), 2u);
  size_t parts = 0;
  for (const runtime::PackageCall& call : c.manifest.calls) {
    EXPECT_TRUE(call.hierarchical);
    const runtime::RegionPlan plan =
        runtime::plan_regions(ir::read_canonical(call.graph), runtime::RegionRule{});
    EXPECT_EQ(plan.outlined_calls, 3);
    parts += plan.parts.size();
  }
  EXPECT_EQ(c.graphs.size(), parts - 2 * 2) << "each size's block stored once, not 3 times";
  Served s = serve(dir, dir + "/gpt.zcpkg", {{a}, {b}}, serving_env(dir));
  expect_served_without_compiler(s);
  expect_close(s.outputs.at(0), {(*model)(a)});
  expect_close(s.outputs.at(1), {(*model)(b)});
  expect_no_files(dir + "/empty_cache");
}

TEST(PackageProcess, FlatGptWithCachesDisabled) {
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(3);
  auto model = models::gpt(tiny_gpt(2));
  model->eval();
  const Tensor a = randint(0, 96, {2, 8});
  package::save(model, {{a}}, dir + "/flat.zcpkg", {.regions = Regions::None});
  Served s =
      serve(dir, dir + "/flat.zcpkg", {{a}}, serving_env(dir) + " ZC_FORCE_DISABLE_CACHES=1");
  expect_served_without_compiler(s);
  expect_close(s.outputs.at(0), {(*model)(a)});
}

TEST(PackageProcess, ManyInputsAndOutputs) {
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(4);
  auto model = std::make_shared<test::PooledGPT>(tiny_gpt(2));
  model->eval();
  const Tensor t1 = randint(0, 96, {2, 12}), t2 = randint(0, 96, {3, 5});
  const std::vector<Tensor> c1{t1, test::token_weights(t1)}, c2{t2, test::token_weights(t2)};
  package::save(model, {c1, c2}, dir + "/pooled.zcpkg");
  Served s = serve(dir, dir + "/pooled.zcpkg", {c2, c1}, serving_env(dir));
  expect_served_without_compiler(s);
  expect_close(s.outputs.at(0), (*model)(c2));
  expect_close(s.outputs.at(1), (*model)(c1));
}

// A seed package built once for the refusal tests.
const std::vector<uint8_t>& seed_package() {
  static const std::vector<uint8_t> bytes = [] {
    NoGradGuard no_grad;
    manual_seed(5);
    auto model = models::seed_model(3);
    model->eval();
    return package::build(model, {{randn({10, 10})}, {randn({4, 10})}});
  }();
  return bytes;
}

// A GPT whose sequence length takes every size in [2, 64].
models::GPTConfig ranged_gpt() {
  return models::GPTConfig{
      .vocab_size = 96, .block_size = 64, .n_layer = 2, .n_head = 2, .d_model = 32};
}
const CompileOptions kLengths2To64{.dynamic_dims = {{0, 1, 2, 64}}};

TEST(PackageProcess, GptServesEveryLengthOfItsRangeWithNoCompilerAndEqualsEager) {
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(4);
  auto model = models::gpt(ranged_gpt());
  model->eval();
  const std::vector<uint8_t> bytes =
      package::build(model, {{randint(0, 96, {2, 16})}}, kLengths2To64);
  write_bytes(dir + "/ranged.zcpkg", bytes);
  std::printf("package of gpt (2 layers, d_model 32) for lengths 2..64: %zu bytes\n", bytes.size());
  const runtime::PackageContents c = runtime::read_package(bytes);
  ASSERT_EQ(c.manifest.calls.size(), 1u);
  const runtime::PackageCall& call = c.manifest.calls[0];
  EXPECT_EQ(call.sizes.size(), 63u);
  EXPECT_EQ(call.size_graphs.size(), 63u) << "one captured graph per length";
  EXPECT_GE(c.templates.size(), 1u);
  // Lengths served by templates are not compiled one by one.
  EXPECT_LT(c.graphs.size(), 16u);
  std::vector<std::vector<Tensor>> calls;
  for (int64_t t : {7, 33, 64, 2, 7}) calls.push_back({randint(0, 96, {2, t})});
  Served s = serve(dir, dir + "/ranged.zcpkg", calls, serving_env(dir));
  expect_served_without_compiler(s);
  for (size_t k = 0; k < calls.size(); ++k) {
    expect_close(s.outputs.at(k), {(*model)(calls[k][0])});
  }
  expect_no_files(dir + "/empty_cache");
  // Out of the range, or another batch: refused, naming what it serves.
  for (const Shape& shape : {Shape{2, 65}, Shape{2, 1}, Shape{3, 16}}) {
    Served out = serve(dir, dir + "/ranged.zcpkg", {{zeros(shape, DType::i64)}}, serving_env(dir));
    EXPECT_EQ(out.run.rc, 3) << out.run.out;
    EXPECT_TRUE(contains(out.run.out, "it serves [2,2..64] i64")) << out.run.out;
  }
}

TEST(Package, RangedGptBindsEachLengthOnceFromManyThreads) {
  NoGradGuard no_grad;
  manual_seed(5);
  auto model = models::gpt(ranged_gpt());
  model->eval();
  // A second example that differs only in its length serves the same sizes: kept once.
  const std::vector<uint8_t> bytes =
      package::build(model, {{randint(0, 96, {1, 40})}, {randint(0, 96, {1, 9})}}, kLengths2To64);
  const package::Package p = package::load(bytes);
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].str(), "[1,2..64] i64");
  const int64_t runs = compiler::stats().compiler_invocations;
  const int64_t captures = compiler::stats().graphs_captured;
  std::vector<Tensor> xs, want;
  for (int64_t t : {3, 17, 40, 41, 63}) {
    xs.push_back(randint(0, 96, {1, t}));
    want.push_back((*model)(xs.back()));
  }
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (size_t k = 0; k < xs.size(); ++k) {
        const size_t at = (k + static_cast<size_t>(i)) % xs.size();
        if (!allclose(p(xs[at]), want[at], 1e-4, 1e-5)) ++bad;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(compiler::stats().compiler_invocations, runs);
  EXPECT_EQ(compiler::stats().graphs_captured - captures, 0) << "eager runs capture nothing";
  test::expect_error_containing(
      [&] {
        p(zeros({1, 70}, DType::i64));
      },
      "input 0 dim 1 is 70, and [1,2..64] i64 takes 2..64 there");
  // Templates that do not serve the graphs they are stored for (each under another's structure
  // hash): a length in the range is refused by their check, not run.
  runtime::PackageContents c = runtime::read_package(bytes);
  ASSERT_GE(c.templates.size(), 2u);
  for (size_t i = 0; i + 1 < c.templates.size(); ++i) {
    std::swap(c.templates[i].second, c.templates[i + 1].second);
  }
  const package::Package wrong = package::load(runtime::write_package(c));
  test::expect_error_containing(
      [&] {
        wrong(randint(0, 96, {1, 20}));
      },
      "a package runs no unchecked code and compiles nothing");
  EXPECT_EQ(compiler::stats().compiler_invocations, runs);
}

TEST(Package, RangedFlatGptEqualsEager) {
  NoGradGuard no_grad;
  manual_seed(6);
  auto model = models::gpt(ranged_gpt());
  model->eval();
  CompileOptions options = kLengths2To64;
  options.regions = Regions::None;
  const package::Package p =
      package::load(package::build(model, {{randint(0, 96, {3, 64})}}, options));
  EXPECT_EQ(p.calls().at(0).str(), "[3,2..64] i64");
  const int64_t runs = compiler::stats().compiler_invocations;
  for (int64_t t : {2, 5, 31, 64}) {
    const Tensor x = randint(0, 96, {3, t});
    EXPECT_TRUE(allclose(p(x), (*model)(x), 1e-4, 1e-5)) << "length " << t;
  }
  EXPECT_EQ(compiler::stats().compiler_invocations, runs);
}

TEST(Package, DynamicDimsMustBeBounded) {
  auto model = models::seed_model(2);
  const std::vector<std::vector<Tensor>> calls = {{randn({10, 10})}};
  test::expect_error_containing([&] { package::build(model, calls, {.dynamic = Dynamic::All}); },
                                "pass dynamic_dims with a bounded range");
  // Not an option a package records: refused rather than built at another precision.
  test::expect_error_containing(
      [&] { package::build(model, calls, {.matmul_precision = MatmulPrecision::Tf32}); },
      "MatmulPrecision::Tf32 is not recorded in a package");
  test::expect_error_containing(
      [&] {
        package::build(model, calls, {.dynamic_dims = {{0, 0, 2, INT64_MAX}}});
      },
      "has no max");
  test::expect_error_containing(
      [&] {
        package::build(model, calls, {.dynamic_dims = {{0, 0, 1, 5000}}});
      },
      "more than 4096 sizes");
  test::expect_error_containing(
      [&] {
        package::build(model, calls, {.dynamic_dims = {{0, 2, 1, 8}}});
      },
      "names no dim of example call 0");
  test::expect_error_containing(
      [&] {
        package::build(model, calls, {.dynamic_dims = {{0, 0, 9, 8}}});
      },
      "1 <= min <= max");
}

TEST(Package, LoadsInProcessWithoutCompilingAndRefusesOtherShapes) {
  NoGradGuard no_grad;
  const std::vector<uint8_t>& bytes = seed_package();
  const int64_t before = compiler::stats().compiler_invocations;
  const int64_t captured = compiler::stats().graphs_captured;
  package::Package p = package::load(bytes);
  EXPECT_EQ(p.backend(), "cpp");
  EXPECT_TRUE(p.device().is_cpu());
  ASSERT_EQ(p.calls().size(), 2u);
  ASSERT_EQ(p.outputs().size(), 2u);
  EXPECT_EQ(p.outputs()[1].str(), "[4,10] f32");
  EXPECT_EQ(p(randn({4, 10})).shape(), (Shape{4, 10}));
  EXPECT_EQ(compiler::stats().compiler_invocations, before);
  EXPECT_EQ(compiler::stats().graphs_captured, captured);
  const std::string err = test::error_message([&] { p(randn({3, 10})); });
  EXPECT_TRUE(contains(err, "[3,10] f32 match none")) << err;
  EXPECT_TRUE(contains(err, "[10,10] f32; [4,10] f32")) << err;
  test::expect_error_containing([&] { p(randn({10, 10}).to(DType::f64)); }, "match none");
  // A non-contiguous input of a served shape runs (as its contiguous copy).
  const Tensor x = randn({10, 10});
  EXPECT_TRUE(allclose(p(x.t()), p(x.t().contiguous()), 0, 0));
}

TEST(Package, CalledFromManyThreadsAtOnce) {
  const package::Package p = package::load(seed_package());
  const Tensor x = randn({10, 10}), y = randn({4, 10});
  const Tensor want_x = p(x), want_y = p(y);
  std::vector<std::thread> threads;
  std::vector<int> same(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      NoGradGuard no_grad;
      bool ok = true;
      for (int i = 0; i < 20; ++i) {
        ok = ok && allclose(p(t % 2 ? x : y), t % 2 ? want_x : want_y, 0, 0);
      }
      same[t] = ok;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(same[t]) << "thread " << t;
}

TEST(Package, TruncatedOrCorruptOrForeignFileRefused) {
  const std::vector<uint8_t>& good = seed_package();
  uint64_t code_bytes = 0;  // the compiled code's bundle, after the magic and its size
  std::memcpy(&code_bytes, good.data() + 8, 8);
  ASSERT_LT(16 + code_bytes, good.size());
  for (size_t cut : {size_t{0}, size_t{5}, size_t{12}, size_t{100}, size_t{16 + code_bytes / 2},
                     size_t{16 + code_bytes}, good.size() - 1}) {
    std::vector<uint8_t> bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::string err = test::error_message([&] { package::load(bytes); });
    EXPECT_TRUE(contains(err, "package refused: it is truncated") ||
                contains(err, "package refused: cache bundle manifest truncated"))
        << "cut at " << cut << ": " << err;
  }
  // A byte flipped in the code's manifest, in its compressed graphs, and in the weights.
  for (size_t at : {size_t{40}, size_t{16 + code_bytes - 10}, good.size() - 10}) {
    std::vector<uint8_t> bytes = good;
    bytes[at] ^= 0x5a;
    const std::string err = test::error_message([&] { package::load(bytes); });
    EXPECT_TRUE(contains(err, "package refused: ") &&
                (contains(err, "corrupt") || contains(err, "checksum")))
        << "flipped at " << at << ": " << err;
  }
  std::vector<uint8_t> text{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!',
                            '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!', '!'};
  test::expect_error_containing([&] { package::load(text); }, "not a zc package");
  test::expect_error_containing([&] { package::load(cache::save_artifacts()); },
                                "not a zc package but a cache bundle");
  const std::string dir = test_dir();
  test::expect_error_containing([&] { package::load(dir + "/missing.zcpkg"); }, "cannot open");
}

// Every part of the file is covered by a check: whichever byte changes, the package is
// refused with a reason, never a crash. A flip the checks let through must leave what the
// package holds unchanged: zstd's streams have bits their decoder ignores (padding), and the
// checksums are over the decompressed items.
TEST(Package, EveryFlippedByteRefusedOrHarmless) {
  const std::vector<uint8_t>& good = seed_package();
  const std::vector<uint8_t> holds = runtime::write_package(runtime::read_package(good));
  int refused = 0, harmless = 0, tried = 0;
  for (size_t at = 0; at < good.size(); at += 7) {
    std::vector<uint8_t> bytes = good;
    bytes[at] ^= static_cast<uint8_t>(1u << (at % 8));
    ++tried;
    try {
      package::load(bytes);
      EXPECT_EQ(runtime::write_package(runtime::read_package(bytes)), holds)
          << "byte " << at << " flipped changed what the package holds, and it loaded";
      ++harmless;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with("package refused: ") || what.starts_with("not a zc package"))
          << at << ": " << what;
      ++refused;
    }
  }
  EXPECT_EQ(refused + harmless, tried);
  EXPECT_GT(refused, tried * 9 / 10) << harmless << " flips loaded";
}

TEST(Package, AnotherBuildOrCpuRefusedWithTheReason) {
  runtime::PackageContents c = runtime::read_package(seed_package());
  {
    runtime::PackageContents other = c;
    other.manifest.build_id = "0123456789abcdef";
    const std::string err =
        test::error_message([&] { package::load(runtime::write_package(other)); });
    EXPECT_TRUE(contains(err, "zc build '0123456789abcdef'")) << err;
    EXPECT_TRUE(contains(err, "build it again")) << err;
  }
  {
    runtime::PackageContents other = c;
    other.manifest.isa = "native";
    other.manifest.native = "GenuineOther family 99 features {none}";
    const std::string err =
        test::error_message([&] { package::load(runtime::write_package(other)); });
    EXPECT_TRUE(contains(err, "native CPU")) << err;
    EXPECT_TRUE(contains(err, "GenuineOther")) << err;
    EXPECT_TRUE(contains(err, "ZC_CPU_ISA")) << err;
  }
  {
    runtime::PackageContents other = c;
    other.manifest.isa = "x86-64-v9";
    const std::string err =
        test::error_message([&] { package::load(runtime::write_package(other)); });
    EXPECT_TRUE(contains(err, "x86-64-v9, which this CPU cannot run")) << err;
  }
  {
    runtime::PackageContents other = c;
    other.manifest.backend = "tpu";
    test::expect_error_containing([&] { package::load(runtime::write_package(other)); },
                                  "backend \"tpu\"");
  }
}

TEST(Package, SignatureChecked) {
  const runtime::PackageContents c = runtime::read_package(seed_package());
  const std::vector<uint8_t> key_a{'k', 'e', 'y', 'A'}, key_b{'k', 'e', 'y', 'B'};
  const std::vector<uint8_t> signed_a = runtime::write_package(c, key_a);
  EXPECT_NO_THROW(runtime::read_package(signed_a, key_a));
  test::expect_error_containing([&] { runtime::read_package(signed_a, key_b); },
                                "signature does not verify");
  test::expect_error_containing([&] { runtime::read_package(seed_package(), key_a); },
                                "not signed");

  // Through the key a serving process is configured with (ZC_CACHE_HMAC_KEY_FILE).
  const std::string dir = test_dir();
  write_bytes(dir + "/signed.zcpkg", signed_a);
  write_bytes(dir + "/unsigned.zcpkg", seed_package());
  write_bytes(dir + "/a.key", key_a);
  write_bytes(dir + "/b.key", key_b);
  const std::vector<std::vector<Tensor>> call{{randn({4, 10})}};
  const std::string env = serving_env(dir) + " ZC_CACHE_HMAC_KEY_FILE=" + dir + "/";
  Served good = serve(dir, dir + "/signed.zcpkg", call, env + "a.key");
  expect_served_without_compiler(good);
  Served wrong = serve(dir, dir + "/signed.zcpkg", call, env + "b.key");
  EXPECT_EQ(wrong.run.rc, 3) << wrong.run.out;
  EXPECT_TRUE(contains(wrong.run.out, "signature does not verify")) << wrong.run.out;
  Served unsigned_pkg = serve(dir, dir + "/unsigned.zcpkg", call, env + "a.key");
  EXPECT_EQ(unsigned_pkg.run.rc, 3) << unsigned_pkg.run.out;
  EXPECT_TRUE(contains(unsigned_pkg.run.out, "not signed")) << unsigned_pkg.run.out;
}

// forward() reads a value of its input: a graph break, which a package cannot hold.
struct ReadsAValue : nn::Module {
  Tensor forward(const Tensor& x) override { return x * sum(x).item<double>(); }
};

TEST(Package, WhatCannotBePackagedIsRefused) {
  const std::string err =
      test::error_message([] { package::build(std::make_shared<ReadsAValue>(), {{randn({3})}}); });
  EXPECT_TRUE(contains(err, "graph break; a package holds whole graphs")) << err;
  EXPECT_FALSE(contains(err, "fullgraph=false")) << err;
  auto model = models::seed_model(2);
  test::expect_error_containing([&] { package::build(model, {}); }, "no example calls");
  test::expect_error_containing([&] { package::build(model, {{}}); }, "has no inputs");
  test::expect_error_containing([&] { package::Package()(randn({2})); }, "before load");
}

TEST(PackageGpu, GptOnCudaEqualsTheCpuInAFreshProcessWithNoCompiler) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  const std::string dir = test_dir();
  manual_seed(6);
  auto model = models::gpt(tiny_gpt(2));
  model->eval();
  const Tensor a = randint(0, 96, {2, 16});
  const Tensor want = (*model)(a);
  model->to(Device::cuda(0));
  const std::vector<uint8_t> bytes = package::build(model, {{a.to(Device::cuda(0))}});
  write_bytes(dir + "/cuda.zcpkg", bytes);
  const int64_t runs = compiler::stats().compiler_invocations;
  package::Package p = package::load(bytes);
  EXPECT_EQ(p.backend(), "cuda");
  EXPECT_TRUE(p.device().is_cuda());
  EXPECT_TRUE(allclose(p(a.to(Device::cuda(0))).to(Device::cpu()), want, 1e-3, 1e-4));
  EXPECT_EQ(compiler::stats().compiler_invocations, runs);
  test::expect_error_containing([&] { p(a); }, "move it with .to()");
  Served s = serve(dir, dir + "/cuda.zcpkg", {{a}}, serving_env(dir));
  expect_served_without_compiler(s);
  expect_close(s.outputs.at(0), {want});
}

// A range of lengths on the GPU: each length's kernels come from the CUDA size templates in the
// package, bound without NVRTC.
TEST(PackageGpu, RangedGptOnCudaServesOtherLengthsWithoutCompiling) {
  ZC_SKIP_WITHOUT_GPU();
  NoGradGuard no_grad;
  manual_seed(7);
  auto model = models::gpt(ranged_gpt());
  model->eval();
  std::vector<Tensor> xs;
  std::vector<Tensor> want;
  for (int64_t t : {7, 33, 64}) {
    xs.push_back(randint(0, 96, {2, t}));
    want.push_back((*model)(xs.back()));
  }
  model->to(Device::cuda(0));
  const std::vector<uint8_t> bytes =
      package::build(model, {{randint(0, 96, {2, 16}).to(Device::cuda(0))}}, kLengths2To64);
  const int64_t runs = compiler::stats().compiler_invocations;
  package::Package p = package::load(bytes);
  EXPECT_EQ(p.backend(), "cuda");
  for (size_t k = 0; k < xs.size(); ++k) {
    EXPECT_TRUE(allclose(p(xs[k].to(Device::cuda(0))).to(Device::cpu()), want[k], 1e-3, 1e-4)) << k;
  }
  EXPECT_EQ(compiler::stats().compiler_invocations, runs);
}

TEST(PackageCli, PackageThenRunWithNoCompiler) {
  const std::string dir = test_dir();
  ProcessRun built = test::zc_cli("", "package --model seed --layers 3 --shape 6x10 -o " + dir +
                                          "/m.zcpkg --save-example " + dir + "/ex");
  ASSERT_EQ(built.rc, 0) << built.out;
  ProcessRun run = test::zc_cli(serving_env(dir), "run " + dir + "/m.zcpkg --input " + dir +
                                                      "/ex/input_0.npy --output " + dir +
                                                      "/got --repeats 2 --json -");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "\"compiler_invocations\":0")) << run.out;
  EXPECT_TRUE(contains(run.out, "\"graphs_captured\":0")) << run.out;
  EXPECT_TRUE(allclose(zc_cli::read_npy(dir + "/got/output_0.npy"),
                       zc_cli::read_npy(dir + "/ex/expected_0.npy"), 1e-4, 1e-5));
}

TEST(PackageCli, DynamicDimServesOtherLengthsWithNoCompiler) {
  const std::string dir = test_dir();
  ProcessRun built =
      test::zc_cli("", "package --model gpt-small --layers 1 --dynamic-dim 0:1:2:128 -o " + dir +
                           "/g.zcpkg --save-example " + dir + "/ex");
  ASSERT_EQ(built.rc, 0) << built.out;
  ProcessRun run =
      test::zc_cli(serving_env(dir), "run " + dir + "/g.zcpkg --input " + dir +
                                         "/ex/input_0.npy --output " + dir + "/got --json -");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "\"compiler_invocations\":0")) << run.out;
  EXPECT_TRUE(allclose(zc_cli::read_npy(dir + "/got/output_0.npy"),
                       zc_cli::read_npy(dir + "/ex/expected_0.npy"), 1e-4, 1e-5));
  zc_cli::write_npy(dir + "/short.npy", zeros({4, 19}, DType::i64));
  run = test::zc_cli(serving_env(dir),
                     "run " + dir + "/g.zcpkg --input " + dir + "/short.npy --json -");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "\"compiler_invocations\":0")) << run.out;
  EXPECT_TRUE(contains(run.out, "\"graphs_captured\":0")) << run.out;
  zc_cli::write_npy(dir + "/long.npy", zeros({4, 129}, DType::i64));
  run = test::zc_cli(serving_env(dir), "run " + dir + "/g.zcpkg --input " + dir + "/long.npy");
  EXPECT_NE(run.rc, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "2..128")) << run.out;
}

TEST(PackageCli, PortableIsaLevel) {
  const std::string dir = test_dir();
  ProcessRun built = test::zc_cli("ZC_CACHE_DIR=" + dir + "/cache ZC_CPU_ISA=x86-64-v2",
                                  "package --model seed --layers 2 -o " + dir + "/v2.zcpkg");
  ASSERT_EQ(built.rc, 0) << built.out;
  std::ifstream in(dir + "/v2.zcpkg", std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const runtime::PackageManifest m = runtime::read_package(bytes).manifest;
  EXPECT_EQ(m.isa, "x86-64-v2");
  EXPECT_EQ(m.native, "");
  ProcessRun run = test::zc_cli(serving_env(dir), "run " + dir + "/v2.zcpkg --json -");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_TRUE(contains(run.out, "\"compiler_invocations\":0")) << run.out;
}

}  // namespace
}  // namespace zc
