#include "runtime/specialization_table.h"

#include "util/check.h"

namespace zc::runtime {

std::shared_ptr<const Specialization> SpecializationTable::find(const Tensor& x) const {
  uint64_t h = capture::input_guard_hash(x);
  for (const auto& s : list_) {
    if (capture::guard_matches(s->guard, h, x)) return s;
  }
  return nullptr;
}

void SpecializationTable::add(std::shared_ptr<const Specialization> s) {
  ZC_CHECK(s != nullptr, "a null specialization");
  list_.push_back(std::move(s));
}

}  // namespace zc::runtime
