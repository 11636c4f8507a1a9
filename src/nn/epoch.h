// A process-wide counter bumped by every change to any module's structure (parameters,
// buffers, children, dtype or device, train/eval). Compiled modules compare it on each call:
// while it is unchanged their guards on the module hold without walking the module tree.
#pragma once

#include <cstdint>

namespace zc::nn {

uint64_t module_epoch();
void bump_module_epoch();

}  // namespace zc::nn
