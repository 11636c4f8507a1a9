// Saving and resuming a training run: the model's parameters and buffers, the optimizer's state,
// the learning-rate schedule's step and the process generator's state, in one directory, so
// that a job restarted from it continues as if it had not stopped (the same values, bit for
// bit, on the same machine and build).
//
//   zc::save_training_state("ckpt/step-1000", *model, optimizer, &schedule);
//   ...a new process builds the same model, optimizer and schedule, then:
//   zc::load_training_state("ckpt/step-1000", *model, optimizer, &schedule);
//
// The directory holds model.safetensors (the module's tensors by name, as save_safetensors
// writes them), optimizer.safetensors (Optimizer::save) and trainer.safetensors (the generator's
// words and the schedule's state). A missing file, a module or optimizer that does not fit the
// saved one, or a schedule given on one side only is a zc::Error naming it; loading checks
// everything before it changes anything it can (the model's tensors and the optimizer each load
// all or nothing).
#pragma once

#include <string>

#include "zc/nn.h"
#include "zc/optim.h"

namespace zc {

void save_training_state(const std::string& dir, const nn::Module& model,
                         const optim::Optimizer& optimizer,
                         const optim::LRScheduler* schedule = nullptr);
void load_training_state(const std::string& dir, nn::Module& model, optim::Optimizer& optimizer,
                         optim::LRScheduler* schedule = nullptr);

}  // namespace zc
