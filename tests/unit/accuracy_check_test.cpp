// The accuracy check (CompileOptions::accuracy_check): a correct backend passes with its
// differences reported below the tolerances; a backend that miscompiles one op on purpose is
// caught, and the search names the kernel and op it broke; the check returns the compiled
// outputs, checks only the first calls, and leaves training's gradients alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <mutex>

#include "codegen/backend.h"
#include "codegen/backends/cpp/backend.h"
#include "runtime/debug/accuracy_compare.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::contains;

// A registered backend, except that every `from` node of a schedule is emitted as a `to`
// node: a deliberately wrong kernel, selected by name like any backend. Its key parts differ
// from the wrapped backend's, so no cache level mixes their binaries.
class MiscompilingBackend final : public codegen::Backend {
 public:
  MiscompilingBackend(const codegen::Backend& inner, ops::OpId from, ops::OpId to)
      : inner_(inner), from_(from), to_(to) {
    name_ = "test-" + std::string(inner.name()) + "-miscompiling-" +
            std::string(ops::op_def(from).name);
    key_ = inner_.key_parts();
    key_.codegen += ",miscompile=" + std::string(ops::op_def(from).name) + ">" +
                    std::string(ops::op_def(to).name);
  }
  std::string_view name() const override { return name_; }
  Device::Type device() const override { return inner_.device(); }
  std::string unavailable_reason() const override { return inner_.unavailable_reason(); }
  const codegen::KeyParts& key_parts() const override { return key_; }
  const codegen::SchedulePolicy& policy() const override { return inner_.policy(); }
  std::vector<ops::OpId> native_ops() const override { return inner_.native_ops(); }
  bool splits_long_reductions() const override { return inner_.splits_long_reductions(); }
  bool serves_many_sizes() const override { return inner_.serves_many_sizes(); }
  size_t max_symbols() const override { return inner_.max_symbols(); }
  codegen::GeneratedSource emit(const codegen::Schedule& s,
                                const codegen::BufferPlan& plan) const override {
    codegen::Schedule wrong = s;
    for (ir::Node& n : wrong.graph.nodes) {
      if (n.op != from_) continue;
      n.op = to_;
      if (ops::op_def(to_).attrs_index == 0) n.attrs = ops::NoAttrs{};
    }
    return inner_.emit(wrong, plan);
  }
  std::vector<uint8_t> build(const codegen::GeneratedSource& source) const override {
    return inner_.build(source);
  }
  std::shared_ptr<const codegen::Executable> load(codegen::Schedule s, codegen::BufferPlan plan,
                                                  std::span<const uint8_t> bin) const override {
    return inner_.load(std::move(s), std::move(plan), bin);
  }
  std::shared_ptr<const codegen::Executable> load_for_size(
      codegen::Schedule s, codegen::BufferPlan plan, std::span<const uint8_t> bin,
      std::vector<int64_t> symbols) const override {
    return inner_.load_for_size(std::move(s), std::move(plan), bin, std::move(symbols));
  }
  std::string support_source() const override { return inner_.support_source(); }
  void load_support(std::span<const uint8_t> binary) const override { inner_.load_support(binary); }
  Tensor dense_copy(const Tensor& t) const override { return inner_.dense_copy(t); }
  std::shared_ptr<const codegen::Executable> replayable(
      std::shared_ptr<const codegen::Executable> exec, std::vector<bool> per_call) const override {
    return inner_.replayable(std::move(exec), std::move(per_call));
  }

 private:
  const codegen::Backend& inner_;  // registered: alive until exit
  ops::OpId from_, to_;
  std::string name_;
  codegen::KeyParts key_;
};

