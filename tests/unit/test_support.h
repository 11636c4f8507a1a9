// Helpers every unit test file needs: the message of the zc::Error a call raises, substring
// checks, and scratch directories under the build tree (ZC_TEST_TMPDIR), emptied on creation.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "zc/cuda.h"
#include "zc/error.h"

// Skips the running test on a machine without a usable GPU, saying why (CI has none).
#define ZC_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                        \
    if (!::zc::cuda::is_available())                                          \
      GTEST_SKIP() << "no CUDA device: " << ::zc::cuda::unavailable_reason(); \
  } while (0)

namespace zc::test {

// What `f()` raised as zc::Error, or a text saying it raised nothing (which no check expects).
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const zc::Error& e) {
    return e.what();
  }
  return "(no zc::Error was thrown)";
}

inline bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// <ZC_TEST_TMPDIR>/<group>/<name>, empty.
// Expects `fn` to raise zc::Error whose message contains `part`.
template <class Fn>
void expect_error_containing(Fn&& fn, std::string_view part) {
  try {
    fn();
    ADD_FAILURE() << "expected a zc::Error containing \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
}

inline std::string fresh_dir(const std::string& group, const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(ZC_TEST_TMPDIR) / group / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// fresh_dir(group, "<suite>.<test>") for the running test.
inline std::string test_dir(const std::string& group) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return fresh_dir(group, std::string(info->test_suite_name()) + "." + info->name());
}

}  // namespace zc::test
