// The lowering stage: every decomposition against its eager kernel, lowered graphs against
// captured ones through the interpreter, the IR each pass leaves (FileCheck style), and the
// regions a repeated block relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "codegen/backends/eager/interpreter.h"
#include "ir/canonical.h"
#include "ir/printer.h"
#include "ir/subgraph.h"
#include "ir/verifier.h"
#include "lower/canonicalize.h"
#include "lower/cse.h"
#include "lower/dce.h"
#include "lower/decompose.h"
#include "lower/fold_constants.h"
#include "lower/peephole.h"
#include "lower/pipeline.h"
#include "lower/split_reductions.h"
#include "ops/registry.h"
#include "unit/op_programs.h"
#include "util/log.h"
#include "zc/zc.h"

namespace zc {
namespace {

using ops::OpId;

// ---------------------------------------------------------------------------------------------
// Helpers

double tol_of(DType t) {
  return t == DType::f64 ? 1e-10 : t == DType::f16 || t == DType::bf16 ? 1e-2 : 1e-5;
}

Tensor random(const Shape& shape, DType dtype) {
  if (dtype == DType::i64 || dtype == DType::i32) return randint(-5, 6, shape, dtype);
  return randn(shape).to(dtype);
}

// The op's decomposition run on concrete tensors.
Tensor decomposed(OpId id, std::vector<Tensor> in, const ops::Attrs& attrs) {
  const ops::OpDef& def = ops::op_def(id);
  EXPECT_NE(def.decompose, nullptr) << def.name;
  std::vector<Tensor> out = def.decompose(in, attrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

::testing::AssertionResult same(const Tensor& got, const Tensor& want, double tol) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << "got " << dtype_name(got.dtype()) << shape_str(got.shape()) << ", want "
           << dtype_name(want.dtype()) << shape_str(want.shape());
  }
  // Equal values match even where they are infinite (allclose alone fails on -inf == -inf).
  Tensor g = got.to(DType::f64), w = want.to(DType::f64);
  Tensor equal = eq(g, w), zero = zeros({}, DType::f64);
  if (!allclose(where(equal, zero, g), where(equal, zero, w), tol, tol)) {
    return ::testing::AssertionFailure() << "values differ:\n got " << got << "\nwant " << want;
  }
  return ::testing::AssertionSuccess();
}

using test::Fn;

struct Captured {
  ir::Graph graph;
  std::vector<Tensor> inputs;  // bound like the runtime binds them
};

Captured capture(nn::Module& m, const Tensor& x) {
  capture::Captured c = capture::capture_module(m, x, nullptr, true);
  Captured out{std::move(c.graph), {}};
  for (const capture::InputBinding& b : c.bindings)
    out.inputs.push_back(b.kind == ir::InputKind::user ? x : b.tensor);
  return out;
}

Tensor interpret(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  std::vector<Tensor> out = codegen::eager::interpret(g, ptrs);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

ir::Graph lowered(const ir::Graph& g) {
  return lower::lower(g, lower::LowerContext{});
}

std::vector<std::string> op_names(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Node& n : g.nodes) out.emplace_back(ops::op_def(n.op).name);
  return out;
}

int count_op(const ir::Graph& g, std::string_view name) {
  auto names = op_names(g);
  return static_cast<int>(std::count(names.begin(), names.end(), name));
}

int count_substr(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void expect_only_primitives(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    EXPECT_EQ(ops::op_def(n.op).decompose, nullptr)
        << "composite op " << ops::op_def(n.op).name << " left in\n"
        << ir::print(g);
  }
}

// A graph built by hand, for the passes that captured code rarely exercises.
struct Builder {
  ir::Graph g;
  ir::ValueId input(const Shape& shape, DType dtype = DType::f32) {
    ir::ValueId v = g.add_value(ops::TensorMeta{shape, dtype, Device::cpu()});
    g.inputs.push_back(ir::Input{v, ir::InputKind::user});
    return v;
  }
  ir::ValueId constant(const Tensor& data) {
    ir::ValueId v = g.add_value(ops::meta_of(data));
    g.constants.push_back(ir::Constant{v, data});
    return v;
  }
  ir::ValueId node(OpId op, std::vector<ir::ValueId> in, ops::Attrs attrs = ops::NoAttrs{}) {
    std::vector<ops::TensorMeta> metas;
    for (ir::ValueId v : in) metas.push_back(g.meta(v));
    ir::Node n{op, attrs, in, {}, ir::kNoRegion};
    for (auto& m : ops::infer_outputs(ops::op_def(op), metas, attrs))
      n.outputs.push_back(g.add_value(m, static_cast<int32_t>(g.nodes.size())));
    g.nodes.push_back(n);
    return g.nodes.back().outputs[0];
  }
};

// ---------------------------------------------------------------------------------------------
// The registry: exactly the primitive set has no decomposition.

TEST(LowerRegistry, PrimitiveSetHasNoDecompositionAndEveryOtherOpHasOne) {
  const std::set<std::string> primitives = {
      "neg",     "abs",    "exp",     "log",     "sqrt",      "rsqrt", "tanh",      "sigmoid",
      "relu",    "gelu",   "erf",     "clamp",   "cast",      "add",   "sub",       "mul",
      "div",     "pow",    "maximum", "minimum", "eq",        "ne",    "lt",        "le",
      "gt",      "ge",     "where",   "sum",     "amax",      "amin",  "argmax",    "reshape",
      "permute", "expand", "slice",   "matmul",  "embedding", "cat",   "rand_like", "randn_like",
      "floor",   "ceil",   "round",   "trunc",   "sin",       "cos",   "fmod",      "remainder",
      "asin",    "acos",   "atan"};
  for (int i = 0; i < ops::kNumOps; ++i) {
    const ops::OpDef& def = ops::op_def(static_cast<OpId>(i));
    bool primitive = primitives.count(std::string(def.name)) > 0;
    EXPECT_EQ(def.decompose == nullptr, primitive) << def.name;
  }
}

// ---------------------------------------------------------------------------------------------
// (a) Each decomposition on concrete tensors equals the eager kernel.

const DType kFloatTypes[] = {DType::f32, DType::f64, DType::f16};

TEST(LowerDecompositions, MeanMatchesEager) {
  manual_seed(1);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::i64}) {
    Tensor x = random({3, 4, 5}, dt);
    for (std::vector<int64_t> dims : {std::vector<int64_t>{0}, {1, 2}, {0, 1, 2}, {2}}) {
      for (bool keepdim : {false, true}) {
        Tensor got = decomposed(OpId::mean, {x}, ops::ReduceAttrs{dims, keepdim, 0});
        EXPECT_TRUE(same(got, mean(x, dims, keepdim), tol_of(dt)))
            << dtype_name(dt) << " dims " << shape_str(dims) << " keepdim " << keepdim;
      }
    }
  }
  Tensor s = randn({});
  EXPECT_TRUE(same(decomposed(OpId::mean, {s}, ops::ReduceAttrs{{}, false, 0}), mean(s), 1e-6));
}

