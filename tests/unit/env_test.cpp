// The environment's one reader (util/env.h): its table against the README's, what unset, empty
// and set read as, and `zc env` pointing out a ZC_* variable that zc does not read.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "unit/run_model.h"
#include "unit/test_support.h"
#include "util/env.h"

namespace zc {
namespace {

using env::Var;

// A variable set (or, for nullptr, unset) for one test, restored after it.
class ScopedEnv {
 public:
  ScopedEnv(Var var, const char* value) : name_(env::name(var)) {
    if (const char* v = std::getenv(name_.c_str())) saved_ = v;
    if (value) {
      ::setenv(name_.c_str(), value, 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (saved_) {
      ::setenv(name_.c_str(), saved_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

TEST(Env, TableHasEveryVariableOnceWithAMeaning) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < env::variables().size(); ++i) {
    const env::Variable& v = env::variables()[i];
    EXPECT_EQ(static_cast<size_t>(v.var), i);
    EXPECT_EQ(env::name(v.var), v.name);
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    EXPECT_EQ(v.meaning.find('\n'), std::string_view::npos) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
  }
  EXPECT_EQ(env::name(Var::cpu_gemm), "ZC_CPU_GEMM");
  EXPECT_EQ(env::name(Var::make_cxx), "CXX");
}

// The README's table documents the variables for users: the table here must know every ZC_*
// one it names, and it must name every ZC_* one known here.
TEST(Env, TableAndReadmeNameTheSameZcVariables) {
  std::ifstream readme(std::string(ZC_TEST_SOURCE_DIR) + "/../README.md");
  ASSERT_TRUE(readme) << "README.md not found";
  std::set<std::string> documented;
  const std::regex zc_name("ZC_[A-Z0-9_]+");
  bool in_section = false;
  for (std::string line; std::getline(readme, line);) {
    if (line.starts_with("## ")) in_section = line == "## Environment variables";
    if (!in_section || !line.starts_with("|")) continue;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), zc_name);
         it != std::sregex_iterator(); ++it) {
      documented.insert(it->str());
    }
  }
  ASSERT_FALSE(documented.empty()) << "no environment table in README.md";
  for (const std::string& name : documented) EXPECT_TRUE(env::known(name)) << name;
  for (const env::Variable& v : env::variables()) {
    if (v.name.starts_with("ZC_")) {
      EXPECT_TRUE(documented.count(std::string(v.name))) << v.name << " is not in the README";
    }
  }
}

TEST(Env, GetTellsUnsetFromEmpty) {
  {
    ScopedEnv unset(Var::cuda_visible_devices, nullptr);
    EXPECT_EQ(env::get(Var::cuda_visible_devices), std::nullopt);
    EXPECT_EQ(env::non_empty(Var::cuda_visible_devices), std::nullopt);
  }
  {
    ScopedEnv empty(Var::cuda_visible_devices, "");
    EXPECT_EQ(env::get(Var::cuda_visible_devices), "");
    EXPECT_EQ(env::non_empty(Var::cuda_visible_devices), std::nullopt);
  }
  ScopedEnv set(Var::cuda_visible_devices, "1,0");
  EXPECT_EQ(env::get(Var::cuda_visible_devices), "1,0");
  EXPECT_EQ(env::non_empty(Var::cuda_visible_devices), "1,0");
}

// Read on every call: a setenv is seen at once.
TEST(Env, ReadsAreNotCached) {
  ScopedEnv first(Var::sizes_first, "inline");
  EXPECT_EQ(env::get(Var::sizes_first), "inline");
  ::setenv("ZC_SIZES_FIRST", "background", 1);
  EXPECT_EQ(env::get(Var::sizes_first), "background");
}

TEST(Env, FlagIsOffOnlyForZeroAndDefaultsWhenUnsetOrEmpty) {
  for (bool when_unset : {false, true}) {
    {
      ScopedEnv unset(Var::remote_cache_readonly, nullptr);
      EXPECT_EQ(env::flag(Var::remote_cache_readonly, when_unset), when_unset);
    }
    {
      ScopedEnv empty(Var::remote_cache_readonly, "");
      EXPECT_EQ(env::flag(Var::remote_cache_readonly, when_unset), when_unset);
    }
    {
      ScopedEnv zero(Var::remote_cache_readonly, "0");
      EXPECT_FALSE(env::flag(Var::remote_cache_readonly, when_unset));
    }
    for (const char* on : {"1", "yes", "00"}) {
      ScopedEnv set(Var::remote_cache_readonly, on);
      EXPECT_TRUE(env::flag(Var::remote_cache_readonly, when_unset)) << on;
    }
  }
  ScopedEnv unset(Var::force_disable_caches, nullptr);
  EXPECT_FALSE(env::flag(Var::force_disable_caches));
}

TEST(Env, KnownNamesAndTheirLikelyMisspellings) {
  EXPECT_TRUE(env::known("ZC_LOGS"));
  EXPECT_TRUE(env::known("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(env::known("ZC_LOG"));
  EXPECT_FALSE(env::known("zc_logs"));
  EXPECT_EQ(env::closest_known("ZC_LOG"), "ZC_LOGS");
  EXPECT_EQ(env::closest_known("ZC_NUM_THREAD"), "ZC_NUM_THREADS");
  EXPECT_EQ(env::closest_known("ZC_CPU_GEM"), "ZC_CPU_GEMM");
  EXPECT_EQ(env::closest_known("ZC_CACHEDIR"), "ZC_CACHE_DIR");
  EXPECT_EQ(env::closest_known("ZC_SOMETHING_ELSE"), "");
  // Only zc's own are suggested: ZC_HOME is not a misspelt HOME.
  EXPECT_EQ(env::closest_known("ZC_HOME"), "");
}

TEST(Env, ListsEveryZcVariableSetKnownOrNot) {
  ::setenv("ZC_ENV_TEST_UNKNOWN", "x=1", 1);
  const auto vars = env::zc_variables_set();
  ::unsetenv("ZC_ENV_TEST_UNKNOWN");
  EXPECT_TRUE(std::is_sorted(vars.begin(), vars.end()));
  EXPECT_NE(std::find(vars.begin(), vars.end(),
                      std::pair<std::string, std::string>("ZC_ENV_TEST_UNKNOWN", "x=1")),
            vars.end());
  for (const auto& [name, value] : vars) EXPECT_TRUE(name.starts_with("ZC_")) << name;
}

TEST(Env, ZcEnvPointsOutAnUnknownVariable) {
  const test::ProcessRun text = test::zc_cli("ZC_LOG=graph ZC_NUM_THREADS=3", "env");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_TRUE(test::contains(text.out, "ZC_LOG=graph")) << text.out;
  EXPECT_TRUE(test::contains(text.out,
                             "warning        ZC_LOG is set but zc reads no such "
                             "variable; did you mean ZC_LOGS?\n"))
      << text.out;
  EXPECT_FALSE(test::contains(text.out, "ZC_NUM_THREADS is set but")) << text.out;
  const test::ProcessRun json = test::zc_cli("ZC_LOG=graph", "env --json");
  ASSERT_EQ(json.rc, 0) << json.out;
  EXPECT_TRUE(test::contains(json.out, "\"ZC_LOG\":\"graph\"")) << json.out;
  EXPECT_TRUE(test::contains(json.out, "{\"name\":\"ZC_LOG\",\"did_you_mean\":\"ZC_LOGS\"}"))
      << json.out;
  const test::ProcessRun far = test::zc_cli("ZC_SOMETHING_ELSE=1", "env");
  EXPECT_TRUE(test::contains(far.out,
                             "warning        ZC_SOMETHING_ELSE is set but zc reads no "
                             "such variable\n"))
      << far.out;
}

}  // namespace
}  // namespace zc
