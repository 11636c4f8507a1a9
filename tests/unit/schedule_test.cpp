// The scheduler's contract: the schedule verifier accepts what schedule() makes of every op
// and rejects each broken invariant; ZC_LOGS=fusion says why a node did not join a kernel; and
// the compile keys print every part, so that a changed part shows.
#include <gtest/gtest.h>

#include "capture/capture.h"
#include "codegen/backends/cpp/backend.h"
#include "codegen/pipeline.h"
#include "codegen/verify_schedule.h"
#include "lower/pipeline.h"
#include "runtime/driver/compile_keys.h"
#include "unit/op_programs.h"
#include "unit/test_support.h"
#include "util/log.h"
#include "zc/zc.h"

namespace zc {
namespace {

using test::Fn;

ir::Graph lowered(const test::Program& f, const Tensor& x) {
  Fn m(f);
  return lower::lower(capture::capture_module(m, x, nullptr, true).graph, lower::LowerContext{});
}

codegen::Schedule schedule_of(const test::Program& f, const Tensor& x) {
  auto backend = codegen::cpp::make_cpp_backend();
  return codegen::schedule(lowered(f, x), backend->policy());
}

// The verifier's complaint about `s`, or a text saying it had none.
std::string verifier_error(const codegen::Schedule& s) {
  return test::error_message([&] { codegen::verify_schedule(s); });
}

#ifdef NDEBUG
#define SKIP_IN_DEBUG()
#else
// Internal errors abort in debug builds rather than throw.
#define SKIP_IN_DEBUG() GTEST_SKIP() << "a failed internal check aborts in debug builds"
#endif

TEST(ScheduleVerifier, AcceptsTheScheduleOfEveryOp) {
  manual_seed(3);
  Tensor w = randn({5, 4}), b = randn({5}), table = randn({7, 4});
  for (const test::Program& f : test::every_op_programs(w, b, table)) {
    codegen::Schedule s = schedule_of(f, randn({3, 4}));
    EXPECT_NO_THROW(codegen::verify_schedule(s));
  }
}

// exp(x) is stored by kernel 0 for the matmul in kernel 1, whose output kernel 2 reads.
codegen::Schedule three_kernels() {
  manual_seed(4);
  Tensor w = randn({16, 16});
  codegen::Schedule s =
      schedule_of([=](const Tensor& x) { return relu(matmul(exp(x), w) * 2.0); }, randn({16, 16}));
  EXPECT_NO_THROW(codegen::verify_schedule(s));
  return s;
}

TEST(ScheduleVerifier, RejectsAValueReadFromAnotherKernelsRegisters) {
  SKIP_IN_DEBUG();
  codegen::Schedule s = three_kernels();
  ir::ValueId e = s.graph.nodes[s.kernels[0].nodes[0]].outputs[0];
  ASSERT_EQ(s.at(e).state, codegen::ValueState::stored);
  s.values[e].state = codegen::ValueState::fused;
  s.kernels[0].stores.clear();
  EXPECT_TRUE(test::contains(verifier_error(s), "keeps it in registers")) << verifier_error(s);
}

TEST(ScheduleVerifier, RejectsKernelsOutOfOrder) {
  SKIP_IN_DEBUG();
  codegen::Schedule s = three_kernels();
  ASSERT_GE(s.kernels.size(), 2u);
  std::swap(s.kernels[0], s.kernels[1]);
  for (codegen::ValueSchedule& v : s.values) {
    if (v.kernel == 0 || v.kernel == 1) v.kernel = 1 - v.kernel;
  }
  EXPECT_TRUE(test::contains(verifier_error(s), "before kernel")) << verifier_error(s);
}

TEST(ScheduleVerifier, RejectsANodeInTwoKernels) {
  SKIP_IN_DEBUG();
  codegen::Schedule s = three_kernels();
  s.kernels.back().nodes.push_back(s.kernels[0].nodes[0]);
  EXPECT_TRUE(test::contains(verifier_error(s), "is in kernels")) << verifier_error(s);
}

TEST(ScheduleVerifier, RejectsAnOutputThatIsNotStored) {
  SKIP_IN_DEBUG();
  codegen::Schedule s = three_kernels();
  s.outputs.push_back(s.outputs[0]);
  EXPECT_TRUE(test::contains(verifier_error(s), "outputs")) << verifier_error(s);
  s.outputs.pop_back();
  s.values[s.outputs[0]].state = codegen::ValueState::fused;
  EXPECT_FALSE(test::contains(verifier_error(s), "no zc::Error")) << verifier_error(s);
}

TEST(ScheduleVerifier, RejectsAStoreItsKernelDoesNotMake) {
  SKIP_IN_DEBUG();
  codegen::Schedule s = three_kernels();
  s.kernels[0].stores.push_back(s.outputs[0]);
  EXPECT_TRUE(test::contains(verifier_error(s), "which it does not compute")) << verifier_error(s);
}

// The C++ backend's policy, but with products that read f16/bf16 operands themselves (as the
// CUDA backend's cuBLASLt products do).
class HalfOperandPolicy final : public codegen::SchedulePolicy {
 public:
  // `elementwise`: elementwise nodes, reductions and attention read half inputs too (as the
  // CUDA backend's loads do).
  explicit HalfOperandPolicy(bool elementwise = false)
      : backend_(codegen::cpp::make_cpp_backend()), elementwise_(elementwise) {}
  bool supports(ops::OpId op, DType t) const override { return backend_->policy().supports(op, t); }
  MatmulPath matmul_path(const ops::MatmulShapes& d, DType t) const override {
    return backend_->policy().matmul_path(d, t);
  }
  bool matmul_reads_half_operands() const override { return true; }
  bool elementwise_reads_half_inputs() const override { return elementwise_; }

