// Dynamic shapes: sizes as polynomials, code made once for many sizes, and the compiled
// module's automatic and marked dynamic dims.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "codegen/size_poly.h"
#include "codegen/size_template.h"
#include "unit/run_model.h"
#include "unit/test_support.h"
#include "util/bytes.h"
#include "zc/zc.h"

namespace zc {
namespace {

using codegen::fit_sizes;
using codegen::SizePoly;

std::vector<std::vector<int64_t>> one_symbol(std::initializer_list<int64_t> sizes) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t s : sizes) out.push_back({s});
  return out;
}

TEST(SizePoly, FitsShapeArithmeticInOneSymbol) {
  auto points = one_symbol({32, 31, 33, 30, 34});
  std::vector<std::vector<int64_t>> values;
  for (const auto& p : points) {
    int64_t t = p[0];
    values.push_back({7, 256 * t, 16 * t * t + 3, 2 * t * t * t - t});
  }
  std::string why;
  auto polys = fit_sizes(points, values, &why);
  ASSERT_TRUE(polys) << why;
  EXPECT_EQ((*polys)[0].str(), "7");
  EXPECT_EQ((*polys)[1].str(), "256*s0");
  EXPECT_EQ((*polys)[2].str(), "3 + 16*s0*s0");
  EXPECT_EQ((*polys)[3].eval(std::vector<int64_t>{1000}), 2 * 1000LL * 1000 * 1000 - 1000);
  EXPECT_EQ((*polys)[1].c_expr("a->sym"), "(256*a->sym[0])");
  EXPECT_EQ((*polys)[0].c_expr("a->sym"), "7");
}

TEST(SizePoly, FitsProductsOfTwoSymbolsOnAGrid) {
  std::vector<std::vector<int64_t>> points, values;
  const int64_t bs[] = {4, 3, 5, 6}, ts[] = {32, 31, 33, 34};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) points.push_back({bs[i], ts[j]});
  }
  points.push_back({bs[3], ts[3]});  // the check
  for (const auto& p : points) values.push_back({p[0] * p[1] * 64, p[1] * p[1] + p[0]});
  std::string why;
  auto polys = fit_sizes(points, values, &why);
  ASSERT_TRUE(polys) << why;
  EXPECT_EQ((*polys)[0].eval(std::vector<int64_t>{8, 100}), 8 * 100 * 64);
  EXPECT_EQ((*polys)[1].eval(std::vector<int64_t>{8, 100}), 100 * 100 + 8);
}

TEST(SizePoly, RefusesWhatIsNoPolynomial) {
  std::string why;
  // A rounding to a multiple of 16 is no polynomial.
  auto points = one_symbol({97, 113, 120, 130, 141});
  std::vector<std::vector<int64_t>> round;
  for (const auto& p : points) round.push_back({(p[0] + 15) / 16 * 16});
  EXPECT_FALSE(fit_sizes(points, round, &why));
  EXPECT_TRUE(test::contains(why, "polynomial")) << why;
  // Rounding at sizes that all round alike looks constant, and the check says otherwise.
  auto alike = one_symbol({97, 98, 99, 100, 113});
  std::vector<std::vector<int64_t>> round2;
  for (const auto& p : alike) round2.push_back({(p[0] + 15) / 16 * 16});
  EXPECT_FALSE(fit_sizes(alike, round2, &why));
  EXPECT_TRUE(test::contains(why, "no polynomial of degree")) << why;
  // t / 2 at even sizes is a polynomial, but not with integer coefficients.
  auto even = one_symbol({2, 4, 6, 8, 10});
  std::vector<std::vector<int64_t>> half;
  for (const auto& p : even) half.push_back({p[0] / 2});
  EXPECT_FALSE(fit_sizes(even, half, &why));
  EXPECT_TRUE(test::contains(why, "integer coefficients")) << why;
  // Two sizes cannot both fit and check.
  EXPECT_FALSE(fit_sizes(one_symbol({8, 9}), std::vector<std::vector<int64_t>>{{8}, {9}}, &why));
  EXPECT_TRUE(test::contains(why, "a fit needs 3 or more")) << why;
}