// The name of a registered backend that emits `from` as `to` and is otherwise backend
// `inner` (registered once per process).
std::string miscompiling(ops::OpId from, ops::OpId to, const std::string& inner = "cpp") {
  static std::mutex mu;
  std::lock_guard lock(mu);
  const codegen::Backend* base = codegen::find_backend(inner);
  if (!base) ADD_FAILURE() << "no backend " << inner;
  auto b = std::make_unique<MiscompilingBackend>(*base, from, to);
  std::string name(b->name());
  if (!codegen::find_backend(name)) codegen::register_backend(std::move(b));
  return name;
}

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Tanh> act;
  Mlp() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(16, 32));
    act = register_module("act", std::make_shared<nn::Tanh>());
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 8));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)((*act)((*fc1)(x))); }
  std::string type_name() const override { return "Mlp"; }
};

// Two outputs: one through tanh, one without.
struct TwoHeads : nn::Module {
  std::shared_ptr<nn::Linear> fc;
  TwoHeads() { fc = register_module("fc", std::make_shared<nn::Linear>(8, 8)); }
  std::vector<Tensor> forward(const std::vector<Tensor>& xs) override {
    Tensor h = (*fc)(xs[0]);
    return {h + xs[1], tanh(h) * xs[1]};
  }
  std::string type_name() const override { return "TwoHeads"; }
};

// A graph break: the trace needs a concrete value.
struct Breaks : nn::Module {
  Tensor forward(const Tensor& x) override {
    Tensor h = tanh(x * 2.0);
    const double m = max(h).item<double>();
    return h * (m + 1.0);
  }
  std::string type_name() const override { return "Breaks"; }
};

CompileOptions checked(int64_t calls, std::string backend = "auto") {
  CompileOptions o;
  o.accuracy_check.calls = calls;
  o.backend = std::move(backend);
  return o;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && allclose(a, b, 0.0, 0.0);
}

TEST(AccuracyCheck, CorrectBackendPassesBelowTolerance) {
  compiler::reset_stats();
  manual_seed(1);
  auto model = std::make_shared<Mlp>();
  auto fast = compile(model, checked(2));
  auto plain = compile(model);
  for (int i = 0; i < 4; ++i) {
    Tensor x = randn({4, 16});
    Tensor y = fast(x);
    // The checked call returns what the compiled code computed, as an unchecked one does.
    EXPECT_TRUE(same_values(y, plain(x)));
  }
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 2u);  // calls after the first two are not checked
  for (size_t i = 0; i < reports.size(); ++i) {
    const compiler::AccuracyReport& r = reports[i];
    EXPECT_TRUE(r.passed) << r.str();
    EXPECT_EQ(r.call, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(r.module_type, "Mlp");
    ASSERT_EQ(r.input_shapes.size(), 1u);
    EXPECT_EQ(r.input_shapes[0], (std::vector<int64_t>{4, 16}));
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{4, 8}));
    EXPECT_DOUBLE_EQ(r.outputs[0].atol, 1e-4);
    EXPECT_LT(r.outputs[0].max_abs, r.outputs[0].atol);
  }
  compiler::Stats st = compiler::stats();
  EXPECT_EQ(st.accuracy_checks, 2);
  EXPECT_EQ(st.accuracy_failures, 0);
}

