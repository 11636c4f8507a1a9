// cuBLASLt products on a GPU against a reference in double on the same values: every dtype,
// sizes of 1 to 1024, every transpose, strided and broadcast batches, each epilogue, leading
// dimensions past the row, misaligned pointers, empty problems, TF32 only when asked, plans
// made once, threads sharing a plan and a second stream. Without a GPU they skip, saying why.
#include <gtest/gtest.h>

#include <array>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "unit/test_support.h"
#include "zc/cuda.h"

#ifdef ZC_WITH_CUDA
#include "cuda/blaslt.h"
#include "cuda/blaslt_descriptors.h"
#include "cuda/blaslt_start.h"
#include "cuda/blaslt_warm.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "unit/blaslt_check.h"
#endif

namespace {

#ifdef ZC_WITH_CUDA

using zc::DType;
using zc::cuda::Epilogue;
using zc::cuda::GemmProblem;
using zc::test::check_case;
using zc::test::dense_problem;
using zc::test::GemmCase;

// Each of 1, 17, 64, 300 and 1024 as M, as N and as K.
const std::vector<std::array<int64_t, 3>> kShapes{
    {1, 1, 1},     {17, 17, 17},    {64, 64, 64}, {300, 300, 300}, {1024, 1024, 1024},
    {1, 1024, 17}, {17, 300, 1024}, {300, 1, 64}, {1024, 64, 1},   {64, 17, 300}};

void sweep(DType in, DType out, double tol) {
  zc::manual_seed(11);
  for (const auto& [m, n, k] : kShapes) {
    for (int trans = 0; trans < 4; ++trans) {
      GemmCase c{dense_problem(in, m, n, k, trans & 1, trans & 2)};
      c.p.d = out;
      check_case(c, tol);
    }
  }
}

TEST(CudaBlasLtGpu, F32MatchesTheReference) {
  ZC_SKIP_WITHOUT_GPU();
  sweep(DType::f32, DType::f32, 1e-5);
}

TEST(CudaBlasLtGpu, F64MatchesTheReference) {
  ZC_SKIP_WITHOUT_GPU();
  sweep(DType::f64, DType::f64, 1e-12);
}

TEST(CudaBlasLtGpu, F16MatchesTheReference) {
  ZC_SKIP_WITHOUT_GPU();
  sweep(DType::f16, DType::f16, 1e-2);
}

TEST(CudaBlasLtGpu, Bf16MatchesTheReference) {
  ZC_SKIP_WITHOUT_GPU();
  sweep(DType::bf16, DType::bf16, 1e-2);
}

TEST(CudaBlasLtGpu, HalfInputsWithF32Output) {
  ZC_SKIP_WITHOUT_GPU();
  sweep(DType::f16, DType::f32, 1e-3);
  sweep(DType::bf16, DType::f32, 1e-3);
}

TEST(CudaBlasLtGpu, StridedBatchWithABroadcastOperand) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(12);
  for (const DType t : {DType::f32, DType::f16, DType::f64}) {
    for (int trans = 0; trans < 4; ++trans) {
      for (const bool broadcast_a : {true, false}) {
        GemmCase c{dense_problem(t, 33, 70, 45, trans & 1, trans & 2)};
        GemmProblem& p = c.p;
        p.batch = 5;
        // Items with gaps between them; the broadcast operand is one matrix for all.
        const int64_t a_items = (p.trans_a ? p.K : p.M) * p.lda + 11;
        const int64_t b_items = (p.trans_b ? p.N : p.K) * p.ldb + 13;
        p.stride_a = broadcast_a ? 0 : a_items;
        p.stride_b = broadcast_a ? b_items : 0;
        p.stride_d = p.M * p.ldd + 7;
        p.alpha = -0.75;
        check_case(c, t == DType::f16 ? 1e-2 : t == DType::f64 ? 1e-12 : 1e-5);
      }
    }
  }
}

