// Packed launches: consecutive kernels of a schedule that do not depend on each other run as one
// CUDA kernel, each taking its own range of the blocks.
//
// A decode step of a TinyLlama-shaped model is 22 layers of 13 kernels, most of them a few
// microseconds of work: the key and value products read a 1 MB weight each beside the query's
// 8 MB, the rotary embeddings of q and k a few KB. Replayed as a CUDA graph, a kernel still
// costs its launch, its ramp-up and its drain; the key and value products' 64 blocks each
// leave half of a 132-multiprocessor GPU idle while they wait on memory. Packed, the three
// products are one kernel of 640 blocks and the two rotary passes one more.
//
// The members of a pack are emitted as device functions whose `blockIdx` and `gridDim` are
// parameters (shadowing CUDA's built-ins: the member's code reads them as it would as a kernel
// of its own), and the pack as a kernel that hands block b to the member whose range holds it,
// renumbered from 0 within that range (emit.cpp). The executable computes each member's grid as
// it would for the member alone, launches the pack over their sum and passes the ranges' ends.
//
// Contract of pack_launches (run by launch_plan, so the emitter and the loader agree):
//  - A pack is 2 to kMaxPackMembers consecutive launches, each a generated kernel (no library
//    product or convolution, no attention: its shared memory is sized for a block of its own)
//    with work, a one-dimensional grid, and the same block shape as the others.
//  - No member writes memory another member of the pack reads or writes: arena values by their
//    byte ranges (the buffer plan reuses bytes between values whose lives do not overlap, and
//    packed kernels run at the same time), a graph output and an input where the executable
//    lets the caller give them one buffer (outputs_over_inputs).
//  - Code for many sizes (symbolic schedules) is not packed.
//  - The first member's launch holds the pack (Launch::pack); the others name it
//    (Launch::packed_into) and are not launched on their own.
#pragma once

#include <vector>

#include "codegen/backends/cuda/launch.h"

namespace zc::codegen::cuda {

inline constexpr size_t kMaxPackMembers = 8;

void pack_launches(const Schedule& s, const BufferPlan& plan, std::vector<Launch>& launches);

// The runs pack_launches would make if values alone decided (the backend's runs_together, for
// plan_buffers): per kernel, the last kernel of its run. With the buffer plan made so, no arena
// bytes stand between a run's members, and pack_launches packs the runs (unless a graph output
// may lie over an input it reads).
std::vector<int32_t> pack_runs(const Schedule& s);

// The pack's kernel symbol ("zc_pack<first member>").
std::string pack_symbol(size_t first);

}  // namespace zc::codegen::cuda