TEST(SizePoly, RoundTripsThroughBytes) {
  auto points = one_symbol({5, 6, 7, 8, 9});
  std::vector<std::vector<int64_t>> values;
  for (const auto& p : points) values.push_back({3 * p[0] * p[0] - 2});
  std::string why;
  auto polys = fit_sizes(points, values, &why);
  ASSERT_TRUE(polys) << why;
  ByteWriter w;
  (*polys)[0].write(w);
  std::vector<uint8_t> bytes = w.take();
  ByteReader r(bytes, "test");
  EXPECT_EQ(SizePoly::read(r), (*polys)[0]);
}

TEST(SizeTemplate, MarkersBecomeTheirPolynomials) {
  codegen::SizeRecorder rec(true);
  std::string a = rec(64), b = rec(5);
  // Built in the other order, as argument evaluation may do: markers carry their numbers.
  std::string text = "x[" + b + "] = y[" + a + "];";
  std::vector<SizePoly> polys{SizePoly::constant(64), SizePoly{{SizePoly::Term{{1}, 1}}}};
  EXPECT_EQ(codegen::instantiate_sizes(text, polys, "s"), "x[(s[0])] = y[64];");
  EXPECT_EQ(rec.values(), (std::vector<int64_t>{64, 5}));
  codegen::SizeRecorder plain(false);
  EXPECT_EQ(plain(64), "64");
  EXPECT_TRUE(test::contains(test::error_message([&] {
                               codegen::instantiate_sizes(text, {polys.data(), 1}, "s");
                             }),
                             "names size 1 of 1"));
}

// Layer norm, softmax over the dynamic dim, a product with it, a reduction over it and a
// reshape through it: what symbolic code must get right at every size.
struct Mixer : nn::Module {
  std::shared_ptr<nn::Linear> lin = register_module("lin", std::make_shared<nn::Linear>(8, 8));
  std::shared_ptr<nn::LayerNorm> ln = register_module("ln", std::make_shared<nn::LayerNorm>(8));
  Tensor forward(const Tensor& x) override {
    Tensor h = gelu((*lin)((*ln)(x)));                          // [n, 8]
    Tensor scores = softmax(matmul(h, h.transpose(0, 1)), -1);  // [n, n]
    Tensor mixed = matmul(scores, h) + h;                       // [n, 8]
    Tensor flat = mixed.reshape({-1});
    return flat.reshape({x.size(0), 8}) * sum(x, {0}, true);
  }
};

TEST(DynamicShapes, SymbolicCodeEqualsStaticCodeAtEverySize) {
  manual_seed(1);
  auto model = std::make_shared<Mixer>();
  CompileOptions dyn;
  dyn.dynamic_dims = {{.input = 0, .dim = 0}};
  CompileOptions fixed;
  fixed.dynamic = Dynamic::Static;
  CompiledModule a = compile(model, dyn), b = compile(model, fixed);
  NoGradGuard no_grad;
  for (int64_t n : {16, 1, 2, 3, 7, 8, 9, 127, 128, 1000}) {
    Tensor x = randn({n, 8});
    Tensor ys = a(x);
    // The static module compiles for each size itself, although the templates exist by now.
    const int64_t hits = compiler::stats().template_hits;
    Tensor yf = b(x), ye = (*model)(x);
    EXPECT_EQ(compiler::stats().template_hits, hits) << "size " << n;
    EXPECT_TRUE(allclose(ys, yf, 1e-5, 1e-5)) << "size " << n;
    EXPECT_TRUE(allclose(ys, ye, 1e-4, 1e-5)) << "size " << n;
  }
}

