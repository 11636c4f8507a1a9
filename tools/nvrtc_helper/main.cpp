// zc-nvrtc-helper: runs NVRTC for the zc process that started it, so that its compiles run
// side by side instead of queueing in that process's NVRTC (src/toolchain/nvrtc_workers.h).
//
//   zc-nvrtc-helper ARCH [OPTION...]    with its requests on descriptor 3
//
// It compiles an empty program for ARCH with the OPTIONs first (NVRTC's start), says it is
// ready, and answers requests until descriptor 3 closes. Not for people to run.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "toolchain/nvrtc_workers.h"

int main(int argc, char** argv) {
  if (argc < 2 || ::fcntl(3, F_GETFD) < 0) {
    std::fprintf(stderr, "zc-nvrtc-helper: zc starts this, with its socket as descriptor 3\n");
    return 2;
  }
  // What else was inherited (a descriptor without close-on-exec, such as a locked cache file)
  // must not stay open for as long as this helper lives.
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  std::vector<std::string> options(argv + 2, argv + argc);
  return zc::toolchain::serve_nvrtc_requests(3, zc::toolchain::nvrtc_compile_here, argv[1],
                                             options);
}
