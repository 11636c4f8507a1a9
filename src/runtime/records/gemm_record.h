// The record of the cuBLASLt products a process ran on a GPU, kept in the cache so that the next
// process on the same kind of GPU loads their kernels while it starts (cuda/blaslt_warm.h says
// why that pays).
//
// One record per GPU kind: an autotune-level entry made for the GPU (name, compute capability,
// multiprocessors) and the cuBLASLt and driver versions, since those choose the kernels. It
// holds, in order, the products the last process ran on such a GPU, then those of the record it
// found that it did not run (another model's), at most kMaxRecordedProducts. A process reads it
// when cuBLASLt has started on a device (the warm source, installed when libzc loads) and
// writes it back when it exits, if it ran a product the record lacked. The record is a hint: a
// missing, stale or unreadable one only means kernels load when first used; a process that
// never exits normally leaves it as it was. ZC_FORCE_DISABLE_CACHES=1 keeps it in memory only,
// like everything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cuda/blaslt.h"

namespace zc::runtime {

inline constexpr size_t kMaxRecordedProducts = 256;

// The record's bytes, and back; decoding raises zc::Error for bytes that are not a record or
// hold a product cuBLASLt could not be asked for.
std::vector<uint8_t> encode_gemm_record(std::span<const cuda::GemmUse> products);
std::vector<cuda::GemmUse> decode_gemm_record(std::span<const uint8_t> bytes);

// What the record becomes after a process that found `found` ran `planned` (planned_products:
// those it only warmed are not counted as run): what it ran, in order, then the rest of
// `found`, capped. Equal to `found` (same products, same order) when there is nothing new.
std::vector<cuda::GemmUse> merge_gemm_record(std::span<const cuda::GemmUse> found,
                                             std::span<const cuda::GemmUse> planned);

}  // namespace zc::runtime
