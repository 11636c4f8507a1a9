// Calls from many threads, built with ThreadSanitizer in CI (scripts/test.sh): 8 threads x
// 1000 calls of one compiled module, new shapes arriving meanwhile, without and with async
// compile, and with the first call's size templates made in the background. Exits 1 on a wrong
// result or an error; ThreadSanitizer exits 66 on a report.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "threads_case.h"

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 1000;
  int failures = 0;
  // The third pass makes the first call's size templates on a thread of their own, as a GPU
  // backend does (runtime/dynamic/sizes_first.h).
  for (const char* mode : {"compile", "async compile", "templates in the background"}) {
    const bool async = std::string_view(mode) == "async compile";
    if (std::string_view(mode) == "templates in the background") {
      ::setenv("ZC_SIZES_FIRST", "background", 1);
    }
    zc::test::ThreadsCase c = zc::test::run_threads_case(8, calls, async);
    std::printf("%s: 8 threads x %d calls: %d mismatches, %d errors%s%s\n", mode, calls,
                c.mismatches, c.errors, c.first_error.empty() ? "" : ": ", c.first_error.c_str());
    failures += c.mismatches + c.errors;
  }
  return failures == 0 ? 0 : 1;
}
