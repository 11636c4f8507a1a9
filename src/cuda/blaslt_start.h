// cuBLASLt's start on a background thread. Opening the library and its one-time initialization
// cost a process 100-200 ms (prepare_blaslt), more than a warm process spends on everything
// else before its first result. The CUDA backend starts it as soon as it knows a graph needs
// it: when it emits the graph's source (so a cold compile's NVRTC run overlaps it) and when it
// loads the compiled graph (a warm process), so the first product waits only for what is left.
//
// A process that exits while the start is under way would run the library's exit handlers
// while the start is still inside the library. So every thread told that it is still starting
// (blaslt_start_state) waits for it to finish when that thread ends, and exit() runs the calling
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
// Where the start stands; a thread told `starting` waits for it at its end, as above.
BlasLtStart blaslt_start_state(int device);
// Starts it if needed and waits until it is no longer starting; returns the state.
BlasLtStart wait_for_blaslt(int device);
// Why it failed; empty otherwise.
std::string blaslt_start_error(int device);

}  // namespace zc::cuda
