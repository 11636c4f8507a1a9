// Random programs of indices and masks, compiled and run eagerly: integer ids as an input,
// embeddings gathered by them and by indices the program computes (argmax, counts of a mask,
// sums of ids), comparisons giving bool masks, where over them, masks cast to numbers,
// truncating casts to int32 and back, integer outputs, next to the float ops that feed them
// (products, tanh, relu). Each program's outputs must equal eager's, the integer ones exactly,
// on a first call and on a second with new ids and inputs (ids are data, never constants of the
// graph); then the gradients of its parameters and float input (an embedding's backward adds
// the rows of repeated ids). It found that compiled training gave every floating output a
// gradient, where eager gives none to one made from ids alone (docs/adr/0037).
// codegen_random_test.cpp walks the float programs.
//
// An index or a mask computed from a float that compiled code rounds differently (a product's
// summation order, an FMA where eager rounds twice) could flip at a tie, so the program takes
// argmax, comparisons and casts only of values both compute exactly alike: the inputs, gathered
// rows, and what relu, abs, negation, where, halving and truncation make of them.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "unit/random_programs.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

// A value of the program: floats [rows, width], or integer ids [rows] in [0, bound).
struct Value {
  bool ids = false;
  int64_t width = 0;  // floats: the columns; ids: their bound
  bool exact = true;  // computed alike by eager and compiled code (above)
};

struct Step {
  enum Kind {
    embed,      // rows of a weight [bound, d] gathered by ids a
    arg_max,    // argmax(a, -1): ids in [0, width)
    count,      // the columns of a that exceed b (or 0): ids in [0, width + 1)
    add_ids,    // a + b, ids
    select,     // where(a > 0, a, b * 0.5)
    match,      // where(ids a == ids b, c, -c) over each row of floats c
    mask_mul,   // (a < 0.5) as f32 times b
    truncate,   // f32(i32(a * 2)) * 0.5
    linear,     // a W + bias: an inexact float
    unary,      // relu, abs, neg (exact) or tanh (not)
    scale_ids,  // f32(ids a) as a column times floats b
    output
  } kind;
  int a = 0, b = 0, c = 0;
  int op = 0;
  int param = -1, param2 = -1;
};

