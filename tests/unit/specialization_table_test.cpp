// The compiled specializations of a module: the one lookup both the call's fast path and its
// lookup after the capture lock use, first match winning.
#include <gtest/gtest.h>

#include "runtime/call/specialization.h"
#include "zc/zc.h"

namespace zc {
namespace {

using runtime::Specialization;

// A specialization for inputs like `x`, told apart from others by `tag`.
std::shared_ptr<const Specialization> for_input(const Tensor& x, size_t tag) {
  auto s = std::make_shared<Specialization>();
  s->guards = {capture::input_guard(x)};
  s->user_slots = {{tag, 0}};
  return s;
}

// Tags as a list, for comparing.
std::vector<size_t> tags(const std::shared_ptr<const Specialization>& s) {
  std::vector<size_t> out;
  for (const runtime::UserSlot& u : s->user_slots) out.push_back(u.slot);
  return out;
}

TEST(SpecializationTable, TheOldestMatchingSpecializationWins) {
  Tensor x = randn({2, 3});
  runtime::SpecializationTable table;
  EXPECT_EQ(table.find({&x, 1}), nullptr);
  table.add(for_input(randn({4}), 0));  // matches no x below
  table.add(for_input(x, 1));
  table.add(for_input(x, 2));  // matches x too: loses to the older one
  ASSERT_EQ(table.size(), 3u);
  for (int call = 0; call < 3; ++call) {
    Tensor y = randn({2, 3});
    auto hit = table.find({&y, 1});
    ASSERT_NE(hit, nullptr);
    EXPECT_EQ(tags(hit), std::vector<size_t>{1}) << call;
  }
  Tensor z = randn({4});
  EXPECT_EQ(tags(table.find({&z, 1})), std::vector<size_t>{0});
}

TEST(SpecializationTable, EveryGuardedPropertyCanMiss) {
  runtime::SpecializationTable table;
  table.add(for_input(randn({2, 3}), 0));
  auto find = [&](const Tensor& x) { return table.find({&x, 1}); };
  EXPECT_NE(find(randn({2, 3})), nullptr);
  EXPECT_EQ(find(randn({3, 2})), nullptr);
  EXPECT_EQ(find(randn({2, 3}).to(DType::f64)), nullptr);
  EXPECT_EQ(find(randn({3, 2}).t()), nullptr);  // [2, 3] but not contiguous
  table.clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(find(randn({2, 3})), nullptr);
}

// Several inputs: every input's guard must hold, and the count must be the same.
TEST(SpecializationTable, SeveralInputsMatchOnlyAsAWhole) {
  Tensor a = randn({2, 3}), b = randint(0, 5, {2});
  auto s = std::make_shared<Specialization>();
  s->guards = {capture::input_guard(a), capture::input_guard(b)};
  runtime::SpecializationTable table;
  table.add(s);
  std::vector<Tensor> same{randn({2, 3}), randint(0, 5, {2})};
  EXPECT_EQ(table.find(same), s);
  std::vector<Tensor> second_differs{randn({2, 3}), randint(0, 5, {3})};
  EXPECT_EQ(table.find(second_differs), nullptr);
  std::vector<Tensor> swapped{randint(0, 5, {2}), randn({2, 3})};
  EXPECT_EQ(table.find(swapped), nullptr);
  EXPECT_EQ(table.find({&a, 1}), nullptr);  // one input of the two
  std::vector<Tensor> three{a, b, a};
  EXPECT_EQ(table.find(three), nullptr);
  std::vector<Tensor> nine(9, a);  // past the inline hashes
  auto wide = std::make_shared<Specialization>();
  for (const Tensor& t : nine) wide->guards.push_back(capture::input_guard(t));
  table.add(wide);
  EXPECT_EQ(table.find(nine), wide);
  nine[8] = randn({3, 3});
  EXPECT_EQ(table.find(nine), nullptr);
}

}  // namespace
}  // namespace zc