TEST(LowerDecompositions, VarMatchesEagerIncludingNaNForTooFewElements) {
  manual_seed(2);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::i64}) {
    Tensor x = random({4, 6}, dt);
    for (std::vector<int64_t> dims : {std::vector<int64_t>{0}, {1}, {0, 1}}) {
      for (int64_t correction : {0, 1}) {
        for (bool keepdim : {false, true}) {
          Tensor got = decomposed(OpId::var, {x}, ops::ReduceAttrs{dims, keepdim, correction});
          EXPECT_TRUE(same(got, var(x, dims, correction, keepdim), tol_of(dt)))
              << dtype_name(dt) << " dims " << shape_str(dims) << " correction " << correction;
        }
      }
    }
  }
  Tensor x = randn({2, 3});
  Tensor got = decomposed(OpId::var, {x}, ops::ReduceAttrs{{0}, false, 2});
  Tensor want = var(x, {0}, 2);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(got.data<float>()[i]));
    EXPECT_TRUE(std::isnan(want.data<float>()[i]));
  }
}

TEST(LowerDecompositions, CopyIsItsInput) {
  Tensor x = randn({2, 3}).t();
  Tensor got = decomposed(OpId::copy, {x}, ops::NoAttrs{});
  EXPECT_TRUE(same(got, x.clone(), 0));
}