class IndexProgram : public nn::Module {
 public:
  IndexProgram(uint32_t seed, int64_t rows, int64_t width, int64_t vocab) : rows_(rows) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    values_ = {{false, width, true}, {true, vocab, true}};  // x, ids
    const int steps = 6 + pick(10);
    for (int s = 0; s < steps; ++s) {
      Step st{};
      st.a = recent(rng, [](const Value& v) { return !v.ids; });
      const int64_t wa = values_[static_cast<size_t>(st.a)].width;
      Value out{false, wa, true};
      switch (pick(12)) {
        case 0:
        case 1: {
          st.kind = Step::embed;
          st.a = recent(rng, [](const Value& v) { return v.ids; });
          const int64_t d = 1 + pick(20);
          st.param = add_parameter(randn({values_[static_cast<size_t>(st.a)].width, d}));
          out = {false, d, true};
          break;
        }
        case 2:
          st.kind = Step::arg_max;
          st.a = recent(rng, [](const Value& v) { return !v.ids && v.exact; });
          if (st.a < 0) continue;
          out = {true, values_[static_cast<size_t>(st.a)].width, true};
          break;
        case 3:
          st.kind = Step::count;
          st.a = recent(rng, [](const Value& v) { return !v.ids && v.exact; });
          if (st.a < 0) continue;
          st.b = same_width_exact(st.a, rng, pick(3) == 0);
          out = {true, values_[static_cast<size_t>(st.a)].width + 1, true};
          break;
        case 4:
          st.kind = Step::add_ids;
          st.a = recent(rng, [](const Value& v) { return v.ids; });
          st.b = recent(rng, [](const Value& v) { return v.ids; });
          out = {true,
                 values_[static_cast<size_t>(st.a)].width +
                     values_[static_cast<size_t>(st.b)].width - 1,
                 true};
          break;
        case 5:
          st.kind = Step::select;
          st.a = recent(rng, [](const Value& v) { return !v.ids && v.exact; });
          if (st.a < 0) continue;
          st.b = same_width(st.a, rng);
          out = {false, values_[static_cast<size_t>(st.a)].width,
                 values_[static_cast<size_t>(st.b)].exact};
          break;
        case 6:
          st.kind = Step::match;
          st.a = recent(rng, [](const Value& v) { return v.ids; });
          st.b = recent(rng, [](const Value& v) { return v.ids; });
          st.c = recent(rng, [](const Value& v) { return !v.ids; });
          out = values_[static_cast<size_t>(st.c)];
          break;
        case 7:
          st.kind = Step::mask_mul;
          st.a = recent(rng, [](const Value& v) { return !v.ids && v.exact; });
          if (st.a < 0) continue;
          st.b = same_width(st.a, rng);
          out = values_[static_cast<size_t>(st.b)];
          break;
        case 8:
          st.kind = Step::truncate;
          st.a = recent(rng, [](const Value& v) { return !v.ids && v.exact; });
          if (st.a < 0) continue;
          out = {false, values_[static_cast<size_t>(st.a)].width, true};
          break;
        case 9: {
          st.kind = Step::linear;
          const int64_t n = 1 + pick(20);
          st.param = add_parameter(randn({wa, n}) * 0.5);
          if (pick(2)) st.param2 = add_parameter(randn({n}));
          out = {false, n, false};
          break;
        }
        case 10:
          st.kind = Step::unary;
          st.op = pick(4);
          out = {false, wa, st.op < 3 && values_[static_cast<size_t>(st.a)].exact};
          break;
        default:
          st.kind = pick(2) ? Step::scale_ids : Step::output;
          if (st.kind == Step::scale_ids) {
            st.b = recent(rng, [](const Value& v) { return v.ids; });
            out = {false, wa, false};
          } else {
            st.a = static_cast<int>(rng() % values_.size());
          }
          break;
      }
      steps_.push_back(st);
      if (st.kind != Step::output) values_.push_back(out);
    }
  }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    std::vector<Tensor> v{in[0], in[1]}, outs;
    auto at = [&](int i) -> const Tensor& { return v[static_cast<size_t>(i)]; };
    auto param = [&](int i) -> const Tensor& { return params_[static_cast<size_t>(i)]; };
    const std::vector<int64_t> column{rows_, 1};
    for (const Step& s : steps_) {
      switch (s.kind) {
        case Step::embed:
          v.push_back(embedding(param(s.param), at(s.a)));
          break;
        case Step::arg_max:
          v.push_back(argmax(at(s.a), -1));
          break;
        case Step::count: {
          const Tensor mask = s.b >= 0 ? gt(at(s.a), at(s.b)) : gt(at(s.a), 0.0);
          v.push_back(sum(cast(mask, DType::i64), {-1}));
          break;
        }
        case Step::add_ids:
          v.push_back(at(s.a) + at(s.b));
          break;
        case Step::select:
          v.push_back(where(gt(at(s.a), 0.0), at(s.a), at(s.b) * 0.5));
          break;
        case Step::match:
          v.push_back(where(eq(at(s.a), at(s.b)).reshape(column), at(s.c), -at(s.c)));
          break;
        case Step::mask_mul:
          v.push_back(cast(lt(at(s.a), 0.5), DType::f32) * at(s.b));
          break;
        case Step::truncate:
          v.push_back(cast(cast(at(s.a) * 2.0, DType::i32), DType::f32) * 0.5);
          break;
        case Step::linear: {
          Tensor y = matmul(at(s.a), param(s.param));
          v.push_back(s.param2 >= 0 ? y + param(s.param2) : y);
          break;
        }
        case Step::unary: {
          const Tensor& x = at(s.a);
          v.push_back(s.op == 0 ? relu(x) : s.op == 1 ? abs(x) : s.op == 2 ? -x : tanh(x));
          break;
        }
        case Step::scale_ids:
          v.push_back(cast(at(s.b), DType::f32).reshape(column) * at(s.a) * 0.25);
          break;
        case Step::output:
          outs.push_back(at(s.a));
          break;
      }
    }
    outs.push_back(v.back());
    return outs;
  }

  std::string describe() const {
    static const char* names[] = {"embed", "argmax",   "count",  "add_ids", "select", "match",
                                  "mask*", "truncate", "linear", "unary",   "ids*x",  "output"};
    std::string s;
    for (const Step& st : steps_)
      s += std::string(names[st.kind]) + "(" + std::to_string(st.a) + ") ";
    return s;
  }

 private:
  int add_parameter(Tensor t) {
    params_.push_back(register_parameter("p" + std::to_string(params_.size()), t));
    return static_cast<int>(params_.size()) - 1;
  }
  // A value that `ok` accepts, recent ones more often; -1 when there is none.
  template <class Ok>
  int recent(std::mt19937& rng, Ok ok) const {
    std::vector<int> fit;
    for (size_t i = 0; i < values_.size(); ++i)
      if (ok(values_[i])) fit.push_back(static_cast<int>(i));
    if (fit.empty()) return -1;
    const size_t back = rng() % 3 ? rng() % std::min<size_t>(fit.size(), 2) : rng() % fit.size();
    return fit[fit.size() - 1 - back];
  }
  // A float value of a's width (a itself at least).
  int same_width(int a, std::mt19937& rng) const {
    std::vector<int> same;
    for (size_t i = 0; i < values_.size(); ++i)
      if (!values_[i].ids && values_[i].width == values_[static_cast<size_t>(a)].width)
        same.push_back(static_cast<int>(i));
    return same[rng() % same.size()];
  }
  // An exact float value of a's width, or -1 (compare with 0) when `zero` or there is none.
  int same_width_exact(int a, std::mt19937& rng, bool zero) const {
    std::vector<int> same;
    for (size_t i = 0; i < values_.size(); ++i)
      if (!values_[i].ids && values_[i].exact &&
          values_[i].width == values_[static_cast<size_t>(a)].width)
        same.push_back(static_cast<int>(i));
    return zero || same.empty() ? -1 : same[rng() % same.size()];
  }

  int64_t rows_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<Tensor> params_;
};

