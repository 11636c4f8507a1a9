#include "runtime/call/specialization.h"

#include <algorithm>
#include <array>

#include "tensor/random.h"
#include "util/check.h"
#include "zc/factories.h"

namespace zc::runtime {

std::vector<Tensor> draw_seeds(const Specialization& s) {
  const size_t n = s.seed_slots.size();
  std::vector<Tensor> seeds(n);
  if (n == 0) return seeds;
  std::vector<int64_t> drawn(n);
  random_seeds(drawn.data(), static_cast<int64_t>(n));
  const Tensor on_cpu = from_values(drawn, {static_cast<int64_t>(n)});
  // One block per device the seeds live on (a graph's rand_likes share the call's device).
  std::vector<std::pair<Device, Tensor>> blocks;
  for (size_t k = 0; k < n; ++k) {
    const Device d = s.bound[s.seed_slots[k]].device();
    auto b =
        std::find_if(blocks.begin(), blocks.end(), [&](const auto& p) { return p.first == d; });
    if (b == blocks.end()) b = blocks.insert(blocks.end(), {d, d.is_cpu() ? on_cpu : on_cpu.to(d)});
    seeds[k] = Tensor::view_of(b->second.unsafe_impl()->storage, {}, {}, static_cast<int64_t>(k),
                               DType::i64);
  }
  return seeds;
}

std::vector<Tensor> call_inputs(const Specialization& s, std::span<const Tensor> xs,
                                std::span<const Tensor> seeds) {
  std::vector<Tensor> inputs = s.bound;
  for (const UserSlot& u : s.user_slots) inputs[u.slot] = xs[u.input];
  for (size_t k = 0; k < s.seed_slots.size(); ++k) inputs[s.seed_slots[k]] = seeds[k];
  return inputs;
}

std::shared_ptr<const Specialization> SpecializationTable::find(
    std::span<const Tensor> inputs) const {
  constexpr size_t kInline = 8;
  std::array<uint64_t, kInline> inline_hashes;
  std::vector<uint64_t> many;
  std::span<uint64_t> hashes(inline_hashes.data(), std::min(inputs.size(), kInline));
  if (inputs.size() > kInline) {
    many.resize(inputs.size());
    hashes = many;
  }
  for (size_t i = 0; i < inputs.size(); ++i) hashes[i] = capture::input_guard_hash(inputs[i]);
  for (const auto& s : list_) {
    if (s->guards.size() != inputs.size()) continue;
    bool all = true;
    for (size_t i = 0; all && i < inputs.size(); ++i) {
      all = capture::guard_matches(s->guards[i], hashes[i], inputs[i]);
    }
    if (all) return s;
  }
  return nullptr;
}

void SpecializationTable::add(std::shared_ptr<const Specialization> s) {
  ZC_CHECK(s != nullptr, "a null specialization");
  list_.push_back(std::move(s));
}

}  // namespace zc::runtime