TEST(AccuracyCheck, MiscompiledKernelIsCaughtAndNamed) {
  const std::string backend = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid);
  compiler::reset_stats();
  manual_seed(2);
  auto model = std::make_shared<Mlp>();
  auto fast = compile(model, checked(1, backend));
  Tensor x = randn({4, 16});
  testing::internal::CaptureStderr();
  Tensor y = fast(x);
  const std::string err = testing::internal::GetCapturedStderr();
  Tensor eager = model->forward(x);
  // The user gets the (wrong) compiled result: the check only reports.
  EXPECT_FALSE(allclose(y, eager, 1e-3, 1e-3));
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 1u);
  const compiler::AccuracyReport& r = reports[0];
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_FALSE(r.outputs[0].passed);
  EXPECT_GT(r.outputs[0].max_abs, 1e-2);
  EXPECT_TRUE(r.bisected);
  ASSERT_TRUE(r.culprit_found) << r.str();
  EXPECT_EQ(r.culprit.op, "tanh") << r.str();
  EXPECT_EQ(r.culprit.shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(r.culprit.region, "zc::nn::Tanh");  // the module called around it
  EXPECT_GE(r.culprit.kernel, 0);
  EXPECT_NE(std::find(r.culprit.kernel_ops.begin(), r.culprit.kernel_ops.end(), "tanh"),
            r.culprit.kernel_ops.end());
  EXPECT_GT(r.culprit.max_abs, 1e-2);
  // Printed whatever ZC_LOGS says, naming the kernel and the op.
  EXPECT_TRUE(contains(err, "accuracy check failed")) << err;
  EXPECT_TRUE(contains(err, "kernel " + std::to_string(r.culprit.kernel))) << err;
  EXPECT_TRUE(contains(err, "= tanh [4,32]")) << err;
  EXPECT_EQ(compiler::stats().accuracy_failures, 1);
  // Later calls are not checked.
  fast(x);
  EXPECT_EQ(compiler::accuracy_reports().size(), 1u);
  EXPECT_EQ(compiler::stats().accuracy_checks, 1);
}

TEST(AccuracyCheck, NamesTheBrokenOpInsideAGpt) {
  const std::string backend = miscompiling(ops::OpId::gelu, ops::OpId::relu);
  compiler::reset_stats();
  manual_seed(3);
  models::GPTConfig cfg;
  cfg.vocab_size = 64;
  cfg.block_size = 16;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.d_model = 32;
  auto gpt = std::make_shared<models::GPT>(cfg);
  gpt->eval();
  auto fast = compile(gpt, checked(1, backend));
  Tensor tokens = randint(0, cfg.vocab_size, {2, 8});
  testing::internal::CaptureStderr();
  fast(tokens);
  const std::string err = testing::internal::GetCapturedStderr();
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 1u);
  const compiler::AccuracyReport& r = reports[0];
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.culprit_found) << r.str();
  EXPECT_EQ(r.culprit.op, "gelu") << r.str();
  EXPECT_EQ(r.culprit.shape, (std::vector<int64_t>{2, 8, 4 * cfg.d_model}));
  // The first block's MLP: the first gelu of the graph.
  EXPECT_TRUE(contains(r.culprit.region, "TransformerBlock")) << r.culprit.region;
  EXPECT_TRUE(contains(err, "gelu")) << err;
}

TEST(AccuracyCheck, ManyOutputsAreComparedOneByOne) {
  const std::string backend = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid);
  compiler::reset_stats();
  manual_seed(4);
  auto model = std::make_shared<TwoHeads>();
  auto fast = compile(model, checked(1, backend));
  testing::internal::CaptureStderr();
  std::vector<Tensor> out = fast(std::vector<Tensor>{randn({3, 8}), randn({3, 8})});
  testing::internal::GetCapturedStderr();
  ASSERT_EQ(out.size(), 2u);
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 1u);
  const compiler::AccuracyReport& r = reports[0];
  ASSERT_EQ(r.input_shapes.size(), 2u);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].passed) << r.str();
  EXPECT_FALSE(r.outputs[1].passed) << r.str();
  ASSERT_TRUE(r.culprit_found) << r.str();
  EXPECT_EQ(r.culprit.op, "tanh");
}