struct ProgramShape {
  int64_t rows, width, vocab;
};
ProgramShape index_program_shape(uint32_t seed) {
  std::mt19937 shape(seed * 7919u);
  return {1 + static_cast<int64_t>(shape() % 24), 1 + static_cast<int64_t>(shape() % 20),
          2 + static_cast<int64_t>(shape() % 30)};
}

// Inputs of a program: x [rows, width] with some values repeated (ties for argmax and the
// comparisons, which both sides must break alike) and ids in [0, vocab), some repeated.
std::vector<Tensor> index_inputs(const ProgramShape& p) {
  Tensor x = randn({p.rows, p.width});
  x = where(gt(rand({p.rows, p.width}), 0.8), full({p.rows, p.width}, 0.5), x);
  return {x, randint(0, p.vocab, {p.rows})};
}

// Each output against eager: integers and bools exactly, floats within `tolerance` of their
// scale.
void expect_outputs_match(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                          double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << what << ", output " << i;
    ASSERT_EQ(got[i].dtype(), want[i].dtype()) << what << ", output " << i;
    const bool exact = !is_floating(want[i].dtype());
    EXPECT_LE(test::scaled_error(got[i], want[i]), exact ? 0.0 : tolerance)
        << what << ", output " << i << (exact ? " (integer)" : "");
  }
}