// Elementwise nests of several varying dims (sigmoid and tanh: vectorized), rows (softmax),
// a concatenation and a reduction, at sizes whose work is under the threshold for a thread
// team and far over it: code for many sizes shares a nest out at run time by splitting the
// flattened range of its outer loops, so each thread starts mid-way through their indices
// (kernel_emitter.h, open_loops).
struct Nests : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor y = sigmoid(x) * tanh(x * 0.5) + softmax(x, -1);  // [n, 3, m, 33]
    Tensor both = cat({y, x * 2.0}, 1);                      // [n, 6, m, 33]
    return both / (exp(sum(both, {2}, true) * 0.1) + 1.0);   // through a reduction over m
  }
};

TEST(DynamicShapes, SharedNestsCoverEveryIndexAtEverySize) {
  manual_seed(2);
  auto model = std::make_shared<Nests>();
  CompileOptions dyn;
  dyn.dynamic_dims = {{.input = 0, .dim = 0}, {.input = 0, .dim = 2}};
  CompileOptions fixed;
  fixed.dynamic = Dynamic::Static;
  CompiledModule a = compile(model, dyn), b = compile(model, fixed);
  NoGradGuard no_grad;
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{
           {2, 3}, {1, 1}, {3, 7}, {64, 50}, {5, 400}, {7, 2}, {0, 3}, {4, 0}}) {
    Tensor x = randn({n, 3, m, 33});
    Tensor ys = a(x), yf = b(x), ye = (*model)(x);
    EXPECT_TRUE(allclose(ys, yf, 1e-5, 1e-5)) << n << " x " << m;
    EXPECT_TRUE(allclose(ys, ye, 1e-4, 1e-5)) << n << " x " << m;
  }
}

// Compiler runs of one call of `fast` at `x`, and whether it equals eager.
int64_t runs_of(CompiledModule& fast, nn::Module& model, const Tensor& x, bool* same) {
  const int64_t before = compiler::stats().compiler_invocations;
  Tensor y = fast(x);
  const int64_t runs = compiler::stats().compiler_invocations - before;
  *same = allclose(y, model(x), 1e-4, 1e-5);
  return runs;
}

// A scalar that makes a model's structure this process's own: its compiles count, whatever an
// earlier run of the tests left in the caches (size templates are found by structure alone).
double fresh_salt() {
  return 1.0 + std::random_device{}() % 100000 / 1e6;
}

// Mixer, scaled by a salt.
struct SaltedMixer : Mixer {
  double salt = fresh_salt();
  Tensor forward(const Tensor& x) override { return Mixer::forward(x) * salt; }
};

// Under Dynamic::Auto a graph whose products are all small keeps constant sizes at its first
// call (inline loops with fixed trip counts), and compiles for all sizes at its second.
TEST(DynamicShapes, SmallGraphsCompileTwiceAutomatically) {
  manual_seed(2);
  auto model = std::make_shared<SaltedMixer>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  bool same = false;
  EXPECT_GT(runs_of(fast, *model, randn({4, 8}), &same), 0);
  EXPECT_TRUE(same);
  EXPECT_GT(runs_of(fast, *model, randn({6, 8}), &same), 0);
  EXPECT_TRUE(same);
  for (int64_t n : {5, 9, 3}) {
    EXPECT_EQ(runs_of(fast, *model, randn({n, 8}), &same), 0) << "size " << n;
    EXPECT_TRUE(same) << "size " << n;
  }
}

// Training calls and inference calls of one module are kinds of their own: each makes the
// templates of the graphs it runs at its own second size, and neither leaves the other
// compiling at every size (a dim that training made dynamic once left inference without
// templates of its own).
TEST(DynamicShapes, TrainingAndInferenceCallsEachMakeTheirOwnTemplates) {
  manual_seed(3);
  auto model = std::make_shared<SaltedMixer>();
  CompiledModule fast = compile(model);
  // A training call (the parameters want gradients): its compiler runs, backward included.
  auto train_runs = [&](int64_t n) {
    const int64_t before = compiler::stats().compiler_invocations;
    sum(fast(randn({n, 8}))).backward();
    return compiler::stats().compiler_invocations - before;
  };
  EXPECT_GT(train_runs(4), 0);
  EXPECT_GT(train_runs(6), 0);
  EXPECT_EQ(train_runs(5), 0);
  {
    NoGradGuard no_grad;
    bool same = false;
    EXPECT_GT(runs_of(fast, *model, randn({7, 8}), &same), 0);
    EXPECT_GT(runs_of(fast, *model, randn({9, 8}), &same), 0);
    for (int64_t n : {3, 10}) {
      EXPECT_EQ(runs_of(fast, *model, randn({n, 8}), &same), 0) << "size " << n;
      EXPECT_TRUE(same) << "size " << n;
    }
  }
  EXPECT_EQ(train_runs(11), 0);
}

