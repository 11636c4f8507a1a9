#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace zc::detail {

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::string text = std::string("zc internal error: ") + cond + " failed at " + file + ":" +
                     std::to_string(line) + (msg.empty() ? "" : ": " + msg) +
                     " (please report this)";
#ifndef NDEBUG
  std::fprintf(stderr, "%s\n", text.c_str());
  std::abort();
#else
  throw Error(text);
#endif
}

}  // namespace zc::detail