void expect_index_programs_match_eager(uint32_t first_seed, int count, Device device,
                                       double tolerance) {
  NoGradGuard no_grad;
  for (uint32_t seed = first_seed; seed < first_seed + static_cast<uint32_t>(count); ++seed) {
    manual_seed(seed);
    const ProgramShape p = index_program_shape(seed);
    auto program = std::make_shared<IndexProgram>(seed, p.rows, p.width, p.vocab);
    program->eval();
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows " + std::to_string(p.rows) + ", width " +
                 std::to_string(p.width) + ", vocab " + std::to_string(p.vocab) + ": " +
                 program->describe());
    const std::vector<Tensor> first = index_inputs(p), second = index_inputs(p);
    const std::vector<Tensor> want1 = (*program)(first), want2 = (*program)(second);
    program->to(device);
    CompiledModule fast = compile(program);
    auto on = [&](std::vector<Tensor> in) {
      for (Tensor& t : in) t = t.to(device);
      return test::on_cpu(fast(in));
    };
    expect_outputs_match(on(first), want1, tolerance, "first call");
    expect_outputs_match(on(second), want2, tolerance, "new ids");
  }
}

// The gradients of every parameter and of x through the compiled forward and backward, against
// eager autograd: a loss over the float outputs, each weighted by a fixed random tensor.
void expect_index_gradients_match_eager(uint32_t first_seed, int count, Device device,
                                        double tolerance) {
  for (uint32_t seed = first_seed; seed < first_seed + static_cast<uint32_t>(count); ++seed) {
    manual_seed(seed);
    const ProgramShape p = index_program_shape(seed);
    auto program = std::make_shared<IndexProgram>(seed, p.rows, p.width, p.vocab);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows " + std::to_string(p.rows) + ", width " +
                 std::to_string(p.width) + ", vocab " + std::to_string(p.vocab) + ": " +
                 program->describe());
    const std::vector<Tensor> in = index_inputs(p);
    std::vector<Tensor> weights;
    auto gradients = [&](const std::function<std::vector<Tensor>(std::vector<Tensor>)>& call,
                         Device on) {
      program->zero_grad();
      Tensor x = in[0].clone().to(on).requires_grad_();
      const std::vector<Tensor> outs = call({x, in[1].to(on)});
      if (weights.empty())
        for (const Tensor& o : outs) weights.push_back(randn(o.shape()));
      Tensor loss;
      for (size_t i = 0; i < outs.size(); ++i) {
        if (!outs[i].requires_grad()) continue;  // ids, masks, and what reads no parameter or x
        const Tensor term = sum(outs[i] * weights[i].to(on));
        loss = loss.defined() ? loss + term : term;
      }
      std::vector<Tensor> g;
      if (!loss.defined()) return g;
      loss.backward();
      g.push_back(x.grad());
      for (const Tensor& w : program->parameters()) g.push_back(w.grad());
      return test::on_cpu(g);
    };
    const std::vector<Tensor> eager =
        gradients([&](std::vector<Tensor> v) { return (*program)(v); }, Device::cpu());
    program->to(device);
    CompiledModule fast = compile(program);
    const std::vector<Tensor> got =
        gradients([&](std::vector<Tensor> v) { return fast(v); }, device);
    ASSERT_EQ(got.size(), eager.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].defined(), eager[i].defined()) << "gradient " << i;
      if (!eager[i].defined()) continue;
      EXPECT_LE(test::scaled_error(got[i], eager[i]), tolerance) << "gradient " << i << " (0: x's)";
    }
  }
}

TEST(IndexRandom, ProgramsOfIdsAndMasksMatchEager) {
  expect_index_programs_match_eager(1, test::scaled_count(60), Device::cpu(), 1e-4);
}

TEST(IndexRandom, GradientsThroughGathersAndMasksMatchEager) {
  expect_index_gradients_match_eager(500, test::scaled_count(50), Device::cpu(), 1e-4);
}

// The same programs through the CUDA backend, against eager on the CPU.
TEST(IndexRandom, ProgramsMatchTheCpuOnCuda) {
  ZC_SKIP_WITHOUT_GPU();
  expect_index_programs_match_eager(1, test::scaled_count(60), Device::cuda(0), 1e-3);
  expect_index_gradients_match_eager(500, test::scaled_count(50), Device::cuda(0), 1e-3);
}

}  // namespace
}  // namespace zc
