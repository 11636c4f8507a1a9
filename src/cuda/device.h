// The GPUs of this machine and their primary contexts. Device properties are read once, without
// creating a context; a device's primary context is retained the first time a thread uses the
// device and kept for the life of the process (the CUDA runtime shares the same context).
//
// use_device(d) makes d's primary context current on the calling thread. Each thread remembers
// which device it made current, so calling it again for the same device costs a comparison;
// code that changes the thread's context behind zc's back (cuCtxSetCurrent, cudaSetDevice) must
// restore it before zc runs on that thread again.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "zc/cuda.h"

namespace zc::cuda {

// Raises zc::Error unless `device` is a device of this machine: the reason when there is no
// usable driver or no device, else how many devices there are.
void check_device(int device);

void use_device(int device);
// The device made current by use_device on this thread, or -1.
int current_device();
CUcontext primary_context(int device);  // retains it on first use
CUdevice device_handle(int device);
// The real architecture NVRTC compiles for on `device` ("sm_90"); raises as check_device.
std::string sm_arch(int device);

// The devices whose context this process has retained (the ones zc has used), in index order.
std::vector<int> used_devices();

}  // namespace zc::cuda