 private:
  std::unique_ptr<codegen::Backend> backend_;
  bool elementwise_ = false;
};

// The cast of a value to f32 in a schedule, or -1.
ir::ValueId cast_of(const codegen::Schedule& s, ir::ValueId v) {
  for (const ir::Node& n : s.graph.nodes) {
    if (n.op == ops::OpId::cast && n.inputs[0] == v) return n.outputs[0];
  }
  return -1;
}

TEST(ScheduleConvertingCasts, HalfOperandsOfAProductAreReadInPlace) {
  manual_seed(6);
  Tensor w = randn({32, 16}).to(DType::bf16), b = randn({32}).to(DType::bf16);
  HalfOperandPolicy policy;
  codegen::Schedule s = codegen::schedule(
      lowered([=](const Tensor& x) { return linear(x, w, b); }, randn({8, 16}).to(DType::bf16)),
      policy);
  EXPECT_NO_THROW(codegen::verify_schedule(s));
  // x's and W's casts are converting aliases over the bf16 buffers; the bias's cast is fused
  // into the product's epilogue as before.
  int aliases = 0;
  for (const ir::Node& n : s.graph.nodes) {
    if (n.op != ops::OpId::cast) continue;
    const codegen::ValueSchedule& v = s.at(n.outputs[0]);
    if (v.state != codegen::ValueState::alias) continue;
    ++aliases;
    EXPECT_EQ(s.graph.meta(v.view.base).dtype, DType::bf16);
    EXPECT_EQ(v.view.base, s.base_of(n.inputs[0]));
  }
  EXPECT_EQ(aliases, 2);
  for (const codegen::Kernel& k : s.kernels) EXPECT_NE(k.kind, codegen::KernelKind::pointwise);

  // Without the policy, or when the f32 copy has another reader, the cast is a kernel.
  codegen::Schedule cpu =
      schedule_of([=](const Tensor& x) { return linear(x, w, b); }, randn({8, 16}).to(DType::bf16));
  for (const codegen::ValueSchedule& v : cpu.values) {
    if (v.state == codegen::ValueState::alias) {
      EXPECT_EQ(cpu.graph.meta(v.view.base).dtype, DType::f32);
    }
  }
  Tensor sq = randn({16, 16}).to(DType::bf16);
  codegen::Schedule shared = codegen::schedule(lowered(
                                                   [=](const Tensor& x) {
                                                     Tensor xf = x.to(DType::f32);
                                                     return matmul(xf, sq.to(DType::f32)) + xf;
                                                   },
                                                   randn({16, 16}).to(DType::bf16)),
                                               policy);
  EXPECT_NO_THROW(codegen::verify_schedule(shared));
  const ir::ValueId xf = cast_of(shared, shared.graph.inputs[0].value);
  ASSERT_GE(xf, 0);
  EXPECT_NE(shared.at(xf).state, codegen::ValueState::alias);
}

TEST(ScheduleConvertingCasts, HalfInputsOfElementwiseNodesAreReadInPlace) {
  manual_seed(8);
  // A bf16 nn::LayerNorm (its weight and bias are parameters, so graph inputs): x, the weight
  // and the bias are read as bf16 and converted in the one kernel; no cast has a kernel or an
  // f32 buffer of its own.
  nn::LayerNorm ln(16);
  ln.to(DType::bf16);
  const Tensor x = randn({4, 16}).to(DType::bf16);
  auto norm = [&](const codegen::SchedulePolicy& p) {
    return codegen::schedule(
        lower::lower(capture::capture_module(ln, x, nullptr, true).graph, lower::LowerContext{}),
        p);
  };
  HalfOperandPolicy policy(/*elementwise=*/true);
  codegen::Schedule s = norm(policy);
  EXPECT_NO_THROW(codegen::verify_schedule(s));
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, codegen::KernelKind::row_reduce);
  int aliases = 0;
  for (const ir::Node& n : s.graph.nodes) {
    if (n.op != ops::OpId::cast || s.graph.meta(n.outputs[0]).dtype != DType::f32) continue;
    EXPECT_EQ(s.at(n.outputs[0]).state, codegen::ValueState::alias);
    EXPECT_EQ(s.graph.meta(s.base_of(n.outputs[0])).dtype, DType::bf16);
    ++aliases;
  }
  EXPECT_EQ(aliases, 3);
  // Products alone read half operands in place: the [16] casts are kernels of their own.
  EXPECT_GT(norm(HalfOperandPolicy()).kernels.size(), 1u);

