// The compiled specializations of a module: the one lookup both the call's fast path and its
// lookup after the capture lock use, first match winning.
#include <gtest/gtest.h>

#include "runtime/specialization_table.h"
#include "zc/zc.h"

namespace zc {
namespace {

using runtime::Specialization;

// A specialization for inputs like `x`, told apart from others by `tag`.
std::shared_ptr<const Specialization> for_input(const Tensor& x, size_t tag) {
  auto s = std::make_shared<Specialization>();
  s->guard = capture::input_guard(x);
  s->user_slots = {tag};
  return s;
}

TEST(SpecializationTable, TheOldestMatchingSpecializationWins) {
  Tensor x = randn({2, 3});
  runtime::SpecializationTable table;
  EXPECT_EQ(table.find(x), nullptr);
  table.add(for_input(randn({4}), 0));  // matches no x below
  table.add(for_input(x, 1));
  table.add(for_input(x, 2));  // matches x too: loses to the older one
  ASSERT_EQ(table.size(), 3u);
  for (int call = 0; call < 3; ++call) {
    auto hit = table.find(randn({2, 3}));
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(hit->user_slots, std::vector<size_t>{1}) << call;
  }
  EXPECT_EQ(table.find(randn({4}))->user_slots, std::vector<size_t>{0});
}

TEST(SpecializationTable, EveryGuardedPropertyCanMiss) {
  runtime::SpecializationTable table;
  table.add(for_input(randn({2, 3}), 0));
  EXPECT_NE(table.find(randn({2, 3})), nullptr);
  EXPECT_EQ(table.find(randn({3, 2})), nullptr);
  EXPECT_EQ(table.find(randn({2, 3}).to(DType::f64)), nullptr);
  EXPECT_EQ(table.find(randn({3, 2}).t()), nullptr);  // [2, 3] but not contiguous
  table.clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find(randn({2, 3})), nullptr);
}

}  // namespace
}  // namespace zc
