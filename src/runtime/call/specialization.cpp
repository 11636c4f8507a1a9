#include "runtime/call/specialization.h"

#include <algorithm>
#include <array>

#include "tensor/assign.h"
#include "tensor/random.h"
#include "util/check.h"
#include "util/hash.h"
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

std::vector<Tensor> run_inference(const Specialization& s, const Executable& exec,
                                  std::span<const Tensor> xs) {
  std::vector<const Tensor*> args(s.bound.size());
  for (size_t i = 0; i < s.bound.size(); ++i) args[i] = &s.bound[i];
  for (const UserSlot& u : s.user_slots) args[u.slot] = &xs[u.input];
  const std::vector<Tensor> seeds = draw_seeds(s);
  for (size_t k = 0; k < seeds.size(); ++k) args[s.seed_slots[k]] = &seeds[k];
  std::vector<Tensor> outs = exec.run(args);
  if (s.writes.empty()) return outs;
  ZC_CHECK(outs.size() >= s.writes.size(), "a graph that updates buffers lacks their outputs");
  for (const capture::BufferWrite& w : s.writes) assign_values(s.bound[w.binding], outs[w.output]);
  outs.resize(outs.size() - s.writes.size());
  return outs;
}

namespace {

uint64_t tag_hash(std::string_view tag) {
  uint64_t h = 0x5be5c1a1;
  for (char c : tag) h = hash_combine(h, static_cast<uint8_t>(c));
  return hash_combine(h, tag.size());
}

// The hash an exact specialization is indexed by: its guards' hashes and its tag, which the
// call's inputs of the same metadata reproduce.
uint64_t exact_hash(std::span<const uint64_t> guard_hashes, std::string_view tag) {
  uint64_t h = tag_hash(tag);
  for (uint64_t g : guard_hashes) h = hash_combine(h, g);
  return hash_combine(h, guard_hashes.size());
}

bool in_range(const Specialization& s, size_t input, size_t dim, int64_t size) {
  for (const SizeRange& r : s.ranges) {
    if (r.input == input && static_cast<size_t>(r.dim) == dim) {
      return size >= r.min && size <= r.max;
    }
  }
  return false;
}

bool ranged_dim(const Specialization& s, size_t input, size_t dim) {
  for (const SizeRange& r : s.ranges) {
    if (r.input == input && static_cast<size_t>(r.dim) == dim) return true;
  }
  return false;
}

}  // namespace

bool Specialization::matches(std::span<const Tensor> inputs, std::span<const uint64_t> hashes,
                             std::string_view call_tag) const {
  if (guards.size() != inputs.size() || tag != call_tag) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const capture::InputGuard& g = guards[i];
    const Tensor& x = inputs[i];
    if (ranges.empty()) {
      if (!capture::guard_matches(g, hashes[i], x)) return false;
      continue;
    }
    if (g.dtype != x.dtype() || g.device != x.device() || g.contiguous != x.is_contiguous() ||
        g.wrapped_number != x.unsafe_impl()->wrapped_number ||
        static_cast<int64_t>(g.shape.size()) != x.dim()) {
      return false;
    }
    for (size_t d = 0; d < g.shape.size(); ++d) {
      const int64_t size = x.shape()[d];
      if (ranged_dim(*this, i, d) ? !in_range(*this, i, d, size) : size != g.shape[d]) {
        return false;
      }
    }
  }
  return true;
}

std::shared_ptr<const Specialization> SpecializationTable::find(std::span<const Tensor> inputs,
                                                                std::string_view tag) const {
  constexpr size_t kInline = 8;
  std::array<uint64_t, kInline> inline_hashes;
  std::vector<uint64_t> many;
  std::span<uint64_t> hashes(inline_hashes.data(), std::min(inputs.size(), kInline));
  if (inputs.size() > kInline) {
    many.resize(inputs.size());
    hashes = many;
  }
  for (size_t i = 0; i < inputs.size(); ++i) hashes[i] = capture::input_guard_hash(inputs[i]);
  size_t best = list_.size();
  if (auto it = exact_.find(exact_hash(hashes, tag)); it != exact_.end()) {
    for (size_t at : it->second) {
      if (list_[at]->matches(inputs, hashes, tag)) {
        best = at;
        break;
      }
    }
  }
  for (size_t at : ranged_) {
    if (at >= best) break;
    if (list_[at]->matches(inputs, hashes, tag)) {
      best = at;
      break;
    }
  }
  return best < list_.size() ? list_[best] : nullptr;
}

void SpecializationTable::add(std::shared_ptr<const Specialization> s) {
  ZC_CHECK(s != nullptr, "a null specialization");
  list_.push_back(std::move(s));
  const size_t at = list_.size() - 1;
  const Specialization& added = *list_[at];
  if (!added.ranges.empty()) {
    ranged_.push_back(at);
    return;
  }
  std::vector<uint64_t> hashes;
  for (const capture::InputGuard& g : added.guards) hashes.push_back(g.hash);
  exact_[exact_hash(hashes, added.tag)].push_back(at);
}

void SpecializationTable::clear() {
  list_.clear();
  exact_.clear();
  ranged_.clear();
}

void SpecializationTable::reindex() {
  std::vector<std::shared_ptr<const Specialization>> list = std::move(list_);
  clear();
  for (auto& s : list) add(std::move(s));
}

}  // namespace zc::runtime
