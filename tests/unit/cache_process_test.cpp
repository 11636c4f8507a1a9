// The persistent caches across processes: cold then warm, bundles into an empty directory,
// what changes a key and what does not, corrupt entries, many processes at once, and a cache
// that cannot be written. Each scenario runs the run_model tool as fresh processes.
#include <gtest/gtest.h>

#include "unit/run_model.h"
#include "unit/test_support.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "cache/keys.h"
#include "codegen/backends/cpp/backend.h"
#include "nn/json.h"
#include "zc/zc.h"

namespace zc {
namespace {

namespace fs = std::filesystem;

using test::ProcessRun;
using test::run_model;

std::string fresh_dir(const std::string& name) {
  return zc::test::fresh_dir("cache_process", name);
}

std::string env_for(const std::string& dir) {
  return "ZC_CACHE_DIR=" + dir;
}

TEST(CacheProcess, ColdThenWarmCompilesNothingAndGivesTheSameBits) {
  std::string dir = fresh_dir("cold_warm");
  ProcessRun cold = run_model(env_for(dir));
  ASSERT_EQ(cold.rc, 0) << cold.out;
  EXPECT_GE(cold.num("compiler", "compiler_invocations"), 1) << cold.out;
  ProcessRun warm = run_model(env_for(dir));
  ASSERT_EQ(warm.rc, 0) << warm.out;
  EXPECT_EQ(warm.num("compiler", "compiler_invocations"), 0) << warm.out;
  EXPECT_GE(warm.cache_count("graph", "disk", "hits"), 1) << warm.out;
  EXPECT_EQ(warm.lines["output"], cold.lines["output"]);
}

TEST(CacheProcess, BundleMakesAnEmptyDirectoryWarm) {
  std::string a = fresh_dir("bundle_src"), b = fresh_dir("bundle_dst");
  std::string bundle = a + "/artifacts.zcb";
  ProcessRun cold = run_model(env_for(a), "--save " + bundle);
  ASSERT_EQ(cold.rc, 0) << cold.out;
  ASSERT_TRUE(fs::exists(bundle));
  ProcessRun third = run_model(env_for(b), "--load " + bundle);
  ASSERT_EQ(third.rc, 0) << third.out;
  EXPECT_NE(third.lines["load"].find("\"refused\":0"), std::string::npos) << third.out;
  EXPECT_EQ(third.num("compiler", "compiler_invocations"), 0) << third.out;
  EXPECT_EQ(third.lines["output"], cold.lines["output"]);
}

TEST(CacheProcess, OnlyWeightsChangedStillHits) {
  std::string dir = fresh_dir("weights");
  ProcessRun a = run_model(env_for(dir), "--weights-seed 1");
  ProcessRun b = run_model(env_for(dir), "--weights-seed 2");
  ASSERT_EQ(b.rc, 0) << b.out;
  EXPECT_EQ(b.num("compiler", "compiler_invocations"), 0) << b.out;
  EXPECT_NE(a.lines["output"], b.lines["output"]);  // different weights, different results
  EXPECT_LT(std::stod(b.lines["max_diff"]), 1e-5) << b.out;
}

TEST(CacheProcess, IsaLevelOrCompilerChangeMisses) {
  std::string dir = fresh_dir("isa");
  ASSERT_EQ(run_model(env_for(dir)).rc, 0);
  ProcessRun other_isa = run_model(env_for(dir) + " ZC_CPU_ISA=x86-64-v2");
  ASSERT_EQ(other_isa.rc, 0) << other_isa.out;
  EXPECT_EQ(other_isa.cache_count("graph", "disk", "hits"), 0) << other_isa.out;
  EXPECT_GE(other_isa.num("compiler", "compiler_invocations"), 1) << other_isa.out;
  // Another compiler binary (here a wrapper with its own identity) changes the flags' meaning.
  std::string wrapper = dir + "/wrapped-c++";
  std::ofstream(wrapper) << "#!/bin/sh\nexec c++ \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  ProcessRun other_cxx = run_model(env_for(dir) + " ZC_CXX=" + wrapper);
  ASSERT_EQ(other_cxx.rc, 0) << other_cxx.out;
  EXPECT_EQ(other_cxx.cache_count("graph", "disk", "hits"), 0) << other_cxx.out;
  EXPECT_GE(other_cxx.num("compiler", "compiler_invocations"), 1) << other_cxx.out;
}

TEST(CacheKeys, EveryComponentChangesTheKey) {
  auto key = [](const std::string& graph, const std::string& build, const std::string& target,
                const std::string& toolchain, const std::string& codegen) {
    cache::Key k(cache::Level::graph);
    k.add("graph", graph)
        .add("codegen", codegen)
        .add("build", build)
        .add("target", target)
        .add("toolchain", toolchain);
    return k.hex();
  };
  std::string base = key("g", "b", "t", "c", "o");
  EXPECT_EQ(base, key("g", "b", "t", "c", "o"));
  EXPECT_NE(base, key("g2", "b", "t", "c", "o"));
  EXPECT_NE(base, key("g", "b2", "t", "c", "o"));  // another zc build
  EXPECT_NE(base, key("g", "b", "t2", "c", "o"));  // another ISA level or CPU
  EXPECT_NE(base, key("g", "b", "t", "c2", "o"));  // another compiler
  EXPECT_NE(base, key("g", "b", "t", "c", "o2"));  // other code generation options
  // Length-prefixed components: moving characters between them changes the key.
  cache::Key a(cache::Level::graph), b(cache::Level::graph);
  a.add("x", "ab").add("y", "c");
  b.add("x", "a").add("y", "bc");
  EXPECT_NE(a.hex(), b.hex());
  EXPECT_NE(cache::Key(cache::Level::graph).hex(), cache::Key(cache::Level::kernel).hex());
  // Backend options change the codegen part.
  EXPECT_NE(codegen::cpp::make_cpp_backend()->key_parts().codegen,
            codegen::cpp::make_cpp_backend({.inline_matmul_max_flops = 1})->key_parts().codegen);
}

// Every entry file of a level under a cache directory.
std::vector<fs::path> entries_of(const std::string& dir, const std::string& level) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".zce" &&
        e.path().string().find("/" + level + "/") != std::string::npos) {
      out.push_back(e.path());
    }
  }
  return out;
}