TEST(CudaBlasLtGpu, EachEpilogue) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(13);
  struct Kinds {
    DType in, out;
    double tol;
  };
  for (const Kinds k :
       {Kinds{DType::f32, DType::f32, 1e-5}, Kinds{DType::f16, DType::f16, 1e-2},
        Kinds{DType::bf16, DType::bf16, 1e-2}, Kinds{DType::f16, DType::f32, 1e-3}}) {
    for (const Epilogue e : {Epilogue::bias, Epilogue::relu, Epilogue::bias_relu}) {
      for (const int64_t batch : {1, 3}) {
        GemmCase c{dense_problem(k.in, 64, 300, 17, false, true)};
        c.p.d = k.out;
        c.p.epilogue = e;
        c.p.alpha = 1.5;
        c.p.batch = batch;
        c.p.stride_a = 64 * 17;
        c.p.stride_b = 0;
        c.p.stride_d = 64 * 300;
        check_case(c, k.tol);
      }
    }
  }
}

// Whether cuBLASLt has double-precision epilogue kernels is its own choice; zc promises the
// right values or a zc::Error naming the problem, never wrong values.
TEST(CudaBlasLtGpu, F64EpiloguesAreRightOrRefused) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(14);
  for (const Epilogue e : {Epilogue::bias, Epilogue::relu, Epilogue::bias_relu}) {
    GemmCase c{dense_problem(DType::f64, 40, 50, 60)};
    c.p.epilogue = e;
    const zc::test::GemmOperands o = zc::test::make_operands(c);
    try {
      zc::test::run_case(c, o);
    } catch (const zc::Error& err) {
      EXPECT_TRUE(zc::test::contains(
          err.what(), "has no algorithm for the matrix product " + zc::cuda::describe(c.p)))
          << err.what();
      std::cout << "refused, as allowed: " << err.what() << "\n";
      continue;
    }
    zc::test::expect_product(c, o, o.d.read(), 1e-12);
  }
}

TEST(CudaBlasLtGpu, LeadingDimensionsPastTheRow) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(15);
  for (const DType t : {DType::f32, DType::f16}) {
    for (int trans = 0; trans < 4; ++trans) {
      GemmCase c{dense_problem(t, 300, 64, 17, trans & 1, trans & 2)};
      c.p.lda += 5;
      c.p.ldb += 3;
      c.p.ldd += 9;
      c.p.epilogue = Epilogue::bias;
      check_case(c, t == DType::f16 ? 1e-2 : 1e-5);
    }
  }
}

TEST(CudaBlasLtGpu, MisalignedPointers) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(16);
  for (const DType t : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
    const double tol = t == DType::f32 ? 1e-5 : t == DType::f64 ? 1e-12 : 1e-2;
    for (int which = 0; which < 5; ++which) {
      GemmCase c{dense_problem(t, 64, 64, 64)};
      c.p.epilogue = Epilogue::bias_relu;
      c.off_a = which == 0 || which == 4;
      c.off_b = which == 1 || which == 4;
      c.off_d = which == 2 || which == 4;
      c.off_bias = which == 3 || which == 4;
      check_case(c, tol);
    }
  }
}

