// Errors that generated GPU kernels find (an embedding index out of range): one flag word per
// device that every kernel able to fail sets, which the host reads after the work that may have
// set it. One sticky flag, as the GPU's own device-side assertions are: it stays set until it is
// read, so an error is never lost, though with several threads at work it may be reported by
// the call that reads it first.
#pragma once

#include <cuda.h>

namespace zc::codegen::cuda {

// The flag's device address on `device` (allocated and zeroed on first use; kept for good).
CUdeviceptr device_error_flag(int device);

// Waits for the device's current stream, reads the flag and, when set, clears it and raises
// zc::Error naming the failure.
void raise_device_errors(int device);

}  // namespace zc::codegen::cuda
