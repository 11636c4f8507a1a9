// The op registry and the dispatch hook: every op listed has exactly one complete definition,
// and an interceptor sees calls on traced tensors only, with normalized attributes, plus the
// region markers of module calls.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "ops/attrs.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/op_list.h"
#include "ops/registry.h"
#include "zc/factories.h"
#include "zc/ops.h"
#include "zc/tensor.h"

namespace {

using zc::DType;
using zc::Shape;
using zc::Tensor;
namespace ops = zc::ops;

struct Listed {
  ops::OpId id;
  std::string_view name;
  ops::OpClass cls;
};

// The op list, expanded independently of the registry's own expansion.
const std::vector<Listed>& listed() {
  static const std::vector<Listed> v{
#define ZC_OP_LISTED(name, cls) {ops::OpId::name, #name, ops::OpClass::cls},
      ZC_FOR_EACH_OP(ZC_OP_LISTED)
#undef ZC_OP_LISTED
  };
  return v;
}

TEST(Registry, EveryOpHasACompleteDefinition) {
  ASSERT_EQ(static_cast<int>(listed().size()), ops::kNumOps);
  for (const auto& l : listed()) {
    SCOPED_TRACE(std::string(l.name));
    const ops::OpDef& def = ops::op_def(l.id);
    EXPECT_EQ(def.id, l.id);
    EXPECT_EQ(def.name, l.name);
    EXPECT_EQ(def.cls, l.cls);
    EXPECT_NE(def.infer, nullptr);
    EXPECT_NE(def.eager, nullptr);
    EXPECT_GE(def.min_inputs, 1);
    EXPECT_TRUE(def.max_inputs == -1 || def.max_inputs >= def.min_inputs);
    EXPECT_LT(def.attrs_index, std::variant_size_v<ops::Attrs>);
    EXPECT_EQ(ops::find_op(l.name), &def);
  }
}

template <size_t I = 0>
ops::Attrs default_attrs(size_t index) {
  if constexpr (I < std::variant_size_v<ops::Attrs>) {
    if (index == I) return ops::Attrs(std::in_place_index<I>);
    return default_attrs<I + 1>(index);
  } else {
    return ops::Attrs{};
  }
}

// OpDef::transcendental (which the generated code gives whole vectors) says what the C
// expression is: a call of one of the prelude's series functions on f32 operands.
TEST(Registry, TranscendentalOpsAreThoseWhoseCExpressionIsASeries) {
  const std::string operands[] = {"x", "y", "z"};
  int marked = 0;
  for (const auto& l : listed()) {
    const ops::OpDef& def = ops::op_def(l.id);
    if (!def.c_expr) {
      EXPECT_FALSE(def.transcendental) << l.name;
      continue;
    }
    ops::Attrs attrs = default_attrs(def.attrs_index);
    if (l.id == ops::OpId::cast) attrs = ops::CastAttrs{DType::f32};
    const std::string c = def.c_expr(
        ops::CExpr{std::span(operands, static_cast<size_t>(def.min_inputs)), DType::f32, attrs});
    bool series = false;
    for (const char* f : {"zc_exp(", "zc_log(", "zc_tanh(", "zc_erf(", "zc_pow(", "zc_sin(",
                          "zc_cos(", "zc_asin(", "zc_acos(", "zc_atan("})
      series = series || c.find(f) != std::string::npos;
    EXPECT_EQ(def.transcendental, series) << l.name << ": " << c;
    marked += def.transcendental;
  }
  EXPECT_EQ(marked, 12);  // exp, log, tanh, sigmoid, erf, gelu, pow, sin, cos, asin, acos, atan
}

// The activations a library product's call applies itself are the registry's to name: ReLU,
// and GELU as its approximation says; every other op is none.
TEST(Registry, EpilogueActivationsAreReluAndGelu) {
  for (const auto& l : listed()) {
    const ops::OpDef& def = ops::op_def(l.id);
    if (l.id == ops::OpId::relu || l.id == ops::OpId::gelu) {
      EXPECT_NE(def.epilogue_act, nullptr) << l.name;
    } else {
      EXPECT_EQ(def.epilogue_act, nullptr) << l.name;
      EXPECT_EQ(ops::epilogue_act(l.id, default_attrs(def.attrs_index)), ops::EpilogueAct::none);
    }
  }
  EXPECT_EQ(ops::epilogue_act(ops::OpId::relu, ops::NoAttrs{}), ops::EpilogueAct::relu);
  EXPECT_EQ(ops::epilogue_act(ops::OpId::gelu, ops::GeluAttrs{zc::GeluApprox::tanh}),
            ops::EpilogueAct::gelu_tanh);
  EXPECT_EQ(ops::epilogue_act(ops::OpId::gelu, ops::GeluAttrs{zc::GeluApprox::none}),
            ops::EpilogueAct::gelu_erf);
}

TEST(Registry, NamesAreUniqueAndLookupsOfUnknownNamesFail) {
  std::set<std::string_view> names;
  for (const auto& l : listed()) names.insert(ops::op_def(l.id).name);
  EXPECT_EQ(static_cast<int>(names.size()), ops::kNumOps);
  EXPECT_EQ(ops::find_op("nope"), nullptr);
  EXPECT_EQ(ops::find_op(""), nullptr);
  EXPECT_EQ(ops::find_op("Add"), nullptr);  // names are exact
  EXPECT_EQ(ops::find_op("add "), nullptr);
}

TEST(Registry, AttrsAlternativesMatchTheOps) {
  EXPECT_EQ(ops::op_def(ops::OpId::add).attrs_index, ops::attrs_index_of<ops::NoAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::gelu).attrs_index, ops::attrs_index_of<ops::GeluAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::cast).attrs_index, ops::attrs_index_of<ops::CastAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::clamp).attrs_index, ops::attrs_index_of<ops::ClampAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::sum).attrs_index, ops::attrs_index_of<ops::ReduceAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::var).attrs_index, ops::attrs_index_of<ops::ReduceAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::reshape).attrs_index, ops::attrs_index_of<ops::ShapeAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::permute).attrs_index, ops::attrs_index_of<ops::PermuteAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::slice).attrs_index, ops::attrs_index_of<ops::SliceAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::softmax).attrs_index, ops::attrs_index_of<ops::DimAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::layer_norm).attrs_index,
            ops::attrs_index_of<ops::LayerNormAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::attention).attrs_index,
            ops::attrs_index_of<ops::AttentionAttrs>());
  EXPECT_EQ(ops::op_def(ops::OpId::where).min_inputs, 3);
  EXPECT_EQ(ops::op_def(ops::OpId::cat).max_inputs, -1);
}