// A block over [batch, length, features] whose products go to a library.
struct Projector : nn::Module {
  std::shared_ptr<nn::Linear> up = register_module("up", std::make_shared<nn::Linear>(8, 32));
  std::shared_ptr<nn::Linear> down = register_module("down", std::make_shared<nn::Linear>(32, 8));
  double salt = fresh_salt();
  Tensor forward(const Tensor& x) override { return (*down)(gelu((*up)(x))) + x * salt; }
};

// One activation, called at two widths: its two regions lower to one structure with other
// fixed sizes (MobileNetV3's Hardswish at 32 and at 160 channels), each with a template of its
// own under that structure, so that a new batch size finds the one that serves each region.
struct Hardswish : nn::Module {
  static double salt() {
    static const double s = fresh_salt();
    return s;
  }
  Tensor forward(const Tensor& x) override { return x * clamp(x / 6.0 + 0.5, 0.0, 1.0) * salt(); }
};
struct TwoWidths : nn::Module {
  // Two of each width: repeated regions, which the hierarchical compile makes parts of.
  std::vector<std::shared_ptr<Hardswish>> acts;
  std::vector<std::shared_ptr<nn::Linear>> lins;
  TwoWidths() {
    const int64_t widths[] = {32, 32, 160, 160};
    for (int i = 0; i < 4; ++i) {
      acts.push_back(register_module("act" + std::to_string(i), std::make_shared<Hardswish>()));
      lins.push_back(
          register_module("lin" + std::to_string(i),
                          std::make_shared<nn::Linear>(widths[i], widths[std::min(i + 1, 3)])));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (int i = 0; i < 4; ++i) h = (*lins[i])((*acts[i])(h));
    return h;
  }
};

TEST(DynamicShapes, RegionsOfOneStructureAtOtherWidthsEachKeepTheirTemplate) {
  manual_seed(4);
  auto model = std::make_shared<TwoWidths>();
  CompileOptions o;
  o.dynamic_dims = {{.input = 0, .dim = 0}};
  CompiledModule fast = compile(model, o);
  NoGradGuard no_grad;
  bool same = false;
  EXPECT_GT(runs_of(fast, *model, randn({2, 32}), &same), 0);
  EXPECT_TRUE(same);
  for (int64_t n : {3, 4, 7}) {
    EXPECT_EQ(runs_of(fast, *model, randn({n, 32}), &same), 0) << "batch " << n;
    EXPECT_TRUE(same) << "batch " << n;
  }
}

// Sizes first: the first call makes code for every dim that traces alike at other sizes (the
// batch and the length; not the features, which the weights fix), so that no later batch or
// length runs the compiler, while a call with other features is an error as in eager.
TEST(DynamicShapes, LargeProductsMakeCodeForAllSizesAtTheFirstCall) {
  manual_seed(3);
  auto model = std::make_shared<Projector>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  bool same = false;
  const int64_t templates = compiler::stats().size_templates;
  EXPECT_GT(runs_of(fast, *model, randn({4, 16, 8}), &same), 0);
  EXPECT_TRUE(same);
  EXPECT_GT(compiler::stats().size_templates, templates);
  for (const Shape& s : std::vector<Shape>{{4, 24, 8}, {2, 16, 8}, {7, 5, 8}, {4, 16, 8}}) {
    EXPECT_EQ(runs_of(fast, *model, randn(s), &same), 0) << shape_str(s);
    EXPECT_TRUE(same) << shape_str(s);
  }
  EXPECT_THROW(fast(randn({4, 16, 9})), Error);
  // Static keeps every size to itself.
  CompileOptions fixed;
  fixed.dynamic = Dynamic::Static;
  CompiledModule each = compile(model, fixed);
  EXPECT_GT(runs_of(each, *model, randn({4, 16, 8}), &same), 0);
  EXPECT_GT(runs_of(each, *model, randn({4, 24, 8}), &same), 0);
}

// An environment variable set for one test, restored after it.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> saved;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) saved = v;
    ::setenv(name.c_str(), value, 1);
  }
  ~ScopedEnv() {
    if (saved) {
      ::setenv(name.c_str(), saved->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};

// Sizes first with its templates made on a thread of their own (what a GPU backend does): the
// first call compiles its own size meanwhile, and the next size, called at once, waits for the
// templates and is served by them; no later size runs the compiler.
TEST(DynamicShapes, SizesFirstInTheBackgroundServesTheNextSizeFromItsTemplates) {
  ScopedEnv env("ZC_SIZES_FIRST", "background");
  manual_seed(3);
  auto model = std::make_shared<Projector>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  bool same = false;
  const compiler::Stats before = compiler::stats();
  EXPECT_GT(runs_of(fast, *model, randn({4, 16, 8}), &same), 0);
  EXPECT_TRUE(same);
  Tensor x = randn({4, 24, 8});
  Tensor y = fast(x);
  EXPECT_TRUE(allclose(y, (*model)(x), 1e-4, 1e-5));
  EXPECT_GT(compiler::stats().size_templates, before.size_templates);
  EXPECT_GT(compiler::stats().template_hits, before.template_hits);
  for (const Shape& s : std::vector<Shape>{{2, 16, 8}, {7, 5, 8}, {4, 16, 8}, {4, 24, 8}}) {
    EXPECT_EQ(runs_of(fast, *model, randn(s), &same), 0) << shape_str(s);
    EXPECT_TRUE(same) << shape_str(s);
  }
}

// A compiled module dropped while its templates are made waits for them, and they are recorded:
// another module of the same model finds them at its first call, at a size never seen, and
// compiles nothing. A warm-up leaves no template half made either.
TEST(DynamicShapes, SizesFirstInTheBackgroundFinishesBeforeItsModuleGoes) {
  ScopedEnv env("ZC_SIZES_FIRST", "background");
  manual_seed(4);
  auto model = std::make_shared<Projector>();
  NoGradGuard no_grad;
  bool same = false;
  {
    CompiledModule fast = compile(model);
    EXPECT_GT(runs_of(fast, *model, randn({3, 16, 8}), &same), 0);
  }
  CompiledModule again = compile(model);
  EXPECT_EQ(runs_of(again, *model, randn({3, 40, 8}), &same), 0);
  EXPECT_TRUE(same);

  auto other = std::make_shared<Projector>();
  CompiledModule warmed = compile(other);
  WarmupReport report = warmed.warmup({randn({5, 16, 8})});
  EXPECT_GT(report.compiler_runs, 0);
  EXPECT_EQ(runs_of(warmed, *other, randn({5, 33, 8}), &same), 0);
  EXPECT_TRUE(same);
}

TEST(DynamicShapes, AnUnknownSizesFirstModeIsAnError) {
  ScopedEnv env("ZC_SIZES_FIRST", "sometimes");
  NoGradGuard no_grad;
  auto model = std::make_shared<Projector>();
  CompiledModule fast = compile(model);
  EXPECT_TRUE(test::contains(test::error_message([&] {
                               fast(randn({4, 16, 8}));
                             }),
                             "ZC_SIZES_FIRST=sometimes: expected background"));
}

// A convolution's output sizes divide, so no template serves a convolution net: its first call
// compiles for its own size even when a product of it goes to a library.
struct ConvHead : nn::Module {
  std::shared_ptr<nn::Conv2d> conv =
      register_module("conv", std::make_shared<nn::Conv2d>(3, 16, std::vector<int64_t>{3}));
  std::shared_ptr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(16, 64));
  double salt = fresh_salt();
  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*conv)(x));                     // [n, 16, s-2, s-2]
    return (*head)(h.permute({0, 2, 3, 1})) * salt;  // a product of [n*(s-2)^2, 16] x [16, 64]
  }
};

