#include "cache/fingerprint.h"

#include "toolchain/compiler.h"
#include "toolchain/target.h"
#include "zc/version.h"

namespace zc::cache {

const Fingerprint& process_fingerprint() {
  static const Fingerprint fp = [] {
    Fingerprint f;
    f.build_id = zc::build_id();
    if (auto cxx = toolchain::find_cxx()) {
      f.toolchain = cxx->identity();
      f.target = toolchain::cpu_target().fingerprint();
    }
    return f;
  }();
  return fp;
}

}  // namespace zc::cache
