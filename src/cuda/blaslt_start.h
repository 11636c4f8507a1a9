// cuBLASLt's start on a background thread. Opening the library (50-70 ms) and its one-time
// initialization on a device (80-110 ms; prepare_blaslt) cost more than a warm process spends on
// everything else before its first result. So both start as early as the process shows it will
// use a GPU, and run while it builds or loads its model:
//   - the library is opened when the process first looks for CUDA devices (preload_blaslt);
//   - it is initialized on a device when that device's context is made (prestart_blaslt), which
//     the first tensor moved there does, or, on a machine that shows a single GPU, the
//     preload's thread does as soon as the library is open (docs/adr/0013);
//   - and, should ZC_CUDA_PRESTART=0 turn those two off, when the CUDA backend knows a graph
//     needs it: when it emits the graph's source (so a cold compile's NVRTC run overlaps it) and
//     when it loads the compiled graph (a warm process).
// The first product waits only for what is left. A process that never asks about CUDA loads
// nothing. Once the library is ready the same thread loads the kernels of the products the
// previous process ran (blaslt_warm.h); products do not wait for that.
//
// A process that exits while the start is under way would run the library's exit handlers
// while the start (its warm-up included) is still inside the library. So every thread told by
// blaslt_start_state that it is still starting or warming waits for it to finish when that
// thread ends, and exit() runs the calling
// thread's such waits before any other exit handler. Starting it does not make a thread wait:
// compiles start it from short-lived worker threads, which must not be held up. The thread
// that calls a compiled graph asks, on every call. (A thread that never asked and calls exit()
// while the start runs is not covered.)
#pragma once

#include <cstdint>
#include <string>

namespace zc::cuda {

enum class BlasLtStart : uint8_t {
  idle,      // not asked for on this device: gemm() starts the library itself, and waits
  starting,  // under way on the background thread
  ready,     // gemm() runs without waiting
  failed,    // no usable cuBLASLt: gemm() raises the reason (blaslt_start_error)
};

// Starts preparing cuBLASLt for `device` on a background thread unless that was asked before;
// returns at once. Needs a usable GPU (check_device).
void start_blaslt(int device);
// The early starts above; each returns at once and does nothing when ZC_CUDA_PRESTART=0 or no
// cuBLASLt is installed. preload_blaslt opens the library on a background thread, then makes
// the context of a machine's only GPU (called by device discovery, so the calling thread must not
// ask for the devices; the background thread waits for discovery to end); prestart_blaslt(device)
// is start_blaslt, called when the device's context is made. The calling thread waits for them at
// its end, as above.
void preload_blaslt();
void prestart_blaslt(int device);
// As ZC_CUDA_PRESTART=0 for the rest of this process, whatever its environment says, without
// changing that environment (children still inherit it): for a process that only names the
// GPUs, like zc bench's parent. Before the first device discovery to keep its context away.
void disable_prestart();
// Whether the early starts are on: ZC_CUDA_PRESTART is not 0 and disable_prestart() was not
// called. NVRTC's helper processes start with a context too (toolchain/nvrtc_workers.h).
bool prestart_enabled();
// Where the start stands; a thread told `starting` waits for it at its end, as above.
BlasLtStart blaslt_start_state(int device);
// Starts it if needed and waits until it is no longer starting; returns the state.
BlasLtStart wait_for_blaslt(int device);
// Starts it on `device` if needed, then waits until no background start is running on any
// device, warm-ups (blaslt_warm.h) included: for tests and benchmarks that count plans.
void wait_for_blaslt_warmup(int device);
// Why it failed; empty otherwise.
std::string blaslt_start_error(int device);

}  // namespace zc::cuda