TEST(DynamicShapes, ConvolutionNetsKeepTheirSizesAtTheFirstCall) {
  manual_seed(5);
  auto model = std::make_shared<ConvHead>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  bool same = false;
  const int64_t templates = compiler::stats().size_templates;
  EXPECT_GT(runs_of(fast, *model, randn({2, 3, 18, 18}), &same), 0);
  EXPECT_TRUE(same);
  EXPECT_EQ(compiler::stats().size_templates, templates);
}

// Sizes that were equal at the first call are one symbol of its code: a later call where they
// differ is not served by it, compiles for its own size, and the next new size makes code for
// all sizes of the dim that changed, as a graph without sizes first does.
TEST(DynamicShapes, SizesFirstThatTiedTwoDimsFallsBackWhenTheyDiffer) {
  manual_seed(4);
  auto model = std::make_shared<Projector>();
  CompiledModule fast = compile(model);
  NoGradGuard no_grad;
  bool same = false;
  EXPECT_GT(runs_of(fast, *model, randn({4, 4, 8}), &same), 0);
  EXPECT_TRUE(same);
  EXPECT_EQ(runs_of(fast, *model, randn({5, 5, 8}), &same), 0);
  EXPECT_TRUE(same);
  const int64_t refusals = compiler::stats().template_refusals;
  EXPECT_GT(runs_of(fast, *model, randn({4, 12, 8}), &same), 0);
  EXPECT_TRUE(same);
  EXPECT_GT(compiler::stats().template_refusals, refusals);
  EXPECT_GT(runs_of(fast, *model, randn({4, 20, 8}), &same), 0);
  EXPECT_TRUE(same);
  for (int64_t t : {28, 9}) {
    EXPECT_EQ(runs_of(fast, *model, randn({4, t, 8}), &same), 0) << "length " << t;
    EXPECT_TRUE(same) << "length " << t;
  }
}