TEST(CacheProcess, CorruptEntriesAreMissesWithCountedErrors) {
  for (std::string damage : {"flip", "truncate", "empty", "directory"}) {
    std::string dir = fresh_dir("corrupt_" + damage);
    ProcessRun cold = run_model(env_for(dir));
    ASSERT_EQ(cold.rc, 0) << cold.out;
    for (const std::string level : {"graph", "kernel", "lowering"}) {
      for (const fs::path& p : entries_of(dir, level)) {
        if (damage == "flip") {
          std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
          f.seekg(-5, std::ios::end);
          char c = 0;
          f.read(&c, 1);
          f.seekp(-5, std::ios::end);
          c ^= 0x5a;
          f.write(&c, 1);
        } else if (damage == "truncate") {
          fs::resize_file(p, fs::file_size(p) / 2);
        } else if (damage == "empty") {
          fs::resize_file(p, 0);
        } else {
          fs::remove(p);
          fs::create_directory(p);
        }
      }
    }
    ProcessRun after = run_model(env_for(dir));
    ASSERT_EQ(after.rc, 0) << damage << "\n" << after.out;
    EXPECT_EQ(after.lines["output"], cold.lines["output"]) << damage;
    EXPECT_GE(after.num("compiler", "compiler_invocations"), 1) << damage;
    if (damage != "directory") {
      EXPECT_GE(after.cache_count("graph", "disk", "errors"), 1) << damage << "\n" << after.out;
    }
  }
}

TEST(CacheProcess, EightProcessesAtOnceIntoOneEmptyDirectory) {
  std::string dir = fresh_dir("eight");
  std::vector<ProcessRun> runs(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { runs[i] = run_model(env_for(dir)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(runs[i].rc, 0) << runs[i].out;
    EXPECT_EQ(runs[i].lines["output"], runs[0].lines["output"]) << i;
  }
  // The store verifies clean: every entry any of them wrote is intact.
  ProcessRun verify = test::zc_cli(env_for(dir), "cache verify --json");
  EXPECT_EQ(verify.rc, 0) << verify.out;
  EXPECT_NE(verify.out.find("\"removed\":0"), std::string::npos) << verify.out;
}

// --json output quotes paths as JSON strings, whatever bytes the names hold.
TEST(CacheProcess, CliJsonEscapesPaths) {
  const std::string base = fresh_dir("json"), dir = base + "/we\"ird\\dir";
  const std::string env = "ZC_CACHE_DIR='" + dir + "'";
  ProcessRun r = run_model(env);
  ASSERT_EQ(r.rc, 0) << r.out;
  ProcessRun stats = test::zc_cli(env, "cache stats --json");
  ASSERT_EQ(stats.rc, 0) << stats.out;
  EXPECT_TRUE(test::contains(stats.out, "{\"dir\":" + json::quote(dir) + ",")) << stats.out;
  EXPECT_TRUE(test::contains(json::quote(dir), "we\\\"ird\\\\dir")) << json::quote(dir);
  const std::string bundle = base + "/a \"quoted\" name.zcb";
  ProcessRun exported = test::zc_cli(env, "cache export '" + bundle + "' --json");
  ASSERT_EQ(exported.rc, 0) << exported.out;
  EXPECT_TRUE(test::contains(exported.out, "{\"file\":" + json::quote(bundle) + ","))
      << exported.out;
}

TEST(CacheProcess, UnwritableCacheStillCompilesWithOneWarning) {
  std::string base = fresh_dir("unwritable");
  std::string blocker = base + "/not-a-directory";
  std::ofstream(blocker) << "x";
  ProcessRun r = run_model("ZC_CACHE_DIR=" + blocker + "/cache");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_LT(std::stod(r.lines["max_diff"]), 1e-5) << r.out;
  size_t first = r.out.find("warning");
  ASSERT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning", first + 1), std::string::npos) << "more than one warning:\n"
                                                                 << r.out;
}

TEST(CacheProcess, ForceDisableCachesCompilesEveryTime) {
  std::string dir = fresh_dir("disabled");
  ASSERT_EQ(run_model(env_for(dir)).rc, 0);
  ProcessRun r = run_model(env_for(dir) + " ZC_FORCE_DISABLE_CACHES=1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GE(r.num("compiler", "compiler_invocations"), 1) << r.out;
  EXPECT_NE(r.lines["cache"].find("\"persistent\":false"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace zc