TEST(Registry, InferGivesShapeAndDType) {
  std::vector<ops::TensorMeta> in{{{2, 1, 3}, DType::f32, zc::Device::cpu()},
                                  {{4, 1}, DType::f64, zc::Device::cpu()}};
  auto out = ops::op_def(ops::OpId::add).infer(in, ops::NoAttrs{});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (Shape{2, 4, 3}));
  EXPECT_EQ(zc::dtype_name(out[0].dtype), "f64");
  auto red =
      ops::op_def(ops::OpId::sum).infer(std::span(in).first(1), ops::ReduceAttrs{{0, 2}, true, 0});
  ASSERT_EQ(red.size(), 1u);
  EXPECT_EQ(red[0].shape, (Shape{1, 1, 1}));
  EXPECT_EQ(ops::meta_of(zc::zeros({5, 2}, DType::i32)),
            (ops::TensorMeta{{5, 2}, DType::i32, zc::Device::cpu()}));
  std::vector<ops::TensorMeta> bad{{{2, 3}, DType::f32, zc::Device::cpu()},
                                   {{4, 5}, DType::f32, zc::Device::cpu()}};
  EXPECT_THROW(ops::op_def(ops::OpId::matmul).infer(bad, ops::NoAttrs{}), zc::Error);
}

TEST(Registry, CallRunsTheEagerKernel) {
  Tensor a = zc::from_vector({1, 2, 3}, {3}), b = zc::from_vector({10, 20, 30}, {3});
  Tensor r = ops::call1(ops::OpId::add, {a, b});
  ASSERT_EQ(r.shape(), (Shape{3}));
  EXPECT_EQ(r.data<float>()[2], 33.f);
  auto outs = ops::call(ops::OpId::sum, std::vector<Tensor>{b}, ops::ReduceAttrs{{0}, false, 0});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].item<float>(), 60.f);
}

