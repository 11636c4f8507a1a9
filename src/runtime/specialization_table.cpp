#include "runtime/specialization_table.h"

#include <algorithm>
#include <array>

#include "util/check.h"

namespace zc::runtime {

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
