// The record of what a compiled function (compiled_function.h) was called with, kept in the
// cache so that the next process prepares the function before its first call: on a background
// thread, while the process does other work, it traces the function at the recorded input
// metadata and compiles it, which in a warm process means loading its graph and binary.
//
// Why. A compiled function is called at a point the process reaches late: a compiled optimizer
// step, after the backward pass. On a GPU, loading a binary there waits for the work already
// queued (CUDA may synchronize the context to load a module), so the first step stood still for
// the backward and then for the load. Prepared at the optimizer's construction, the load is off
// the step's path. The metadata cannot be predicted from the function alone: the fused AdamW
// update takes the gradients' own layout, which the backward's allocation decides.
//
// One record per function name and context (what the caller says makes the calls alike: the
// optimizer's parameters), an autotune-level entry like the cuBLASLt products record: a hint,
// never a result. It lists the input metadata of the most recent distinct calls, newest first,
// at most kMaxRecordedCalls. A missing, stale or unreadable record only means the function
// compiles at its first call, as without one. ZC_FORCE_DISABLE_CACHES=1 keeps it in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

// The record of function `name` in `context` is kept under call_record_key.
#include "ops/registry.h"
#include "runtime/driver/compile_keys.h"

namespace zc::runtime {

inline constexpr size_t kMaxRecordedCalls = 4;

using CallMetas = std::vector<ops::TensorMeta>;
CallMetas call_metas(std::span<const Tensor> inputs);

// The record's bytes, and back; decoding raises zc::Error naming what is malformed.
std::vector<uint8_t> encode_call_record(std::span<const CallMetas> calls);
std::vector<CallMetas> decode_call_record(std::span<const uint8_t> bytes);

// The record after a call with `call`: it first, then the rest of `found` without it, capped.
std::vector<CallMetas> note_call(std::span<const CallMetas> found, const CallMetas& call);

}  // namespace zc::runtime