// The counts below are this test's alone once the background start's warm-up of the previous
// process's products (cuda/blaslt_warm.h) is over.
TEST(CudaBlasLtGpu, APlanIsMadeOnceAndReused) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::wait_for_blaslt_warmup(0);
  zc::manual_seed(17);
  GemmCase c{dense_problem(DType::f32, 37, 41, 43)};
  const zc::test::GemmOperands o = zc::test::make_operands(c);
  const zc::cuda::BlasLtStats s0 = zc::cuda::blaslt_stats();
  zc::test::run_case(c, o);
  const zc::cuda::BlasLtStats s1 = zc::cuda::blaslt_stats();
  EXPECT_EQ(s1.heuristic_runs, s0.heuristic_runs + 1);
  EXPECT_EQ(s1.plans, s0.plans + 1);
  EXPECT_EQ(s1.products, s0.products + 1);
  // The same problem, and the same with another alpha: no heuristic.
  c.p.alpha = 2.5;
  zc::test::run_case(c, o);
  zc::test::run_case(c, o);
  const zc::cuda::BlasLtStats s2 = zc::cuda::blaslt_stats();
  EXPECT_EQ(s2.heuristic_runs, s1.heuristic_runs);
  EXPECT_EQ(s2.plans, s1.plans);
  EXPECT_EQ(s2.products, s1.products + 2);
  zc::test::expect_product(c, o, o.d.read(), 1e-5);
  // A less aligned pointer is another plan; its class then reuses that one.
  c.off_a = 1;
  zc::test::run_case(c, zc::test::make_operands(c));
  c.off_a = 3;
  check_case(c, 1e-5);
  const zc::cuda::BlasLtStats s3 = zc::cuda::blaslt_stats();
  EXPECT_EQ(s3.heuristic_runs, s2.heuristic_runs + 1);
  EXPECT_EQ(s3.plans, s2.plans + 1);
}

// A warm-up (cuda/blaslt_warm.h) plans each product for its pointers' alignment and runs it
// once, without counting it as a product; the product then makes no plan and computes as
// always. planned_products lists the plan, as run only once a real product has run with it.
// Empty problems and those too large for its scratch are skipped.
TEST(CudaBlasLtGpu, AWarmUpPlansAndLoadsAheadOfTheProduct) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::wait_for_blaslt_warmup(0);
  zc::manual_seed(19);
  GemmCase c{dense_problem(DType::f32, 53, 59, 61)};
  c.p.epilogue = Epilogue::bias;
  c.p.trans_b = true;
  c.p.ldb = 61;
  c.off_a = 1;  // A aligned to 4 bytes: a plan of its own
  const zc::test::GemmOperands o = zc::test::make_operands(c);
  const zc::cuda::GemmAlignment align = zc::cuda::gemm_alignment(
      c.p, o.a.at(c.off_a), o.b.at(c.off_b), o.d.at(c.off_d), o.bias.at(c.off_bias));
  ASSERT_EQ(align.a, 4u);
  GemmProblem empty = dense_problem(DType::f32, 8, 8, 0);
  GemmProblem huge = dense_problem(DType::f32, 1 << 16, 1 << 16, 64);
  const std::vector<zc::cuda::GemmUse> uses{
      {c.p, align, false}, {empty, {}, false}, {huge, {}, false}};
  const zc::cuda::BlasLtStats s0 = zc::cuda::blaslt_stats();
  EXPECT_EQ(zc::cuda::warm_products(0, uses), 1);
  const zc::cuda::BlasLtStats s1 = zc::cuda::blaslt_stats();
  EXPECT_EQ(s1.heuristic_runs, s0.heuristic_runs + 1);
  EXPECT_EQ(s1.products, s0.products);
  auto listed = [&] {
    for (const zc::cuda::GemmUse& u : zc::cuda::planned_products(0)) {
      if (u.problem == c.p && u.align == align) return u.ran ? 2 : 1;
    }
    return 0;
  };
  EXPECT_EQ(listed(), 1);
  zc::test::run_case(c, o);
  const zc::cuda::BlasLtStats s2 = zc::cuda::blaslt_stats();
  EXPECT_EQ(s2.heuristic_runs, s1.heuristic_runs);
  EXPECT_EQ(s2.products, s1.products + 1);
  EXPECT_EQ(listed(), 2);
  zc::test::expect_product(c, o, o.d.read(), 1e-5);
}

