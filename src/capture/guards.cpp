#include "capture/guards.h"

#include "util/hash.h"

namespace zc::capture {

uint64_t input_guard_hash(const Tensor& x) {
  uint64_t h =
      mix64(static_cast<uint64_t>(x.dtype()) | static_cast<uint64_t>(x.device().type) << 8 |
            static_cast<uint64_t>(x.device().index) << 16 |
            static_cast<uint64_t>(x.is_contiguous()) << 48 |
            static_cast<uint64_t>(x.unsafe_impl()->wrapped_number) << 49);
  for (int64_t d : x.shape()) h = hash_combine(h, static_cast<uint64_t>(d));
  return h;
}

InputGuard input_guard(const Tensor& x) {
  return InputGuard{
      x.shape(),          x.dtype(), x.device(), x.is_contiguous(), x.unsafe_impl()->wrapped_number,
      input_guard_hash(x)};
}

bool guard_matches(const InputGuard& g, uint64_t hash, const Tensor& x) {
  return g.hash == hash && g.dtype == x.dtype() && g.device == x.device() && g.shape == x.shape() &&
         g.contiguous == x.is_contiguous() && g.wrapped_number == x.unsafe_impl()->wrapped_number;
}

namespace {
uint64_t hash_str(uint64_t h, const std::string& s) {
  for (char c : s) h = hash_combine(h, static_cast<uint8_t>(c));
  return hash_combine(h, s.size());
}

// Type names and train/eval of every module in the tree.
void walk(const nn::Module& m, uint64_t& h) {
  h = hash_str(h, m.type_name());
  h = hash_combine(h, m.is_training());
  for (const auto& [name, child] : m.named_children()) {
    h = hash_str(h, name);
    walk(*child, h);
  }
}

void hash_tensors(const std::vector<std::pair<std::string, Tensor>>& list, uint64_t& h) {
  h = hash_combine(h, list.size());
  for (const auto& [name, t] : list) {
    h = hash_str(h, name);
    // Identity too: the compiled graph holds these handles as its inputs.
    h = hash_combine(h, reinterpret_cast<uintptr_t>(t.unsafe_impl()));
    h = hash_combine(h, static_cast<uint64_t>(t.dtype()));
    for (int64_t d : t.shape()) h = hash_combine(h, static_cast<uint64_t>(d));
  }
}
}  // namespace

uint64_t module_fingerprint(const nn::Module& m) {
  uint64_t h = 0x2c0ffee;
  walk(m, h);
  hash_tensors(m.named_parameters(), h);
  hash_tensors(m.named_buffers(), h);
  return h;
}

}  // namespace zc::capture
