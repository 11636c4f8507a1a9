// One compiled graph's CUDA source as several NVRTC programs, and their cubins as one binary.
//
// NVRTC compiles a program on one core, and a graph's time to its first call waits for its
// largest program: a BERT layer's 24 launches as one program took 0.96 s of NVRTC on the H200
// host while the process's other cores (and NVRTC helpers, toolchain/nvrtc_workers.h) were idle.
// So a source whose kernels are large together is cut, between kernels, into programs of
// about kProgramBytes of kernels each (at most kMaxPrograms), each with the source's shared head
// (prelude and helpers), compiled side by side; their cubins travel as one binary.
//
// Contract:
//  - split_programs: a source of fewer than 2 * kProgramBytes of kernels, or of one kernel, is
//    one program, the source itself. Otherwise every kernel is in exactly one program, in
//    source order, each program the head followed by its kernels. The cut depends on the
//    source alone, so one source always gives the same binary, on any machine.
//  - pack_cubins: one cubin is itself (an ELF file, as before programs were cut); several are
//    a container that no ELF file starts like. unpack_cubins reads either back (an empty binary
//    is no cubin) and raises zc::Error for a container cut short or garbled.
//  - Kernels are found by name in whichever cubin holds them (executable.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zc::codegen::cuda {

// Each kernel of an emitted source starts with a line that begins so (emit.cpp).
inline constexpr std::string_view kKernelMarker = "// kernel ";
inline constexpr size_t kProgramBytes = 8 * 1024;
inline constexpr size_t kMaxPrograms = 8;

std::vector<std::string> split_programs(std::string_view source);

std::vector<uint8_t> pack_cubins(const std::vector<std::vector<uint8_t>>& cubins);
std::vector<std::vector<uint8_t>> unpack_cubins(std::span<const uint8_t> binary);

}  // namespace zc::codegen::cuda
