// The arguments a captured graph's executable takes: the caller's tensors for its user inputs,
// in order, and the bound tensor of every other input (parameters, lifted constants).
#pragma once

#include <span>
#include <vector>

#include "capture/capture.h"

namespace zc::test {

inline std::vector<const Tensor*> captured_args(const capture::Captured& cap,
                                                std::span<const Tensor> user) {
  std::vector<const Tensor*> args;
  size_t next = 0;
  for (size_t i = 0; i < cap.graph.inputs.size(); ++i) {
    args.push_back(cap.graph.inputs[i].kind == ir::InputKind::user ? &user[next++]
                                                                   : &cap.bindings[i].tensor);
  }
  return args;
}

}  // namespace zc::test