// Takes another branch for small inputs: a relation (size > 8) the code relies on.
struct Branchy : nn::Module {
  Tensor forward(const Tensor& x) override {
    return x.size(0) > 8 ? relu(x) * 2.0 : sigmoid(x) + sum(x, {0}, true);
  }
};

TEST(DynamicShapes, ABrokenRelationCompilesAnewAndStaysCorrect) {
  auto model = std::make_shared<Branchy>();
  CompileOptions o;
  o.dynamic_dims = {{.input = 0, .dim = 0}};
  CompiledModule fast = compile(model, o);
  NoGradGuard no_grad;
  for (int64_t n : {20, 30, 4, 5, 12}) {
    Tensor x = randn({n, 3});
    EXPECT_TRUE(allclose(fast(x), (*model)(x), 1e-5, 1e-6)) << "size " << n;
  }
  // Another rank compiles as before.
  Tensor x3 = randn({10, 3, 2});
  EXPECT_TRUE(allclose(fast(x3), (*model)(x3), 1e-5, 1e-6));
}

TEST(DynamicShapes, BadMarksAreErrors) {
  auto model = std::make_shared<Branchy>();
  CompileOptions o;
  o.dynamic_dims = {{.input = 1, .dim = 0}};
  CompiledModule second = compile(model, o);
  EXPECT_TRUE(test::contains(test::error_message([&] {
                               second(randn({4, 3}));
                             }),
                             "marks input 1, but the module was called with 1 input(s)"));
  o.dynamic_dims = {{.input = 0, .dim = 0, .min = 10, .max = 4}};
  EXPECT_TRUE(test::contains(test::error_message([&] { compile(model, o); }), "range [10, 4]"));
  o.dynamic_dims = {{.input = 0, .dim = 5}};
  CompiledModule fast = compile(model, o);
  EXPECT_TRUE(test::contains(test::error_message([&] {
                               fast(randn({4, 3}));
                             }),
                             "marks dim 5 of input 0, of rank 2"));
}

