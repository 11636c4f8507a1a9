// GridSample beyond its cases against ONNX Runtime (onnx_cases_gridsample.cpp): what ONNX Runtime
// does not run, checked against what it does (1-d and 3-d sampling reduce to 2-d on a dim of one
// pixel; nearest of integers is nearest of their floats; half precision is f32 rounded once),
// cubic sampling with border padding near X against torch (ONNX Runtime's versions differ
// there), a batch size the compiled call was not first made for, NaN points, the GPU, and what
// the rule refuses, each a zc::Error naming the node.
#include <gtest/gtest.h>

#include "unit/test_support.h"
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <limits>
#include <string>
#include <vector>

#include "unit/onnx_builder.h"
#include "unit/onnx_cases.h"

namespace zc {
namespace {

using test::onnx_model::Attr;
using test::onnx_model::Builder;
using test::onnx_model::expect_refused;
using test::onnx_model::load_model;

// One GridSample node "n" of inputs "x" (dtype xt) and "grid" (f32) to "out"; -1 in a shape is
// a symbolic dim.
Builder grid_sample(const Shape& x, const Shape& grid, std::vector<Attr> attrs, int64_t opset = 20,
                    DType xt = DType::f32, DType gt = DType::f32) {
  Builder b(opset);
  b.input("x", xt, x).input("grid", gt, grid).output("out", xt);
  b.node("GridSample", {"x", "grid"}, {"out"}, std::move(attrs), "n");
  return b;
}

std::vector<Attr> attrs(const char* mode, const char* padding, int align) {
  return {Attr("mode", mode), Attr("padding_mode", padding), Attr("align_corners", align)};
}

Tensor points(const Shape& s) {
  return rand(s) * 3.4 - 1.7;
}

// The model's output eagerly and compiled.
std::pair<Tensor, Tensor> both(const Builder& b, const std::vector<Tensor>& in) {
  auto m = load_model(b);
  return {(*m)(in)[0], compile(m)(in)[0]};
}

TEST(OnnxImport, GridSampleOfOneAndThreeSpatialDimsAgreesWithTwo) {
  manual_seed(3);
  NoGradGuard no_grad;
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int align : {0, 1}) {
        SCOPED_TRACE(std::string(mode) + " " + padding + " " + std::to_string(align));
        // 1-d: X [N, C, W] against [N, C, 1, W] with every point at the one row's centre.
        const Tensor x1 = randn({2, 3, 7}), g1 = points({2, 5, 1});
        const Tensor g1_2d = cat({g1, zeros({2, 5, 1})}, 2).unsqueeze(1);
        const auto [want1, want1_compiled] =
            both(grid_sample({2, 3, 1, 7}, {2, 1, 5, 2}, attrs(mode, padding, align)),
                 {x1.unsqueeze(2), g1_2d});
        const auto [got1, got1_compiled] =
            both(grid_sample({2, 3, 7}, {2, 5, 1}, attrs(mode, padding, align)), {x1, g1});
        EXPECT_TRUE(allclose(got1, want1.squeeze(2), 1e-6, 1e-6));
        EXPECT_TRUE(allclose(got1_compiled, want1_compiled.squeeze(2), 1e-6, 1e-6));
        // 3-d: X [N, C, 1, H, W] against [N, C, H, W], every point at the one plane's centre.
        const Tensor x3 = randn({2, 2, 1, 5, 6}), g3 = points({2, 1, 3, 4, 2});
        const Tensor g3_3d = cat({g3, zeros({2, 1, 3, 4, 1})}, 4);
        const auto [want3, want3_compiled] =
            both(grid_sample({2, 2, 5, 6}, {2, 3, 4, 2}, attrs(mode, padding, align)),
                 {x3.squeeze(2), g3.squeeze(1)});
        const auto [got3, got3_compiled] =
            both(grid_sample({2, 2, 1, 5, 6}, {2, 1, 3, 4, 3}, attrs(mode, padding, align)),
                 {x3, g3_3d});
        EXPECT_TRUE(allclose(got3, want3.unsqueeze(2), 1e-6, 1e-6));
        EXPECT_TRUE(allclose(got3_compiled, want3_compiled.unsqueeze(2), 1e-6, 1e-6));
      }
    }
  }
}