TEST(AccuracyCheck, GraphBreakComparesTheWholeModuleWithoutSearching) {
  const std::string backend = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid);
  compiler::reset_stats();
  manual_seed(5);
  auto model = std::make_shared<Breaks>();
  auto fast = compile(model, checked(2, backend));
  Tensor x = randn({4, 4});
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) fast(x);
  testing::internal::GetCapturedStderr();
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  // A broken trace makes a specialization per call, yet only the module's first two calls
  // are checked.
  ASSERT_EQ(reports.size(), 2u);
  for (const compiler::AccuracyReport& r : reports) {
    EXPECT_FALSE(r.passed) << r.str();
    EXPECT_FALSE(r.bisected);
    EXPECT_FALSE(r.culprit_found);
    EXPECT_TRUE(contains(r.note, "graph break")) << r.note;
  }
  // The same module on the correct backend passes.
  compiler::reset_stats();
  auto good = compile(model, checked(1));
  good(x);
  ASSERT_EQ(compiler::accuracy_reports().size(), 1u);
  EXPECT_TRUE(compiler::accuracy_reports()[0].passed) << compiler::accuracy_reports()[0].str();
}

TEST(AccuracyCheck, TrainingCallKeepsItsGradients) {
  compiler::reset_stats();
  manual_seed(6);
  auto model = std::make_shared<Mlp>();
  auto fast = compile(model, checked(1));
  Tensor x = randn({4, 16});
  auto grads = [&](bool compiled) {
    for (Tensor& p : model->parameters()) p.mutable_grad() = Tensor();
    Tensor y = compiled ? fast(x) : (*model)(x);
    sum(y * y).backward();
    std::vector<Tensor> g;
    for (Tensor& p : model->parameters()) g.push_back(p.grad());
    return g;
  };
  std::vector<Tensor> compiled = grads(true), eager = grads(false);
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t i = 0; i < compiled.size(); ++i) {
    ASSERT_TRUE(compiled[i].defined());
    EXPECT_TRUE(allclose(compiled[i], eager[i], 1e-4, 1e-5));
  }
  ASSERT_EQ(compiler::accuracy_reports().size(), 1u);
  EXPECT_TRUE(compiler::accuracy_reports()[0].passed);
  EXPECT_TRUE(GradMode::is_enabled());
}

TEST(AccuracyCheck, CudaKernelIsNamedAndComparedOnTheHost) {
  ZC_SKIP_WITHOUT_GPU();
  const std::string backend = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid, "cuda");
  compiler::reset_stats();
  manual_seed(7);
  auto model = std::make_shared<Mlp>();
  model->to(Device::cuda(0));
  Tensor x = randn({4, 16}).to(Device::cuda(0));
  // The correct backend passes on the GPU.
  auto good = compile(model, checked(1));
  EXPECT_TRUE(good(x).device().is_cuda());
  ASSERT_EQ(compiler::accuracy_reports().size(), 1u);
  EXPECT_TRUE(compiler::accuracy_reports()[0].passed) << compiler::accuracy_reports()[0].str();
  // The miscompiling one is caught and its kernel named.
  auto bad = compile(model, checked(1, backend));
  testing::internal::CaptureStderr();
  Tensor y = bad(x);
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(y.device().is_cuda());
  ASSERT_EQ(compiler::accuracy_reports().size(), 2u);
  const compiler::AccuracyReport r = compiler::accuracy_reports()[1];
  EXPECT_FALSE(r.passed);
  ASSERT_TRUE(r.culprit_found) << r.str();
  EXPECT_EQ(r.culprit.op, "tanh") << r.str();
  EXPECT_GE(r.culprit.kernel, 0) << r.str();
}

TEST(AccuracyCheck, EachSpecializationIsCheckedOnItsFirstCalls) {
  const std::string backend = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid);
  compiler::reset_stats();
  manual_seed(8);
  auto model = std::make_shared<Mlp>();
  auto fast = compile(model, checked(1, backend));
  testing::internal::CaptureStderr();
  // Each batch size is a specialization of its own (from 6 on, made from the dynamic batch
  // dim's code); sizes met again are not checked again.
  for (int64_t batch : {4, 6, 9, 9, 4, 6}) fast(randn({batch, 16}));
  testing::internal::GetCapturedStderr();
  std::vector<compiler::AccuracyReport> reports = compiler::accuracy_reports();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(compiler::stats().accuracy_checks, 3);
  for (size_t i = 0; i < reports.size(); ++i) {
    const compiler::AccuracyReport& r = reports[i];
    EXPECT_EQ(r.input_shapes[0][0], (std::vector<int64_t>{4, 6, 9}[i]));
    EXPECT_FALSE(r.passed);
    ASSERT_TRUE(r.culprit_found) << r.str();
    EXPECT_EQ(r.culprit.op, "tanh");
  }
}

