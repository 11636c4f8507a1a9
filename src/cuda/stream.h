// The current stream: where zc queues work for a device. By default it is one stream per
// device, created on first use and shared by every thread; it is non-blocking, so it does not
// wait for work on the legacy default stream (stream 0) of other code in the process, nor that
// work for it. A StreamGuard makes another stream current for one device on one thread.
//
// Work queued on the current stream runs in order, which is what makes reusing freed memory on
// the same stream safe (see the caching allocator).
#pragma once

#include <cuda.h>

namespace zc::cuda {

// Makes `device` current on this thread (use_device) the first time it creates the stream.
CUstream current_stream(int device);

// While alive, current_stream(device) on this thread returns `stream` (which the caller owns
// and keeps alive); the previous one is restored on destruction. Guards nest.
class StreamGuard {
 public:
  StreamGuard(int device, CUstream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  bool had_previous_;
  CUstream previous_;
};

// Waits for all work on `device` (every stream of its context) and makes it current; raises
// zc::Error for an error reported by that work.
void synchronize(int device);

}  // namespace zc::cuda
