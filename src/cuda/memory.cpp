#include "cuda/memory.h"

#include <cstring>
#include <string>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace zc::cuda {

namespace {

// Host-to-device copies up to this size are queued as memsets of their bytes.
constexpr size_t kQueuedCopyBytes = 16;

std::string on(const char* what, int device) {
  return std::string(what) + " on cuda:" + std::to_string(device);
}

}  // namespace

void upload_to_unused(CUdeviceptr dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  // Never destroyed, as the default streams.
  static DeviceStreams* const uploads = new DeviceStreams("an upload stream");
  CUstream stream = uploads->get(device);
  use_device(device);
  const Driver& d = driver();
  check(d.cuMemcpyHtoDAsync(dst, src, nbytes, stream), on("uploading to the device", device));
  check(d.cuStreamSynchronize(stream), on("uploading to the device", device));
}

void copy_host_to_device(CUdeviceptr dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  if (nbytes <= kQueuedCopyBytes) {
    // A scalar (an optimizer's step size, a loss scale): its bytes go by value into fills
    // queued on the stream, so the host neither waits for the work before them nor keeps `src`.
    // A copy from pageable memory would wait for the whole stream.
    const auto* bytes = static_cast<const uint8_t*>(src);
    if (nbytes % 4 == 0 && dst % 4 == 0) {
      for (size_t i = 0; i < nbytes; i += 4) {
        uint32_t word = 0;
        std::memcpy(&word, bytes + i, 4);
        fill_words(dst + i, word, 1, device);
      }
    } else {
      for (size_t i = 0; i < nbytes; ++i) fill_bytes(dst + i, bytes[i], 1, device);
    }
    return;
  }
  use_device(device);
  const Driver& d = driver();
  CUstream stream = current_stream(device);
  check(d.cuMemcpyHtoDAsync(dst, src, nbytes, stream), on("copying host to device", device));
  check(d.cuStreamSynchronize(stream), on("copying host to device", device));
}

void copy_device_to_host(void* dst, CUdeviceptr src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  use_device(device);
  const Driver& d = driver();
  CUstream stream = current_stream(device);
  check(d.cuMemcpyDtoHAsync(dst, src, nbytes, stream), on("copying device to host", device));
  check(d.cuStreamSynchronize(stream), on("copying device to host", device));
}

void copy_device_to_device(CUdeviceptr dst, CUdeviceptr src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  use_device(device);
  check(driver().cuMemcpyDtoDAsync(dst, src, nbytes, current_stream(device)),
        on("copying device to device", device));
}

void copy_between_devices(CUdeviceptr dst, int dst_device, CUdeviceptr src, int src_device,
                          size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device == src_device) return copy_device_to_device(dst, src, nbytes, dst_device);
  const Driver& d = driver();
  use_device(src_device);
  check(d.cuStreamSynchronize(current_stream(src_device)),
        on("finishing work before a copy", src_device));
  use_device(dst_device);
  CUstream stream = current_stream(dst_device);
  const std::string what =
      "copying cuda:" + std::to_string(src_device) + " to cuda:" + std::to_string(dst_device);
  check(d.cuMemcpyPeerAsync(dst, primary_context(dst_device), src, primary_context(src_device),
                            nbytes, stream),
        what);
  check(d.cuStreamSynchronize(stream), what);
}

void fill_bytes(CUdeviceptr dst, uint8_t value, size_t nbytes, int device) {
  if (nbytes == 0) return;
  use_device(device);
  check(driver().cuMemsetD8Async(dst, value, nbytes, current_stream(device)),
        on("filling memory", device));
}

void fill_words(CUdeviceptr dst, uint32_t value, size_t count, int device) {
  if (count == 0) return;
  use_device(device);
  check(driver().cuMemsetD32Async(dst, value, count, current_stream(device)),
        on("filling memory", device));
}

}  // namespace zc::cuda
