// ZC_CHECK: internal invariants (not user errors, which are zc::Error with a helpful message).
// A failed check aborts with file:line in debug builds, so the bug is caught where it happens,
// and throws in release builds, so a library bug does not take the user's process down.
#pragma once

#include <sstream>
#include <string>

#include "zc/error.h"

namespace zc::detail {
[[noreturn]] void check_failed(const char* cond, const char* file, int line,
                               const std::string& msg);
}  // namespace zc::detail

#define ZC_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) [[unlikely]] {                                                  \
      std::ostringstream zc_check_os_;                                           \
      zc_check_os_ << "" __VA_ARGS__;                                            \
      ::zc::detail::check_failed(#cond, __FILE__, __LINE__, zc_check_os_.str()); \
    }                                                                            \
  } while (0)
