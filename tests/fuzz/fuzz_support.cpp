// What the cache sources need from the rest of libzc, for fuzz binaries built without it: the
// real definitions need the generated build id and BLAS.
#include "zc/version.h"

namespace zc {

std::string version() {
  return "0.0.0-fuzz";
}
std::string build_id() {
  return "fuzz-build";
}

}  // namespace zc