TEST(OnnxImport, GridSampleNearestTakesAnyDtype) {
  manual_seed(4);
  NoGradGuard no_grad;
  const Tensor x = randint(-50, 50, {2, 3, 5, 4}, DType::i32), g = points({2, 3, 6, 2});
  for (const char* padding : {"zeros", "border", "reflection"}) {
    SCOPED_TRACE(padding);
    const auto [want, want_compiled] =
        both(grid_sample({2, 3, 5, 4}, {2, 3, 6, 2}, attrs("nearest", padding, 0)),
             {cast(x, DType::f32), g});
    const auto [got, got_compiled] =
        both(grid_sample({2, 3, 5, 4}, {2, 3, 6, 2}, attrs("nearest", padding, 0), 20, DType::i32),
             {x, g});
    EXPECT_EQ(got.dtype(), DType::i32);
    EXPECT_TRUE(allclose(cast(got, DType::f32), want, 0, 0));
    EXPECT_TRUE(allclose(cast(got_compiled, DType::f32), want_compiled, 0, 0));
  }
}

// Cubic sampling with border padding pads each tap, as torch and ONNX Runtime's newer versions
// do, not the point (as the older ones and the specification's reference, which differ on points
// within two pixels outside X): torch.nn.functional.grid_sample's values (bicubic, border).
TEST(OnnxImport, GridSampleCubicBorderPadsEachTapAsTorch) {
  NoGradGuard no_grad;
  const Tensor x =
      from_vector({0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, -2.0f, 0.25f, 1.0f, -0.75f, 3.0f, -1.5f},
                  {1, 1, 3, 4});
  const Tensor g = from_vector({-1.2f, 0.3f, 1.15f, -0.4f, 0.2f, -1.3f, -0.6f, 1.2f, -1.1f, -1.1f,
                                1.3f, 1.05f, -0.97f, 0.5f, 0.4f, -1.45f},
                               {1, 2, 4, 2});
  const std::vector<std::vector<float>> torch{{0.05877477f, 0.6962558f, 1.804099f, 0.3372313f,
                                               0.6529881f, -1.636315f, 0.7045359f, 2.009562f},
                                              {-0.342482f, 0.7972971f, 1.843144f, -0.627489f,
                                               0.7215096f, -2.04197f, 0.1737727f, 2.515875f}};
  for (int align : {0, 1}) {
    SCOPED_TRACE(align);
    const auto [eager, compiled] =
        both(grid_sample({1, 1, 3, 4}, {1, 2, 4, 2}, attrs("cubic", "border", align)), {x, g});
    const Tensor want = from_vector(torch[static_cast<size_t>(align)], {1, 1, 2, 4});
    EXPECT_TRUE(allclose(eager, want, 1e-5, 1e-5));
    EXPECT_TRUE(allclose(compiled, want, 1e-5, 1e-5));
  }
}

// Half precision computes in f32: the f32 result of the same values, rounded once.
TEST(OnnxImport, GridSampleOfHalfPrecisionComputesInF32) {
  manual_seed(7);
  NoGradGuard no_grad;
  for (DType t : {DType::f16, DType::bf16}) {
    const Tensor x = cast(randn({2, 3, 5, 7}), t), g = cast(points({2, 4, 6, 2}), t);
    for (const char* mode : {"linear", "nearest", "cubic"}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + mode);
      const auto [want, want_compiled] =
          both(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, attrs(mode, "reflection", 0)),
               {cast(x, DType::f32), cast(g, DType::f32)});
      const auto [got, got_compiled] = both(
          grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, attrs(mode, "reflection", 0), 20, t, t), {x, g});
      EXPECT_EQ(got.dtype(), t);
      EXPECT_TRUE(allclose(cast(got, DType::f32), cast(cast(want, t), DType::f32), 0, 0));
      EXPECT_TRUE(allclose(cast(got_compiled, DType::f32), want_compiled, 1e-2, 1e-2));
    }
  }
}

// A symbolic batch: a compiled call of another batch size gives the eager values.
TEST(OnnxImport, GridSampleOfASymbolicBatchServesEveryBatchSize) {
  manual_seed(5);
  NoGradGuard no_grad;
  auto m = load_model(grid_sample({-1, 3, 5, 7}, {-1, 4, 6, 2}, attrs("cubic", "reflection", 0)));
  CompiledModule fast = compile(m);
  for (int64_t n : {2, 3, 1}) {
    SCOPED_TRACE(n);
    const std::vector<Tensor> in{randn({n, 3, 5, 7}), points({n, 4, 6, 2})};
    EXPECT_TRUE(allclose(fast(in)[0], (*m)(in)[0], 1e-5, 1e-5));
  }
}

