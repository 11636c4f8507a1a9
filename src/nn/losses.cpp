// Losses, as tensor code on the public ops: autograd differentiates them through their ops'
// rules, and capture records them like any forward code.
#include "zc/factories.h"
#include "zc/nn.h"

namespace zc::nn::functional {

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (!input.defined() || !target.defined()) throw Error("mse_loss: an operand is undefined");
  if (input.shape() != target.shape()) {
    throw Error("mse_loss: input " + shape_str(input.shape()) + " and target " +
                shape_str(target.shape()) + " must have the same shape");
  }
  Tensor d = input - target;
  return mean(d * d);
}

namespace {

// Every concrete target is a class or ignore_index; traced ones are checked when they run.
void check_targets(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  if (targets.is_traced() || targets.numel() == 0) return;
  Tensor t = targets.to(Device::cpu()).to(DType::i64).contiguous();
  const int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != ignore_index && (p[i] < 0 || p[i] >= classes)) {
      throw Error("cross_entropy: target " + std::to_string(p[i]) + " at position " +
                  std::to_string(i) + " is not a class of " + std::to_string(classes) +
                  " (expected 0 to " + std::to_string(classes - 1) + ", or ignore_index " +
                  std::to_string(ignore_index) + ")");
    }
  }
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (!logits.defined() || !targets.defined()) {
    throw Error("cross_entropy: an operand is undefined");
  }
  if (logits.dim() == 1 && targets.dim() == 0) {
    return cross_entropy(logits.unsqueeze(0), targets.reshape({1}), ignore_index);
  }
  if (logits.dim() != 2 || targets.dim() != 1 || targets.shape()[0] != logits.shape()[0] ||
      !is_floating(logits.dtype()) || !is_integral(targets.dtype())) {
    throw Error("cross_entropy: expected floating logits [N, C] and integer targets [N], got " +
                shape_str(logits.shape()) + " " + std::string(dtype_name(logits.dtype())) +
                " and " + shape_str(targets.shape()) + " " +
                std::string(dtype_name(targets.dtype())) +
                " (flatten a sequence first: logits.reshape({-1, C}), targets.reshape({-1}))");
  }
  const int64_t classes = logits.shape()[1];
  check_targets(targets, classes, ignore_index);
  Tensor log_probs = log_softmax(logits, 1);
  Tensor class_ids = arange(classes).reshape({1, classes});
  if (!logits.device().is_cpu()) class_ids = class_ids.to(logits.device());
  Tensor hit = eq(targets.unsqueeze(1), class_ids);
  Tensor picked = sum(where(hit, log_probs, zeros({}, log_probs.dtype())), {1});
  Tensor counted = ne(targets, static_cast<double>(ignore_index));
  Tensor total = sum(where(counted, picked, zeros({}, picked.dtype())));
  return -total / sum(cast(counted, log_probs.dtype()));
}

}  // namespace zc::nn::functional
