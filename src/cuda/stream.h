// The current stream: where zc queues work for a device. By default it is one stream per
// device, created on first use and shared by every thread; it is non-blocking, so it does not
// wait for work on the legacy default stream (stream 0) of other code in the process, nor that
// work for it. A StreamGuard makes another stream current for one device on one thread.
//
// Work queued on the current stream runs in order, which is what makes reusing freed memory on
// the same stream safe (see the caching allocator).
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zc::cuda {

// One non-blocking stream per device, each created on its first use (making `device` current
// on that thread) and kept for the object's life; get() is thread-safe and, once the stream
// exists, lock-free. The default streams are one such set; an upload path keeps another.
class DeviceStreams {
 public:
  explicit DeviceStreams(std::string purpose);  // named in errors: "the default stream"
  CUstream get(int device);

 private:
  struct Slot {
    std::once_flag create_once;
    std::atomic<CUstream> stream{nullptr};
  };
  std::string purpose_;
  std::vector<std::unique_ptr<Slot>> slots_;  // by device
};

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
