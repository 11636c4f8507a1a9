// Calls from many threads, built with ThreadSanitizer in CI (scripts/test.sh): 8 threads x
// 1000 calls of one compiled module, new shapes arriving meanwhile, without and with async
// compile. Exits 1 on a wrong result or an error; ThreadSanitizer exits 66 on a report.
#include <cstdio>
#include <cstdlib>

#include "threads_case.h"

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 1000;
  int failures = 0;
  for (bool async : {false, true}) {
    zc::test::ThreadsCase c = zc::test::run_threads_case(8, calls, async);
    std::printf("%s: 8 threads x %d calls: %d mismatches, %d errors%s%s\n",
                async ? "async compile" : "compile", calls, c.mismatches, c.errors,
                c.first_error.empty() ? "" : ": ", c.first_error.c_str());
    failures += c.mismatches + c.errors;
  }
  return failures == 0 ? 0 : 1;
}