// K=0 is an empty sum: D = act(bias), zeros without a bias; A and B are not read. M, N or batch
// of 0 write nothing and call nothing.
TEST(CudaBlasLtGpu, EmptyProblems) {
  ZC_SKIP_WITHOUT_GPU();
  zc::cuda::wait_for_blaslt_warmup(0);
  zc::manual_seed(18);
  for (const DType t : {DType::f32, DType::f16}) {
    for (const Epilogue e : {Epilogue::none, Epilogue::bias, Epilogue::bias_relu}) {
      GemmCase c{dense_problem(t, 20, 30, 0)};
      c.p.epilogue = e;
      c.p.batch = 2;
      c.p.stride_d = 20 * 30;
      c.p.lda = c.p.ldb = 0;
      const zc::test::GemmOperands o = zc::test::make_operands(c);
      zc::cuda::gemm(c.p, 0, 0, o.d.at(), e == Epilogue::none ? 0 : o.bias.at(), 0,
                     zc::cuda::current_stream(0));
      zc::test::expect_product(c, o, o.d.read(), 0.0);
    }
  }
  const zc::test::GpuBuffer d = zc::test::filled_buffer(64, DType::f32, zc::test::kSentinel);
  const zc::cuda::BlasLtStats before = zc::cuda::blaslt_stats();
  for (const auto& [m, n, batch] :
       std::vector<std::array<int64_t, 3>>{{0, 8, 1}, {8, 0, 1}, {8, 8, 0}}) {
    GemmProblem p = dense_problem(DType::f32, m, n, 8);
    p.batch = batch;
    zc::cuda::gemm(p, 0, 0, d.at(), 0, 0, zc::cuda::current_stream(0));
  }
  const zc::cuda::BlasLtStats after = zc::cuda::blaslt_stats();
  EXPECT_EQ(after.products, before.products);
  EXPECT_EQ(after.heuristic_runs, before.heuristic_runs);
  EXPECT_EQ(d.read(), d.host);
}

TEST(CudaBlasLtGpu, Tf32OnlyWhenAllowed) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(19);
  GemmCase c{dense_problem(DType::f32, 256, 256, 1024)};
  c.p.allow_tf32 = true;
  // TF32 keeps 10 bits of mantissa: each product is off by up to about 2^-10 of its size.
  check_case(c, 5e-3);
  c.p.allow_tf32 = false;
  check_case(c, 1e-5);
}

TEST(CudaBlasLtGpu, ThreadsShareAPlan) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(20);
  GemmCase c{dense_problem(DType::f16, 96, 80, 64)};
  c.p.epilogue = Epilogue::bias;  // the bias pointer is per call, the plan shared
  std::vector<zc::test::GemmOperands> ops;
  for (int t = 0; t < 4; ++t) ops.push_back(zc::test::make_operands(c));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) zc::test::run_case(c, ops[t]);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const zc::test::GemmOperands& o : ops) zc::test::expect_product(c, o, o.d.read(), 1e-2);
}

TEST(CudaBlasLtGpu, AnotherStreamGetsItsOwnWorkspace) {
  ZC_SKIP_WITHOUT_GPU();
  zc::manual_seed(21);
  GemmCase c{dense_problem(DType::f32, 128, 128, 128)};
  const zc::test::GemmOperands o = zc::test::make_operands(c);
  zc::test::run_case(c, o);  // the current stream's workspace exists from here on
  const zc::cuda::Driver& drv = zc::cuda::driver();
  CUstream other = nullptr;
  zc::cuda::check(drv.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  zc::cuda::synchronize(0);
  const uint64_t held = zc::cuda::memory_stats(0).allocated_bytes;
  zc::test::run_case(c, o, other);
  zc::cuda::check(drv.cuStreamSynchronize(other), "cuStreamSynchronize");
  EXPECT_EQ(zc::cuda::memory_stats(0).allocated_bytes, held + zc::cuda::kBlasLtWorkspaceBytes);
  zc::test::expect_product(c, o, o.d.read(), 1e-5);
  // The workspace is kept for the stream, so the stream is too.
}

#endif

}  // namespace