// A point ONNX leaves undefined (NaN, infinite) samples nothing, and raises no error: its taps'
// rows are clamped into the table like any other's.
TEST(OnnxImport, GridSampleOfNaNPointsRaisesNothing) {
  NoGradGuard no_grad;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor g = from_vector({nan, 0.5f, 0.25f, inf, -inf, nan, 0.1f, 0.2f}, {1, 2, 2, 2});
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      SCOPED_TRACE(std::string(mode) + " " + padding);
      const auto [eager, compiled] =
          both(grid_sample({1, 2, 3, 4}, {1, 2, 2, 2}, attrs(mode, padding, 0)),
               {randn({1, 2, 3, 4}), g});
      EXPECT_EQ(eager.shape(), (Shape{1, 2, 2, 2}));
      EXPECT_EQ(compiled.shape(), (Shape{1, 2, 2, 2}));
    }
  }
}

TEST(OnnxImportGpu, GridSampleRunsOnTheCallsDevice) {
  ZC_SKIP_WITHOUT_GPU();
  manual_seed(6);
  NoGradGuard no_grad;
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      SCOPED_TRACE(std::string(mode) + " " + padding);
      auto m = load_model(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, attrs(mode, padding, 1)));
      const std::vector<Tensor> in{randn({2, 3, 5, 7}), points({2, 4, 6, 2})};
      const Tensor want = (*m)(in)[0];
      m->to(Device::cuda(0));
      const std::vector<Tensor> on{in[0].to(Device::cuda(0)), in[1].to(Device::cuda(0))};
      EXPECT_TRUE(allclose((*m)(on)[0].to(Device::cpu()), want, 1e-5, 1e-5));
      EXPECT_TRUE(allclose(compile(m)(on)[0].to(Device::cpu()), want, 1e-5, 1e-5));
    }
  }
}

TEST(OnnxImport, GridSampleRefusesBadInputNamingTheNode) {
  const Tensor x = randn({2, 3, 5, 7});
  const std::string node = "ONNX node 'n' (GridSample): ";
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 2}, {}), {x, points({2, 4, 2})},
                 node + "grid [2,4,2] for X [2,3,5,7] (expected rank 4, [2, output dims..., 2]");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 3}, {}), {x, points({2, 4, 6, 3})},
                 node + "grid [2,4,6,3] for X [2,3,5,7] (expected rank 4", true);
  expect_refused(grid_sample({2, 3, 5, 7}, {1, 4, 6, 2}, {}), {x, points({1, 4, 6, 2})},
                 node + "grid [1,4,6,2] for X [2,3,5,7]");
  expect_refused(grid_sample({1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 4}, {}),
                 {randn({1, 1, 2, 2, 2, 2}), points({1, 1, 1, 1, 1, 4})},
                 node + "X [1,1,2,2,2,2]: zc samples X of rank 4 [N, C, H, W]");
  expect_refused(grid_sample({2, 3}, {2, 3}, {}), {randn({2, 3}), points({2, 3})},
                 node + "X [2,3]: zc samples X of rank 4");
  expect_refused(
      grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {Attr("mode", "bilinear")}),
      {x, points({2, 4, 6, 2})},
      node + "mode 'bilinear' is not one of linear, nearest, cubic (the names from opset 20");
  expect_refused(
      grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {Attr("mode", "cubic")}, 16),
      {x, points({2, 4, 6, 2})},
      node + "mode 'cubic' is not one of bilinear, nearest, bicubic (the names before opset 20");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {Attr("mode", "area")}),
                 {x, points({2, 4, 6, 2})},
                 node + "mode 'area' is not one of linear, nearest, cubic");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {Attr("padding_mode", "wrap")}),
                 {x, points({2, 4, 6, 2})},
                 node + "padding_mode 'wrap' is not one of zeros, border, reflection");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {}, 20, DType::i32),
                 {randint(0, 9, {2, 3, 5, 7}, DType::i32), points({2, 4, 6, 2})},
                 node + "linear sampling of i32 (expected a float X; nearest takes any)");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {Attr("mode", "nearest")}, 20, DType::f32,
                             DType::i64),
                 {x, randint(-1, 2, {2, 4, 6, 2})}, node + "grid must be floats, got i64");
  expect_refused(grid_sample({2, 3, 5, 7}, {2, 4, 6, 2}, {}, 15), {x, points({2, 4, 6, 2})},
                 node + "GridSample is in the default domain from opset 16; the file's is 15");
  expect_refused(grid_sample({2, 3, 0, 7}, {2, 4, 6, 2}, {}),
                 {randn({2, 3, 0, 7}), points({2, 4, 6, 2})},
                 node + "X [2,3,0,7] has an empty spatial dim");
}

}  // namespace
}  // namespace zc

#endif