TEST(LowerDecompositions, LinearMatchesEager) {
  manual_seed(3);
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::i64}) {
    Tensor w = random({5, 4}, dt), b = random({5}, dt);
    for (Shape xs : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
      Tensor x = random(xs, dt);
      EXPECT_TRUE(
          same(decomposed(OpId::linear, {x, w, b}, ops::NoAttrs{}), linear(x, w, b), tol_of(dt)))
          << dtype_name(dt) << shape_str(xs);
      EXPECT_TRUE(same(decomposed(OpId::linear, {x, w}, ops::NoAttrs{}), linear(x, w), tol_of(dt)))
          << dtype_name(dt) << shape_str(xs) << " without bias";
    }
  }
  // Mixed dtypes promote as the op does.
  Tensor x = randn({3, 4}).to(DType::f16), w = randn({5, 4}), b = randn({5}).to(DType::f64);
  EXPECT_TRUE(same(decomposed(OpId::linear, {x, w, b}, ops::NoAttrs{}), linear(x, w, b), 1e-5));
}

TEST(LowerDecompositions, SoftmaxAndLogSoftmaxMatchEager) {
  manual_seed(4);
  for (DType dt : kFloatTypes) {
    Tensor x = (randn({3, 4, 5}) * 3.0).to(dt);
    for (int64_t dim : {0, 1, 2}) {
      EXPECT_TRUE(
          same(decomposed(OpId::softmax, {x}, ops::DimAttrs{dim}), softmax(x, dim), tol_of(dt)))
          << dtype_name(dt) << " dim " << dim;
      EXPECT_TRUE(same(decomposed(OpId::log_softmax, {x}, ops::DimAttrs{dim}), log_softmax(x, dim),
                       tol_of(dt)))
          << dtype_name(dt) << " dim " << dim;
    }
  }
  // -inf entries (a mask) and integer inputs.
  Tensor m = where(gt(randn({4, 6}), 0.3), randn({4, 6}),
                   full({}, -std::numeric_limits<double>::infinity()));
  m = where(eq(arange(6).reshape({1, 6}), 0.0), zeros({}), m);  // each row keeps one entry
  EXPECT_TRUE(same(decomposed(OpId::softmax, {m}, ops::DimAttrs{1}), softmax(m, 1), 1e-6));
  EXPECT_TRUE(same(decomposed(OpId::log_softmax, {m}, ops::DimAttrs{1}), log_softmax(m, 1), 1e-6));
  Tensor i = randint(-3, 4, {3, 5});
  EXPECT_TRUE(same(decomposed(OpId::softmax, {i}, ops::DimAttrs{1}), softmax(i, 1), 1e-6));
}

TEST(LowerDecompositions, LayerNormMatchesEagerWithAndWithoutWeightAndBias) {
  manual_seed(5);
  for (DType dt : kFloatTypes) {
    Tensor x = (randn({2, 3, 8}) * 2.0 + 1.0).to(dt);
    for (int64_t k : {1, 2}) {
      Shape norm(x.shape().end() - k, x.shape().end());
      Tensor w = random(norm, dt), b = random(norm, dt);
      for (int variant = 0; variant < 4; ++variant) {
        bool has_w = variant & 1, has_b = variant & 2;
        std::vector<Tensor> in{x};
        if (has_w) in.push_back(w);
        if (has_b) in.push_back(b);
        Tensor got = decomposed(OpId::layer_norm, in, ops::LayerNormAttrs{k, 1e-3, has_w, has_b});
        Tensor want = layer_norm(x, norm, has_w ? w : Tensor(), has_b ? b : Tensor(), 1e-3);
        EXPECT_TRUE(same(got, want, tol_of(dt)))
            << dtype_name(dt) << " k " << k << " weight " << has_w << " bias " << has_b;
      }
    }
  }
}

