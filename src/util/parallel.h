// Independent pieces of compile-time work run side by side: fn(0) .. fn(n - 1), each exactly
// once, on the calling thread and helper threads, which take the next index as they finish one.
// Returns when all have run; if any threw, the exception of the lowest index is rethrown (the
// one a plain loop would have met first, whatever the timing; the others still run to their
// end, so nothing they reference is left in use).
//
// For compile-time work only: the threads are made per call (tens of microseconds), which the
// generated code's loops must not pay. `max_threads` bounds the threads, the calling one
// included; 0 is the hardware's count. A compile step passes toolchain::compile_threads(): 1
// while a compile runs in the background, so that it takes no more cores from the eager calls
// beside it than one thread (toolchain/build_priority.h), else 0.
#pragma once

#include <cstddef>
#include <functional>

namespace zc {

void run_indexed(size_t n, const std::function<void(size_t)>& fn, size_t max_threads = 0);

}  // namespace zc
