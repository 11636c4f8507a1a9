// A stand-in for zc-nvrtc-helper that needs no NVRTC, for the tests of its wire and of a pool
// whose helpers fail (tests/unit/nvrtc_workers_test.cpp): started the same way (ARCH OPTION...,
// requests on descriptor 3), its "cubin" is the source reversed and its log the arch and
// options; the source "fail" is a rejected program, "die" a helper that crashes mid-request.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "toolchain/nvrtc_workers.h"

namespace {

zc::toolchain::NvrtcOutcome fake_compile(std::string_view source, const std::string& arch,
                                         const std::vector<std::string>& options) {
  if (source == "die") ::_exit(3);
  zc::toolchain::NvrtcOutcome r;
  r.result.log = arch;
  for (const std::string& o : options) r.result.log += " " + o;
  if (source == "fail") {
    r.stage = zc::toolchain::NvrtcOutcome::Stage::compile;
    r.detail = "NVRTC_ERROR_COMPILATION";
    return r;
  }
  r.result.cubin.assign(source.rbegin(), source.rend());
  r.result.seconds = 0.25;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || ::fcntl(3, F_GETFD) < 0) return 2;
  return zc::toolchain::serve_nvrtc_requests(3, fake_compile, argv[1],
                                             std::vector<std::string>(argv + 2, argv + argc));
}
