// One compiled graph's CUDA source as several NVRTC programs, and their cubins as one binary.
//
// NVRTC compiles a program on one core, and a graph's time to its first call waits for its
// largest program: a BERT layer's 24 launches as one program took 0.96 s of NVRTC on the H200
// host while the process's other cores (and NVRTC helpers, toolchain/nvrtc_workers.h) were idle.
// So a source whose kernels are large together is cut, between kernels, into programs of
// about kProgramBytes of kernels each (at most kMaxPrograms), each with the source's shared head
// (prelude and helpers), compiled side by side; their cubins travel as one binary.
//
// NVRTC's time follows the code after unrolling, not the source's bytes: a fused attention
// kernel unrolls its rows, its key chunks and its value rows, and took 190 ms of NVRTC for 5.8 KB
// of source where a 3.4 KB pointwise kernel took 22 (sm_90, a TinyLlama layer's prefill). So a
// kernel's marker line may end in ", weight W", and its bytes count W times. The cut is the one
// whose costliest program costs least, since the build waits for that one: a prefill's first
// token waited 0.85 s on the H200 host for the program that held its attention and six other
// kernels.
//
// Contract:
//  - split_programs: a source of fewer than 2 * kProgramBytes of kernels (weighted), or of one
//    kernel, is one program, the source itself. Otherwise every kernel is in exactly one of at
//    most min(kMaxPrograms, kernels, cost / kProgramBytes rounded up) programs, in source
//    order, each program the head followed by its kernels, the costliest program as cheap as
//    such a cut allows. The cut depends on the source alone, so one source always gives the
//    same binary, on any machine.
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
// What may end a marker line: the kernel's weight, a whole number (1 without it).
inline constexpr std::string_view kWeightMarker = ", weight ";
inline constexpr size_t kProgramBytes = 8 * 1024;
inline constexpr size_t kMaxPrograms = 8;

std::vector<std::string> split_programs(std::string_view source);

std::vector<uint8_t> pack_cubins(const std::vector<std::vector<uint8_t>>& cubins);
std::vector<std::vector<uint8_t>> unpack_cubins(std::span<const uint8_t> binary);

}  // namespace zc::codegen::cuda