TEST(LowerDecompositions, AttentionMatchesEagerCausalOrNotWithBroadcastBatches) {
  manual_seed(6);
  struct Case {
    Shape q, k, v;
  };
  const Case cases[] = {
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 6}},  // square
      {{2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}},  // more keys than queries
      {{7, 4}, {3, 4}, {3, 2}},                    // more queries than keys, no batch
      {{2, 1, 5, 8}, {3, 6, 8}, {1, 6, 4}},        // batch dims broadcast
  };
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      Tensor q = random(c.q, dt), k = random(c.k, dt), v = random(c.v, dt);
      for (bool causal : {false, true}) {
        for (double scale : {0.35, 1.0}) {
          Tensor got = decomposed(OpId::attention, {q, k, v}, ops::AttentionAttrs{causal, scale});
          Tensor want = scaled_dot_product_attention(q, k, v, causal, scale);
          EXPECT_TRUE(same(got, want, tol_of(dt)))
              << dtype_name(dt) << " q " << shape_str(c.q) << " k " << shape_str(c.k) << " causal "
              << causal << " scale " << scale;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// (b, c) Lowered graphs: primitives only, verified, and equal to the captured graph.

void expect_lowering_preserves_values(nn::Module& m, const Tensor& x, double tol) {
  Captured c = capture(m, x);
  ir::Graph low = lowered(c.graph);
  ASSERT_NO_THROW(ir::verify(low));
  expect_only_primitives(low);
  EXPECT_EQ(low.inputs.size(), c.graph.inputs.size());
  Tensor want = interpret(c.graph, c.inputs);
  EXPECT_TRUE(same(interpret(low, c.inputs), want, tol)) << ir::print(low);
}

TEST(LowerPipeline, Seed64MatchesTheCapturedGraph) {
  manual_seed(7);
  auto m = models::seed_model(64);
  expect_lowering_preserves_values(*m, randn({10, 10}), 1e-5);
}

TEST(LowerPipeline, GptMatchesTheCapturedGraph) {
  manual_seed(8);
  auto gpt =
      models::gpt({.vocab_size = 97, .block_size = 32, .n_layer = 2, .n_head = 4, .d_model = 32});
  gpt->eval();
  Tensor tokens = randint(0, 97, {2, 16});
  expect_lowering_preserves_values(*gpt, tokens, 1e-4);
  ir::Graph low = lowered(capture(*gpt, tokens).graph);
  EXPECT_EQ(count_op(low, "where"), 2);  // one causal mask per block
  EXPECT_EQ(count_op(low, "attention"), 0);
}

TEST(LowerPipeline, EveryOpFamilyMatchesTheCapturedGraph) {
  manual_seed(11);
  Tensor w = randn({5, 4}), b = randn({5}), table = randn({7, 4});
  Tensor big = randn({4, 30});  // too large to embed: a lifted input
  // Every op, then what lowering must also get right: a lifted input, integer means, a clone,
  // attention variants, and (last, with a looser tolerance) 16-bit floats.
  std::vector<test::Program> cases = test::every_op_programs(w, b, table);
  std::vector<test::Program> extra = {
      [&](const Tensor& x) { return softmax(matmul(x, big), 0); },
      [](const Tensor& x) {
        return var(x, {0, 1}, 0) + mean(cast(gt(x, 0.0), DType::i64), {1});
      },
      [](const Tensor& x) {
        return cat({x, x.clone()}, 1).slice(1, 2, 6);
      },
      [](const Tensor& x) {
        Tensor q = x.reshape({1, 3, 4});
        return scaled_dot_product_attention(q, q * 0.5, q, true).reshape({3, 4}) +
               scaled_dot_product_attention(q, q, exp(q)).reshape({3, 4});
      },
      [](const Tensor& x) {  // 16-bit floats compute in f32 and round once
        Tensor h = x.to(DType::f16);
        return (softmax(h, 1) + layer_norm(h, {4}) + mean(h, {0}, true)).to(DType::f32);
      },
  };
  cases.insert(cases.end(), extra.begin(), extra.end());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    Fn m(cases[i]);
    expect_lowering_preserves_values(m, randn({3, 4}), i + 1 == cases.size() ? 1e-2 : 1e-5);
  }
}

TEST(LowerPipeline, LogsEachPassThatChangedTheGraphAndItsTime) {
  Fn m([](const Tensor& x) { return softmax(x, 1); });
  ir::Graph g = capture(m, randn({2, 3})).graph;
  logging::set_enabled(logging::Topic::graph, true);
  logging::set_enabled(logging::Topic::timing, true);
  ::testing::internal::CaptureStderr();
  lowered(g);
  std::string err = ::testing::internal::GetCapturedStderr();
  logging::set_enabled(logging::Topic::graph, false);
  logging::set_enabled(logging::Topic::timing, false);
  EXPECT_NE(err.find("after decompose:"), std::string::npos) << err;
  EXPECT_NE(err.find("amax("), std::string::npos) << err;
  EXPECT_NE(err.find("lower decompose:"), std::string::npos) << err;
  EXPECT_NE(err.find("lower canonicalize:"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------------------------
// (d) Each pass's IR, before and after.

TEST(LowerIR, LayerNormLowersToExactlyTheExpectedPrimitives) {
  nn::LayerNorm ln(8);
  ir::Graph low = lowered(capture(ln, randn({4, 8})).graph);
  // mean = sum / n; dev = x - mean; var = sum(dev * dev) / n; dev * rsqrt(var + eps) * w + b
  const std::vector<std::string> expect = {"sum", "div",   "sub", "mul", "sum", "div",
                                           "add", "rsqrt", "mul", "mul", "add"};
  EXPECT_EQ(op_names(low), expect) << ir::print(low);
  EXPECT_EQ(count_op(low, "amax"), 0);
}

TEST(LowerIR, SoftmaxAndCausalAttentionLowerToOneMaxAndAMaskConstant) {
  Fn sm([](const Tensor& x) { return softmax(x, -1); });
  const std::vector<std::string> expect = {"amax", "sub", "exp", "sum", "div"};
  EXPECT_EQ(op_names(lowered(capture(sm, randn({3, 5})).graph)), expect);

  Fn attn([](const Tensor& x) { return scaled_dot_product_attention(x, x, x, true); });
  ir::Graph low = lowered(capture(attn, randn({2, 4, 8})).graph);
  std::string text = ir::print(low);
  EXPECT_EQ(count_op(low, "matmul"), 2) << text;
  EXPECT_EQ(count_op(low, "where"), 1) << text;
  EXPECT_EQ(count_op(low, "amax"), 1) << text;
  EXPECT_NE(text.find("bool[4,4] = constant"), std::string::npos) << text;
}

TEST(LowerIR, CopyDecomposesToItsInput) {
  Fn m([](const Tensor& x) { return relu(x.clone()); });
  ir::Graph g = capture(m, randn({3})).graph;
  EXPECT_NE(ir::print(g).find("copy("), std::string::npos);
  ir::Graph d = lower::decompose(g);
  ir::verify(d);
  EXPECT_EQ(op_names(d), std::vector<std::string>{"relu"});
  EXPECT_EQ(d.nodes[0].inputs[0], d.inputs[0].value);
}

TEST(LowerIR, PeepholeRemovesIdentitiesAndFoldsLayoutChains) {
  Fn m([](const Tensor& x) {
    Tensor a = x.reshape({3, 4}).expand({3, 4}).slice(1, 0, 4).to(DType::f32);  // identities
    Tensor b = x.reshape({12}).reshape({2, 6}).reshape({4, 3});                 // one reshape
    Tensor c = x.t().t();                                                       // nothing
    Tensor d = x.reshape({3, 1, 4}).permute({1, 0, 2});  // moves a unit dim: a reshape
    return a + b.reshape({3, 4}) + c + d.reshape({3, 4});
  });
  ir::Graph g = capture(m, randn({3, 4})).graph;
  std::string before = ir::print(g);
  EXPECT_EQ(count_substr(before, "reshape("), 7) << before;
  ir::Graph p = lower::eliminate_dead_code(lower::peephole(g));
  ir::verify(p);
  std::string after = ir::print(p);
  EXPECT_EQ(count_substr(after, "expand("), 0) << after;
  EXPECT_EQ(count_substr(after, "slice("), 0) << after;
  EXPECT_EQ(count_substr(after, "cast("), 0) << after;
  EXPECT_EQ(count_substr(after, "permute("), 0) << after;
  // b's chain and its final reshape to x's shape fold into nothing; d's two steps into one
  // reshape to [1,3,4] and back, also nothing.
  EXPECT_EQ(count_substr(after, "reshape("), 0) << after;
  EXPECT_EQ(count_substr(after, "add("), 3) << after;
}

TEST(LowerIR, PeepholeKeepsACastOfAWrappedScalar) {
  // The cast's result is no wrapped number, so it promotes differently: x_i64 * 2.5 is f32,
  // x_i64 * tensor(2.5, f64) is f64.
  Builder b;
  ir::ValueId x = b.input({3}, DType::i64);
  Tensor s = wrap_scalar(2.5);
  ir::ValueId c = b.node(OpId::cast, {b.constant(s)}, ops::CastAttrs{DType::f64});
  b.g.outputs = {b.node(OpId::mul, {x, c})};
  ir::Graph p = lower::peephole(b.g);
  ir::verify(p);
  EXPECT_EQ(count_op(p, "cast"), 1);
}

TEST(LowerIR, CseMergesEqualConstantsAndNodes) {
  Fn m([](const Tensor& x) {
    Tensor a = x * 2.0;
    Tensor b = x * 2.0;
    Tensor c = x * 3.0;
    return a + b + c;
  });
  ir::Graph g = capture(m, randn({4})).graph;
  std::string before = ir::print(g);
  EXPECT_EQ(count_substr(before, "= mul("), 3) << before;
  EXPECT_EQ(count_substr(before, "= constant"), 3) << before;
  ir::Graph c = lower::eliminate_dead_code(lower::eliminate_common_subexpressions(g));
  ir::verify(c);
  std::string after = ir::print(c);
  EXPECT_EQ(count_substr(after, "= mul("), 2) << after;
  EXPECT_EQ(count_substr(after, "= constant"), 2) << after;
  // The add reads the one mul twice.
  auto add = std::find_if(c.nodes.begin(), c.nodes.end(),
                          [](const ir::Node& n) { return n.op == OpId::add; });
  ASSERT_NE(add, c.nodes.end()) << after;
  EXPECT_EQ(add->inputs[0], add->inputs[1]) << after;
}

struct Twice : nn::Module {
  std::shared_ptr<Fn> a, b;
  Twice() {
    a = register_module("a", std::make_shared<Fn>([](const Tensor& x) { return exp(x); }));
    b = register_module("b", std::make_shared<Fn>([](const Tensor& x) { return exp(x); }));
  }
  Tensor forward(const Tensor& x) override { return (*a)(x) + (*b)(x); }
};

TEST(LowerIR, CseDoesNotMergeAcrossRegions) {
  Twice m;
  ir::Graph g = capture(m, randn({4})).graph;
  ir::Graph c = lower::canonicalize(g);
  EXPECT_EQ(count_op(c, "exp"), 2) << ir::print(c);
  ASSERT_EQ(c.top_regions().size(), 2u);
  EXPECT_EQ(ir::graph_hash(ir::extract_region(c, 0).graph),
            ir::graph_hash(ir::extract_region(c, 1).graph));
}

TEST(LowerIR, DceRemovesUnusedNodesButKeepsUnusedInputs) {
  Builder b;
  ir::ValueId x = b.input({4});
  b.input({2});  // never read
  b.constant(from_vector({1, 2}, {2}));
  b.node(OpId::exp, {x});
  b.g.outputs = {b.node(OpId::relu, {x})};
  EXPECT_EQ(count_substr(ir::print(b.g), "exp("), 1);
  ir::Graph d = lower::eliminate_dead_code(b.g);
  ir::verify(d);
  std::string after = ir::print(d);
  EXPECT_EQ(count_substr(after, "exp("), 0) << after;
  EXPECT_EQ(count_substr(after, "constant"), 0) << after;
  EXPECT_EQ(d.inputs.size(), 2u);
  EXPECT_EQ(op_names(d), std::vector<std::string>{"relu"});
}

TEST(LowerIR, FoldConstantsEvaluatesSmallNodesOnConstants) {
  Builder b;
  ir::ValueId x = b.input({3});
  ir::ValueId c = b.constant(from_vector({0, 1, 2}, {3}));
  ir::ValueId e = b.node(OpId::exp, {c});
  b.g.outputs = {b.node(OpId::add, {x, e})};
  ir::Graph f = lower::eliminate_dead_code(lower::fold_constants(b.g));
  ir::verify(f);
  std::string after = ir::print(f);
  EXPECT_EQ(count_substr(after, "exp("), 0) << after;
  EXPECT_NE(after.find("f32[3] = constant [1, 2.71828, 7.38906]"), std::string::npos) << after;
  Tensor in = from_vector({1, 1, 1}, {3});
  EXPECT_TRUE(same(interpret(f, {in}), interpret(b.g, {in}), 1e-6));
}

TEST(LowerIR, FoldConstantsLeavesLargeResults) {
  Builder b;
  ir::ValueId one = b.constant(from_vector({1}, {1}));
  int64_t n = lower::kMaxFoldedElements + 1;
  b.g.outputs = {b.node(OpId::expand, {one}, ops::ShapeAttrs{{n}})};
  ir::Graph f = lower::fold_constants(b.g);
  EXPECT_EQ(count_op(f, "expand"), 1);
  b.g.outputs = {b.node(OpId::expand, {one}, ops::ShapeAttrs{{n - 1}})};
  f = lower::eliminate_dead_code(lower::fold_constants(b.g));
  EXPECT_EQ(f.nodes.size(), 0u);
  EXPECT_EQ(f.constants.size(), 1u);
}

// A loss's sum over a whole [8, 128, 768] batch becomes 1024 row sums and one sum of those,
// with the original's shape; sums with many results, or too few elements, stay whole.
TEST(LowerIR, SplitReductionsSplitsOnlyLongSumsIntoFewResults) {
  Builder b;
  ir::ValueId x = b.input({8, 128, 768});
  ir::ValueId all = b.node(OpId::sum, {x}, ops::ReduceAttrs{.dims = {0, 1, 2}});
  ir::ValueId kept = b.node(OpId::sum, {x}, ops::ReduceAttrs{.dims = {1, 2}, .keepdim = true});
  ir::ValueId columns = b.node(OpId::sum, {x}, ops::ReduceAttrs{.dims = {0, 1}});
  ir::ValueId y = b.input({4, 64});
  ir::ValueId small = b.node(OpId::sum, {y}, ops::ReduceAttrs{.dims = {0, 1}});
  b.g.outputs = {all, kept, columns, small};
  ir::Graph s = lower::split_reductions(b.g);
  ir::verify(s);
  const std::string after = ir::print(s);
  EXPECT_EQ(count_op(s, "sum"), 6) << after;  // all and kept split; columns, small whole
  EXPECT_NE(after.find("f32[8,128,1] = sum("), std::string::npos) << after;
  EXPECT_NE(after.find("f32[8,1,1] = sum("), std::string::npos) << after;
  for (size_t i = 0; i < b.g.outputs.size(); ++i) {
    EXPECT_EQ(s.meta(s.outputs[i]).shape, b.g.meta(b.g.outputs[i]).shape);
  }
  Tensor in = randn({8, 128, 768}), in2 = randn({4, 64});
  std::vector<const Tensor*> ptrs{&in, &in2};
  std::vector<Tensor> got = codegen::eager::interpret(s, ptrs);
  std::vector<Tensor> want = codegen::eager::interpret(b.g, ptrs);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same(got[i], want[i], 1e-4)) << i;
}

TEST(LowerIR, CanonicalizeReachesAFixedPoint) {
  // Folding makes two equal constants, CSE merges them and then the muls on them, DCE drops
  // the rest; a second canonicalize changes nothing.
  Builder b;
  ir::ValueId x = b.input({2});
  ir::ValueId e1 = b.node(OpId::exp, {b.constant(from_vector({1, 2}, {2}))});
  ir::ValueId e2 = b.node(OpId::exp, {b.constant(from_vector({1, 2}, {2}))});
  b.g.outputs = {b.node(OpId::add, {b.node(OpId::mul, {x, e1}), b.node(OpId::mul, {x, e2})})};
  ir::Graph c = lower::canonicalize(b.g);
  ir::verify(c);
  EXPECT_EQ(op_names(c), (std::vector<std::string>{"mul", "add"})) << ir::print(c);
  EXPECT_EQ(ir::canonical_bytes(lower::canonicalize(c)), ir::canonical_bytes(c));
}

// ---------------------------------------------------------------------------------------------
// (e) Regions survive lowering.

struct Wrapper : nn::Module {
  std::shared_ptr<Fn> inner;
  Wrapper() {
    inner = register_module(
        "inner", std::make_shared<Fn>([](const Tensor& x) { return x.reshape(x.shape()); }));
  }
  Tensor forward(const Tensor& x) override { return relu((*inner)(x)); }
};

TEST(LowerRegions, AnEmptiedRegionStaysValid) {
  Wrapper m;
  ir::Graph g = capture(m, randn({3})).graph;
  ASSERT_EQ(g.regions.size(), 1u);
  ASSERT_EQ(g.regions[0].end - g.regions[0].begin, 1);
  ir::Graph low = lowered(g);
  ASSERT_EQ(low.regions.size(), 1u);
  EXPECT_EQ(low.regions[0].begin, low.regions[0].end);
  EXPECT_EQ(op_names(low), std::vector<std::string>{"relu"});
}

TEST(LowerRegions, Seed64KeepsItsLayerRegionsWithOneSubgraphHash) {
  auto m = models::seed_model(64);
  ir::Graph low = lowered(capture(*m, randn({10, 10})).graph);
  std::vector<ir::RegionId> top = low.top_regions();
  ASSERT_EQ(top.size(), 65u);
  EXPECT_NE(low.regions[top[0]].type_name.find("Linear"), std::string::npos);
  std::set<std::string> hashes;
  for (size_t i = 1; i < top.size(); ++i) {
    EXPECT_NE(low.regions[top[i]].type_name.find("SeedLayer"), std::string::npos);
    ir::RegionGraph r = ir::extract_region(low, top[i]);
    expect_only_primitives(r.graph);
    EXPECT_GT(r.graph.nodes.size(), 0u);
    hashes.insert(hex(ir::graph_hash(r.graph)));
  }
  EXPECT_EQ(hashes.size(), 1u);
}

}  // namespace
}  // namespace zc
