// What both tracers share: traced tensors carry their value's metadata, and concrete tensors
// become constants by identity, small ones embedded and large ones left to the caller.
#include <gtest/gtest.h>

#include "ir/tracing.h"
#include "zc/zc.h"

namespace zc {
namespace {

struct NeverForced : TraceSlot {
  void force(TensorImpl&) override { ADD_FAILURE() << "a traced value was forced"; }
};

TEST(Tracing, TracedTensorHasItsValuesMetadataWrappedNumberIncluded) {
  // A value that came from a C++ number must keep promoting like one when traced code reads it.
  for (bool wrapped : {false, true}) {
    ops::TensorMeta meta{{}, DType::f64, Device::cpu(), wrapped};
    Tensor t = ir::traced_tensor(meta, std::make_shared<NeverForced>());
    EXPECT_TRUE(t.is_traced());
    EXPECT_EQ(ops::meta_of(t), meta) << wrapped;
  }
  ops::TensorMeta meta{{2, 3}, DType::i64, Device::cpu()};
  Tensor t = ir::traced_tensor(meta, std::make_shared<NeverForced>());
  EXPECT_EQ(ops::meta_of(t), meta);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.unsafe_impl()->storage, nullptr);
  Tensor strided = ir::traced_tensor(meta, {1, 2}, std::make_shared<NeverForced>());
  EXPECT_EQ(strided.strides(), (Shape{1, 2}));
  EXPECT_FALSE(strided.is_contiguous());
}

TEST(Tracing, ConstantTableGivesOneValuePerTensorAndEmbedsScalarsWithTheirFlag) {
  ir::ConstantTable table;
  std::vector<Tensor> embedded, large;
  auto embed = [&](Tensor data) {
    embedded.push_back(data);
    return static_cast<ir::ValueId>(embedded.size() + large.size() - 1);
  };
  auto lift = [&](const Tensor& t) {
    large.push_back(t);
    return static_cast<ir::ValueId>(embedded.size() + large.size() - 1);
  };
  Tensor two = wrap_scalar(2.5);
  Tensor big = randn({ir::kMaxEmbeddedConstant + 1});
  Tensor small = randn({3}).slice(0, 1, 2);  // one element of a view past its storage's start
  Tensor pair = randn({2});  // two elements: lifted, so its values are no part of the structure

  EXPECT_EQ(table.find(two), -1);
  ir::ValueId v2 = table.value_of(two, embed, lift);
  EXPECT_EQ(table.value_of(two, embed, lift), v2);  // met again: the same value
  EXPECT_EQ(table.find(two), v2);
  ASSERT_EQ(embedded.size(), 1u);
  EXPECT_NE(embedded[0].unsafe_impl(), two.unsafe_impl());  // a copy, not the tensor itself
  EXPECT_TRUE(embedded[0].unsafe_impl()->wrapped_number);
  EXPECT_EQ(embedded[0].item<double>(), 2.5);

  ir::ValueId vs = table.value_of(small, embed, lift);
  ASSERT_EQ(embedded.size(), 2u);
  EXPECT_NE(embedded[1].unsafe_impl(), small.unsafe_impl());
  EXPECT_TRUE(allclose(embedded[1], small, 0, 0));
  EXPECT_FALSE(embedded[1].unsafe_impl()->wrapped_number);

  ir::ValueId vp = table.value_of(pair, embed, lift);
  ir::ValueId vb = table.value_of(big, embed, lift);
  ASSERT_EQ(large.size(), 2u);
  EXPECT_EQ(large[0].unsafe_impl(), pair.unsafe_impl());  // the caller gets the tensor itself
  EXPECT_EQ(large[1].unsafe_impl(), big.unsafe_impl());
  EXPECT_EQ(table.value_of(big, embed, lift), vb);
  EXPECT_EQ((std::vector<ir::ValueId>{v2, vs, vp, vb}), (std::vector<ir::ValueId>{0, 1, 2, 3}));

  table.clear();
  EXPECT_EQ(table.find(two), -1);
}

TEST(Tracing, ConstantTableHoldsWhatItMetSoNoAddressIsReused) {
  ir::ConstantTable table;
  ir::ValueId next = 0;
  auto fresh = [&](const Tensor&) { return next++; };
  const TensorImpl* first = nullptr;
  {
    Tensor temp = ones({2});
    first = temp.unsafe_impl();
    table.value_of(temp, fresh, fresh);
  }
  // Were the first temporary freed, a later one could take its address and its value.
  for (int i = 0; i < 8; ++i) {
    Tensor temp = ones({2});
    EXPECT_NE(temp.unsafe_impl(), first);
    EXPECT_EQ(table.value_of(temp, fresh, fresh), i + 1);
  }
}

}  // namespace
}  // namespace zc
