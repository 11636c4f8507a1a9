// The weights of a transformers checkpoint directory, loaded into a module's tensors by name.
// Input: the directory (model.safetensors, or model.safetensors.index.json and its shards) and,
// for each tensor to fill, the names a checkpoint may give it. Output: every target holds the
// stored values in its own dtype; or a zc::Error naming the file or tensor and the cause (no
// weights file, a malformed index, a tensor missing, of the wrong shape or of a dtype that is
// not floating-point, a tensor the model has no place for).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "zc/tensor.h"

namespace zc::models {

struct WeightSource {
  // The names this tensor may have in the checkpoint, preferred first (GPT-2's are found with
  // and without the "transformer." prefix); messages use the first.
  std::vector<std::string> names;
  Tensor target;  // a parameter of the model, filled in place (its handles stay valid)
  // Stored as [in, out], the transpose of target (GPT-2's Conv1D weights).
  bool transposed = false;
};

struct CheckpointFiles {
  std::vector<std::string> files;  // paths, each once
  std::string description;         // "DIR/model.safetensors" or "the 3 shards of DIR/..."
};

// The weight files of `dir`: model.safetensors when present (as transformers prefers it), else
// the shards model.safetensors.index.json names. Raises zc::Error when there are none, the
// index is malformed or names a shard that is not there.
CheckpointFiles checkpoint_files(const std::string& dir);

// Fills every source from the files: the target takes the stored values converted from their
// dtype (F32, BF16, F16, F64) to `dtype`, whatever the target's was. A stored tensor that no
// source names raises zc::Error unless `ignored(name)`: a checkpoint with tensors the model
// lacks was made for another model. `who` starts messages.
void load_checkpoint(const CheckpointFiles& checkpoint, const std::vector<WeightSource>& sources,
                     const std::function<bool(const std::string&)>& ignored, DType dtype,
                     const std::string& who);

// The whole of a text file; zc::Error naming it when it cannot be read.
std::string read_text_file(const std::string& path, const std::string& who);

}  // namespace zc::models