TEST(AccuracyCheck, OffByDefault) {
  compiler::reset_stats();
  auto fast = compile(std::make_shared<Mlp>());
  ASSERT_EQ(fast.options().accuracy_check.calls, 0) << "ZC_ACCURACY_CHECK is set";
  fast(randn({2, 16}));
  EXPECT_EQ(compiler::stats().accuracy_checks, 0);
  EXPECT_TRUE(compiler::accuracy_reports().empty());
}

TEST(AccuracyCheck, RegisteredBackendsKeepTheirNames) {
  const std::string name = miscompiling(ops::OpId::tanh, ops::OpId::sigmoid);
  ASSERT_NE(codegen::find_backend(name), nullptr);
  test::expect_error_containing(
      [&] {
        codegen::register_backend(std::make_unique<MiscompilingBackend>(
            *codegen::find_backend("cpp"), ops::OpId::tanh, ops::OpId::sigmoid));
      },
      "exists already");
  // "auto" still picks the built-in backend of the device.
  EXPECT_EQ(codegen::backend_for(Device::Type::cpu)->name(), "cpp");
}

TEST(AccuracyCheck, EnvironmentTurnsItOn) {
  ::setenv("ZC_ACCURACY_CHECK", "3", 1);
  auto model = std::make_shared<Mlp>();
  EXPECT_EQ(compile(model).options().accuracy_check.calls, 3);
  // An explicit option wins.
  EXPECT_EQ(compile(model, checked(1)).options().accuracy_check.calls, 1);
  ::setenv("ZC_ACCURACY_CHECK", "yes", 1);
  test::expect_error_containing([&] { compile(model); }, "ZC_ACCURACY_CHECK=yes");
  ::unsetenv("ZC_ACCURACY_CHECK");
  EXPECT_EQ(compile(model).options().accuracy_check.calls, 0);
}

TEST(AccuracyCheck, ComparisonFlagsShapeNanAndScalesWithMagnitude) {
  using runtime::compare_values;
  const runtime::Tolerance tol = runtime::default_tolerance(DType::f32, false);
  Tensor a = from_vector({1000.0f, 2.0f}, {2});
  // 0.05 off at magnitude 1000: within 1e-4 * 1000 + 1e-4 * 1000.
  EXPECT_TRUE(compare_values(from_vector({1000.05f, 2.0f}, {2}), a, tol).passed);
  // 0.5 off on the small element: beyond 1e-4 * 1000 + 1e-4 * 2.
  EXPECT_FALSE(compare_values(from_vector({1000.0f, 2.5f}, {2}), a, tol).passed);
  compiler::AccuracyOutput nan = compare_values(from_vector({1000.0f, std::nanf("")}, {2}), a, tol);
  EXPECT_FALSE(nan.passed);
  EXPECT_TRUE(contains(nan.problem, "NaN")) << nan.problem;
  compiler::AccuracyOutput shape = compare_values(from_vector({1.0f, 2.0f, 3.0f}, {3}), a, tol);
  EXPECT_FALSE(shape.passed);
  EXPECT_TRUE(contains(shape.problem, "shape [3]")) << shape.problem;
  EXPECT_DOUBLE_EQ(runtime::default_tolerance(DType::f32, true).atol, 2e-2);
  EXPECT_DOUBLE_EQ(runtime::default_tolerance(DType::i64, false).atol, 0.0);
}

}  // namespace
}  // namespace zc