// The per-call lines of tests/tools/dynamic_lengths: compiler runs, graph recompiles and
// max_diff, in order.
struct Calls {
  std::vector<int> compiler_runs, recompiles;
  std::vector<double> max_diff;
};
Calls calls(const test::ProcessRun& r) {
  Calls c;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string word, len;
    if (!(w >> word >> len) || word != "call") continue;
    std::map<std::string, double> kv;
    std::string key;
    double value = 0;
    while (w >> key >> value) kv[key] = value;
    c.compiler_runs.push_back(static_cast<int>(kv.at("compiler_runs")));
    c.recompiles.push_back(static_cast<int>(kv.at("recompiles")));
    c.max_diff.push_back(kv.at("max_diff"));
  }
  return c;
}

const char* kLengths = " 16 32 24 40 64 100 77 120";

// gpt-small over eight lengths in fresh processes of tests/tools/dynamic_lengths on `device`:
// automatic dynamic compiles twice (the second compile served by the size templates its first
// made: gpt-small's products go to a library, so its sizes come first), a marked length once,
// static every length; a fresh process on the automatic run's cache compiles nothing at lengths
// it never saw. `model_flags` picks the model ("--pooled": two inputs sharing the length, two
// outputs).
void gpt_over_eight_lengths(const std::string& device, const std::string& model_flags = "") {
  const std::string dir = test::test_dir("dynamic-" + device);
  const std::string on = " --device " + device + " " + model_flags;
  for (const std::string mode : {"auto", "marked", "static"}) {
    test::ProcessRun r = test::run_tool("dynamic_lengths", "ZC_CACHE_DIR=" + dir + "/" + mode,
                                        "--dynamic " + mode + on + kLengths);
    ASSERT_EQ(r.rc, 0) << r.out;
    Calls c = calls(r);
    ASSERT_EQ(c.compiler_runs.size(), 8u) << r.out;
    int compiling_calls = 0;
    for (size_t i = 0; i < 8; ++i) {
      compiling_calls += c.compiler_runs[i] > 0;
      EXPECT_LT(c.max_diff[i], 1e-4) << mode << " call " << i << "\n" << r.out;
    }
    if (mode == "auto") {
      // Compiles: the first call's (the compiler builds code for all sizes) and the second
      // size's recompile, which captures anew and finds that code; later sizes only check it.
      // On a GPU the first call compiles its own size and the code for all sizes is built on a
      // thread of its own meanwhile (runtime/dynamic/sizes_first.h): what is left of that build
      // when the second size comes runs during its call.
      EXPECT_GT(c.compiler_runs[0], 0);
      EXPECT_EQ(c.recompiles[1], 1) << r.out;
      if (device == "cuda") {
        for (size_t i = 2; i < 8; ++i) EXPECT_EQ(c.compiler_runs[i], 0) << "call " << i << r.out;
      } else {
        EXPECT_EQ(compiling_calls, 1) << r.out;
      }
    } else if (mode == "marked") {
      EXPECT_EQ(compiling_calls, 1) << r.out;
      EXPECT_GT(c.compiler_runs[0], 0);
    } else {
      EXPECT_EQ(compiling_calls, 8) << r.out;
    }
  }
  test::ProcessRun warm = test::run_tool("dynamic_lengths", "ZC_CACHE_DIR=" + dir + "/auto",
                                         "--dynamic auto" + on + " 50 90 3");
  ASSERT_EQ(warm.rc, 0) << warm.out;
  Calls c = calls(warm);
  ASSERT_EQ(c.compiler_runs.size(), 3u) << warm.out;
  EXPECT_EQ(c.compiler_runs[0], 0) << warm.out;
  EXPECT_EQ(c.compiler_runs[1], 0) << warm.out;
  for (double d : c.max_diff) EXPECT_LT(d, 1e-4);
}

TEST(DynamicShapes, GptOverEightLengthsCompilesTwiceAutomaticallyOnceMarked) {
  gpt_over_eight_lengths("cpu");
}