// Records what it sees; answers every intercepted call with zeros of the first input's shape.
class Recorder : public ops::OpInterceptor {
 public:
  std::vector<Tensor> intercept(const ops::OpDef& op, std::span<const Tensor> inputs,
                                const ops::Attrs& attrs) override {
    calls.push_back(std::string(op.name));
    attrs_seen.push_back(attrs);
    n_inputs.push_back(inputs.size());
    return {zc::zeros({7})};
  }
  void enter_region(std::string_view type_name, const void* module) override {
    events.push_back("enter " + std::string(type_name));
    modules.push_back(module);
  }
  void exit_region() override { events.push_back("exit"); }

  std::vector<std::string> calls, events;
  std::vector<ops::Attrs> attrs_seen;
  std::vector<size_t> n_inputs;
  std::vector<const void*> modules;
};

struct NeverForced : zc::TraceSlot {
  void force(zc::TensorImpl&) override { ADD_FAILURE() << "a traced value was forced"; }
};

// A traced tensor the way capture makes one: metadata and a trace slot, no storage.
Tensor traced(const Shape& shape, DType dtype = DType::f32) {
  auto impl = std::make_shared<zc::TensorImpl>();
  impl->shape = shape;
  impl->strides = zc::contiguous_strides(shape);
  impl->dtype = dtype;
  impl->trace = std::make_shared<NeverForced>();
  return Tensor(impl);
}

TEST(Registry, InterceptorScopeInstallsAndRestores) {
  EXPECT_EQ(ops::current_interceptor(), nullptr);
  Recorder outer, inner;
  {
    ops::InterceptorScope s1(&outer);
    EXPECT_EQ(ops::current_interceptor(), &outer);
    {
      ops::InterceptorScope s2(&inner);
      EXPECT_EQ(ops::current_interceptor(), &inner);
    }
    EXPECT_EQ(ops::current_interceptor(), &outer);
  }
  EXPECT_EQ(ops::current_interceptor(), nullptr);
}

TEST(Registry, InterceptorIsPerThread) {
  Recorder rec;
  ops::InterceptorScope scope(&rec);
  ops::OpInterceptor* seen = &rec;
  std::thread other([&] { seen = ops::current_interceptor(); });
  other.join();
  EXPECT_EQ(seen, nullptr);
  EXPECT_EQ(ops::current_interceptor(), &rec);
}

TEST(Registry, AttrsPrintReadably) {
  std::string r = ops::attrs_str(ops::ReduceAttrs{{1}, true, 0});
  EXPECT_NE(r.find("dims=[1]"), std::string::npos) << r;
  EXPECT_NE(r.find("keepdim=true"), std::string::npos) << r;
  EXPECT_NE(ops::attrs_str(ops::CastAttrs{DType::bf16}).find("bf16"), std::string::npos);
  // Equal attributes print equally and different ones differently, or IR dumps would hide
  // the difference between two nodes.
  EXPECT_EQ(ops::attrs_str(ops::SliceAttrs{1, 0, 4, 2}),
            ops::attrs_str(ops::SliceAttrs{1, 0, 4, 2}));
  EXPECT_NE(ops::attrs_str(ops::SliceAttrs{1, 0, 4, 2}),
            ops::attrs_str(ops::SliceAttrs{1, 0, 4, 1}));
  EXPECT_NE(ops::attrs_str(ops::LayerNormAttrs{1, 1e-5, true, false}),
            ops::attrs_str(ops::LayerNormAttrs{1, 1e-5, false, true}));
}

TEST(Registry, InterceptorIsNotCalledForUntracedInputs) {
  Recorder rec;
  ops::InterceptorScope scope(&rec);
  Tensor a = zc::from_vector({1, 2}, {2});
  Tensor r = zc::relu(zc::add(a, a) * 2.0);
  EXPECT_TRUE(rec.calls.empty());
  ASSERT_EQ(r.shape(), (Shape{2}));
  EXPECT_EQ(r.data<float>()[1], 8.f);  // computed eagerly, not the interceptor's zeros
  EXPECT_EQ(zc::sum(a).item<float>(), 3.f);
  EXPECT_TRUE(rec.calls.empty());
}

