// Replaying what an executable queues on a GPU as one CUDA graph, so a call costs one launch
// instead of one per kernel (torch.compile's "reduce-overhead"). The first call runs the
// executable as it is (lazy work such as library plans happens there, outside any recording);
// the second records its launches (on a private stream, so other threads' work is never caught
// in the recording) into a graph whose buffers are the recording's own: inputs that change per
// call (the user's tensors) are copied into them, outputs copied out into new tensors, scratch
// kept. Other inputs (parameters) are used in place: a call where one of them has moved (new
// storage) records again. One recording per stream, since two streams' replays must not share
// buffers; calls are serialized while they queue work, not while the GPU runs it.
#pragma once

#include <memory>
#include <vector>

#include "codegen/executable.h"

namespace zc::codegen::cuda {

// `exec` must run raw (RawExecutable::can_run_raw) on a CUDA device; per_call[i] says whether
// graph input i changes from call to call.
std::shared_ptr<const Executable> make_graph_executable(std::shared_ptr<const Executable> exec,
                                                        std::vector<bool> per_call);

}  // namespace zc::codegen::cuda