TEST(DynamicShapesGpu, GptOverEightLengthsCompilesTwiceAutomaticallyOnceMarked) {
  ZC_SKIP_WITHOUT_GPU();
  gpt_over_eight_lengths("cuda");
}

// gpt-small trained over eight lengths (gradients wanted, as a training step: the parameters'
// gradients of the outputs' sum, against eager's): the first length compiles the forward and
// backward for its own size, the second makes size templates of both (traced at sample sizes,
// each sample derived and partitioned as the call's graph is); the other lengths find their
// code in the templates, but for at most one graph at one length (a long reduction split in two
// from some size on is another graph). A fresh process at lengths it never saw compiles
// nothing. Before templates served training graphs, every length ran the compiler 12 times.
TEST(DynamicShapes, TrainingOverEightLengthsCompilesTwiceAndAWarmProcessNever) {
  const std::string dir = test::test_dir("dynamic-training");
  test::ProcessRun r = test::run_tool("dynamic_lengths", "ZC_CACHE_DIR=" + dir,
                                      std::string("--dynamic auto --train") + kLengths);
  ASSERT_EQ(r.rc, 0) << r.out;
  Calls c = calls(r);
  ASSERT_EQ(c.compiler_runs.size(), 8u) << r.out;
  EXPECT_GT(c.compiler_runs[0], 0) << r.out;
  EXPECT_GT(c.compiler_runs[1], 0) << r.out;
  int later = 0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_LT(c.max_diff[i], 1e-4) << "call " << i << "\n" << r.out;
    if (i >= 2) later += c.compiler_runs[i];
  }
  EXPECT_LE(later, 1) << r.out;
  test::ProcessRun warm =
      test::run_tool("dynamic_lengths", "ZC_CACHE_DIR=" + dir, "--dynamic auto --train 50 90");
  ASSERT_EQ(warm.rc, 0) << warm.out;
  Calls w = calls(warm);
  ASSERT_EQ(w.compiler_runs.size(), 2u) << warm.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(w.compiler_runs[i], 0) << warm.out;
    EXPECT_LT(w.max_diff[i], 1e-4) << warm.out;
  }
}

// Two inputs of one length (ids and their weights) and two outputs: the length is one symbol.
TEST(DynamicShapes, TwoInputsSharingALengthCompileTwiceAutomaticallyOnceMarked) {
  gpt_over_eight_lengths("cpu", "--pooled");
}

// The CPU test's sizes on the GPU: the CUDA kernels' remainder paths, vector steps that a size
// turns off, one block size for rows of every length, size-1 broadcast.
TEST(DynamicShapesGpu, SymbolicCodeEqualsStaticCodeAtEverySize) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(1);
  auto model = std::make_shared<Mixer>();
  NoGradGuard no_grad;
  const std::vector<int64_t> sizes{16, 1, 2, 3, 7, 8, 9, 127, 128, 1000};
  std::vector<Tensor> xs, eager;
  for (int64_t n : sizes) {
    xs.push_back(randn({n, 8}));
    eager.push_back((*model)(xs.back()));
  }
  model->to(Device::cuda(0));
  CompileOptions dyn;
  dyn.dynamic_dims = {{.input = 0, .dim = 0}};
  CompileOptions fixed;
  fixed.dynamic = Dynamic::Static;
  CompiledModule a = compile(model, dyn), b = compile(model, fixed);
  const int64_t hits = compiler::stats().template_hits;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor xg = xs[i].to(Device::cuda(0));
    Tensor ys = a(xg).to(Device::cpu()), yf = b(xg).to(Device::cpu());
    EXPECT_TRUE(allclose(ys, yf, 1e-4, 1e-5)) << "size " << sizes[i];
    EXPECT_TRUE(allclose(ys, eager[i], 1e-4, 1e-5)) << "size " << sizes[i];
  }
  // Every size >= 2 but the first ran the template.
  EXPECT_GE(compiler::stats().template_hits - hits, 7);
}

}  // namespace
}  // namespace zc