  // A cast of a computed value is computed where it is read, never an alias.
  codegen::Schedule computed =
      codegen::schedule(lowered([](const Tensor& x) { return exp((x * 2.0).to(DType::f32)); },
                                randn({4, 8}).to(DType::bf16)),
                        policy);
  EXPECT_NO_THROW(codegen::verify_schedule(computed));
  for (const ir::Node& n : computed.graph.nodes) {
    if (n.op == ops::OpId::cast) {
      EXPECT_NE(computed.at(n.outputs[0]).state, codegen::ValueState::alias);
    }
  }
}

TEST(ScheduleVerifier, RejectsAConvertingAliasReadByAGather) {
  SKIP_IN_DEBUG();
  manual_seed(7);
  Tensor ids = randint(0, 4, {3});
  // embedding(cast(table), ids) with the cast turned into an alias by hand: the gather would
  // copy bf16 bits as f32.
  codegen::Schedule s =
      schedule_of([=](const Tensor& t) { return embedding(t.to(DType::f32), ids); },
                  randn({4, 8}).to(DType::bf16));
  const ir::ValueId tf = cast_of(s, s.graph.inputs[0].value);
  ASSERT_GE(tf, 0);
  // The cast is the first kernel, the gather the second.
  ASSERT_EQ(s.kernels.size(), 2u);
  ASSERT_EQ(s.at(tf).kernel, 0);
  s.kernels.erase(s.kernels.begin());
  for (codegen::ValueSchedule& v : s.values) v.kernel -= v.kernel > 0 ? 1 : 0;
  s.values[tf] = codegen::ValueSchedule{};
  s.values[tf].state = codegen::ValueState::alias;
  s.values[tf].view = s.at(s.graph.inputs[0].value).view;
  EXPECT_TRUE(test::contains(verifier_error(s), "reads only its own dtype")) << verifier_error(s);
}

// What ZC_LOGS=fusion prints while `f` is scheduled.
std::string fusion_log(const test::Program& f, const Tensor& x) {
  ir::Graph g = lowered(f, x);
  auto backend = codegen::cpp::make_cpp_backend();
  logging::set_enabled(logging::Topic::fusion, true);
  ::testing::internal::CaptureStderr();
  codegen::schedule(g, backend->policy());
  std::string err = ::testing::internal::GetCapturedStderr();
  logging::set_enabled(logging::Topic::fusion, false);
  return err;
}

TEST(FusionLog, SaysWhyANodeDidNotJoinAKernel) {
  manual_seed(5);
  Tensor w = randn({16, 16});
  // The matmul reads exp(x), which closes exp's kernel: the mul cannot join it any more.
  std::string closed = fusion_log(
      [=](const Tensor& x) {
        Tensor e = exp(x);
        Tensor m = matmul(e, w);
        Tensor d = e * 2.0;
        return m + d;
      },
      randn({16, 16}));
  EXPECT_TRUE(test::contains(closed, "[zc:fusion]")) << closed;
  EXPECT_TRUE(test::contains(closed, "(mul [16,16]) not fused into kernel")) << closed;
  EXPECT_TRUE(test::contains(closed, "closed")) << closed;
  // A [4,1] column broadcast over [4,8] is another iteration space.
  std::string space = fusion_log(
      [](const Tensor& x) {
        Tensor col = exp(x.slice(1, 0, 1));
        return col + x;
      },
      randn({4, 8}));
  EXPECT_TRUE(test::contains(space, "iteration space [4,8] is not the kernel's")) << space;
  // A chain that fuses completely refuses nothing.
  EXPECT_EQ(fusion_log([](const Tensor& x) { return relu(exp(x) * 2.0 + 1.0); }, randn({4, 8})),
            "");
}

TEST(CompileKeys, DetailsNameEveryPartAndShowWhichOneDiffers) {
  auto plain = codegen::cpp::make_cpp_backend();
  auto other = codegen::cpp::make_cpp_backend({.inline_matmul_max_flops = 1});
  runtime::CompileKeys a = runtime::compile_keys(std::string(64, 'a'), *plain);
  runtime::CompileKeys b = runtime::compile_keys(std::string(64, 'a'), *other);
  std::string da = a.details(), db = b.details();
  for (const char* part :
       {"graph ", "backend ", "lowering ", "build ", "codegen ", "target ", "toolchain "}) {
    EXPECT_TRUE(test::contains(da, std::string("  ") + part)) << part << "\n" << da;
  }
  EXPECT_TRUE(test::contains(da, "backend") && test::contains(da, " cpp\n")) << da;
  // Exactly the codegen line differs, and so do the graph keys; the lowering keys do not.
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    size_t pos = 0;
    for (size_t nl; (nl = s.find('\n', pos)) != std::string::npos; pos = nl + 1)
      out.push_back(s.substr(pos, nl - pos));
    return out;
  };
  std::vector<std::string> la = lines(da), lb = lines(db);
  ASSERT_EQ(la.size(), lb.size());
  std::vector<std::string> differing;
  for (size_t i = 0; i < la.size(); ++i) {
    if (la[i] != lb[i]) differing.push_back(la[i]);
  }
  ASSERT_EQ(differing.size(), 1u) << da << db;
  EXPECT_TRUE(test::contains(differing[0], "codegen")) << differing[0];
  EXPECT_NE(a.graph_key().hex(), b.graph_key().hex());
  EXPECT_EQ(a.lowering_key().hex(), b.lowering_key().hex());
  EXPECT_EQ(a.kernel_key("s").hex(), b.kernel_key("s").hex());
}

}  // namespace
}  // namespace zc
