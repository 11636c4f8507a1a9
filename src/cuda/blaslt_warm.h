// cuBLASLt's kernels loaded before a process's first products need them.
//
// CUDA loads a kernel when it is first launched (lazy loading, its default since 12.2), and some
// of cuBLASLt's take milliseconds to load while the GPU waits: a warm process's first gpt12
// training step spent 6.4 ms of its 42 loading one (the split-K product of M=1024 N=768
// K=3072), with everything behind it queued. Which products a process will run is known only
// once it runs them, but the previous process that ran the same model on this machine knew.
// So the runtime keeps the products each process planned in its cache
// (runtime/records/gemm_record.h) and hands them to the next process's cuBLASLt start
// (blaslt_start.h), which, as soon as the library is ready on the device and while the process is
// still building its model, plans each and runs it once over scratch memory on a stream of its own
// (warm_products). The process's own products then find their plans made and their kernels loaded;
// a product that comes first meanwhile runs without waiting for the warm-up.
#pragma once

#include <span>
#include <vector>

#include "cuda/blaslt.h"

namespace zc::cuda {

// What a process's cuBLASLt start warms on `device`: the products the previous process planned
// there. Called on the start's background thread; must not raise (an unusable record is none).
using WarmSource = std::vector<GemmUse> (*)(int device);
// Installs the source for the life of the process (the runtime does so when libzc loads);
// null uninstalls. Without one nothing is warmed.
void set_warm_source(WarmSource source);
WarmSource warm_source();

// Plans each product and runs it once on `device` (current on this thread) over scratch memory
// whose pointers have the product's alignment, on a stream of its own, then waits for them and
// frees the scratch. A product that cannot be planned or run (no algorithm, no memory) is
// skipped, and so is one whose operands would need more than 1 GiB. Returns how many ran.
// ZC_LOGS=timing reports the time it took.
int warm_products(int device, std::span<const GemmUse> products);

}  // namespace zc::cuda