TEST(Registry, InterceptorSeesTracedCallsWithNormalizedAttrs) {
  Recorder rec;
  ops::InterceptorScope scope(&rec);
  Tensor x = traced({2, 3, 4}), y = zc::ones({4});
  Tensor r = zc::add(x, y);
  ASSERT_EQ(rec.calls, std::vector<std::string>{"add"});
  EXPECT_EQ(rec.n_inputs[0], 2u);
  EXPECT_EQ(r.shape(), (Shape{7}));  // whatever the interceptor returned

  zc::sum(x, {-1, 0});
  ASSERT_EQ(rec.calls.back(), "sum");
  const auto* ra = std::get_if<ops::ReduceAttrs>(&rec.attrs_seen.back());
  ASSERT_NE(ra, nullptr);
  EXPECT_EQ(ra->dims, (std::vector<int64_t>{0, 2}));  // non-negative and sorted

  zc::mean(x);  // empty dims: every dim listed
  ra = std::get_if<ops::ReduceAttrs>(&rec.attrs_seen.back());
  ASSERT_NE(ra, nullptr);
  EXPECT_EQ(ra->dims, (std::vector<int64_t>{0, 1, 2}));

  zc::softmax(x, -1);
  const auto* da = std::get_if<ops::DimAttrs>(&rec.attrs_seen.back());
  ASSERT_NE(da, nullptr);
  EXPECT_EQ(da->dim, 2);

  zc::gelu(x, zc::GeluApprox::tanh);
  EXPECT_EQ(rec.calls.back(), "gelu");
  const auto* ga = std::get_if<ops::GeluAttrs>(&rec.attrs_seen.back());
  ASSERT_NE(ga, nullptr);
  EXPECT_EQ(ga->approximate, zc::GeluApprox::tanh);

  Tensor q = traced({1, 2, 5, 16});
  zc::scaled_dot_product_attention(q, q, q, true);
  EXPECT_EQ(rec.calls.back(), "attention");
  const auto* aa = std::get_if<ops::AttentionAttrs>(&rec.attrs_seen.back());
  ASSERT_NE(aa, nullptr);
  EXPECT_TRUE(aa->causal);
  EXPECT_DOUBLE_EQ(aa->scale, 0.25);  // the default 1/sqrt(16), resolved before dispatch

  // A traced operand anywhere in the inputs is enough.
  const size_t before = rec.calls.size();
  zc::mul(y, x);
  EXPECT_EQ(rec.calls.size(), before + 1);
  EXPECT_EQ(rec.calls.back(), "mul");
}

TEST(Registry, TracedInputWithoutInterceptorForcesItsValue) {
  // Without an interceptor a traced tensor is just a tensor whose value must be produced.
  struct Fill : zc::TraceSlot {
    int* count;
    explicit Fill(int* c) : count(c) {}
    void force(zc::TensorImpl& self) override {
      ++*count;
      self.storage = std::make_shared<zc::Storage>(3 * sizeof(float), zc::Device::cpu());
      float* p = static_cast<float*>(self.storage->data());
      p[0] = 1, p[1] = 2, p[2] = 3;
    }
  };
  int count = 0;
  auto impl = std::make_shared<zc::TensorImpl>();
  impl->shape = {3};
  impl->strides = {1};
  impl->trace = std::make_shared<Fill>(&count);
  Tensor t(impl);
  EXPECT_EQ(t.data<float>()[2], 3.f);
  EXPECT_EQ(count, 1);
}

TEST(Registry, RegionScopeCallsEnterAndExit) {
  Recorder rec;
  int module_a = 0, module_b = 0;
  {
    ops::RegionScope none("Unseen", &module_a);  // no interceptor yet: nothing to tell
  }
  {
    ops::InterceptorScope scope(&rec);
    ops::RegionScope outer("Block", &module_a);
    {
      ops::RegionScope inner("zc::nn::Linear", &module_b);
      EXPECT_EQ(rec.events, (std::vector<std::string>{"enter Block", "enter zc::nn::Linear"}));
    }
  }
  EXPECT_EQ(rec.events,
            (std::vector<std::string>{"enter Block", "enter zc::nn::Linear", "exit", "exit"}));
  EXPECT_EQ(rec.modules, (std::vector<const void*>{&module_a, &module_b}));
}

}  // namespace
