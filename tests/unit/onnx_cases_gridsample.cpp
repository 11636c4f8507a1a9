// ONNX cases of GridSample (onnx_cases.h): every mode, padding mode and align_corners in opset
// 20's names, some in opset 16's, on odd sizes with a batch and several channels; grids whose
// points reach past [-1, 1] (some far enough to be reflected more than once), that land on
// pixel centres and edges, and, for nearest, on halves (which round to even); dims of one
// pixel, one channel, one output point; 5-D X (linear and nearest: ONNX Runtime samples no
// cubic in 3-d); f64. The grid is an input of the model, so a compiled call traces it.
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <iterator>

#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// One GridSample node of inputs "x" and "grid" to "out", in a file of `opset`.
Builder grid_sample(const Shape& x, const Shape& grid, std::vector<Attr> attrs, int64_t opset = 20,
                    DType t = DType::f32) {
  Builder b(opset);
  b.input("x", t, x).input("grid", t, grid).output("out", t);
  b.node("GridSample", {"x", "grid"}, {"out"}, std::move(attrs));
  return b;
}

// A grid of `shape` uniform in [-1.7, 1.7], its first points at the corners and the centre,
// just outside them, and far outside (reflected two and three times).
Tensor grid_of(const Shape& shape) {
  Tensor g = (rand(shape) * 3.4 - 1.7).contiguous();
  const float special[] = {-1,     -1,   1,     1,     0,    0,     1,    -1,    1.02f,
                           -1.02f, 3.3f, -2.6f, -5.1f, 7.7f, -1.3f, 0.9f, -9.4f, 11.2f};
  float* p = g.data<float>();
  for (int64_t k = 0; k < std::min<int64_t>(g.numel(), std::size(special)); ++k) {
    p[k] = special[k];
  }
  return g;
}

// A grid of multiples of 1/4 from -1.5 to 1.5: the points land on pixel centres, on edges and,
// with a width of 8 (or a height of 5 with align_corners), on halves of a pixel exactly.
Tensor quarters(const Shape& shape) {
  Tensor g = Tensor::empty(shape, DType::f32);
  float* p = g.data<float>();
  for (int64_t k = 0; k < g.numel(); ++k) p[k] = static_cast<float>((k * 7) % 13 - 6) / 4;
  return g;
}

// ONNX Runtime's older versions clamp a point outside X to the border before taking cubic's
// taps (its issue 10607); its newer ones pad each tap, as torch and zc do. Both agree on points
// inside [-1, 1], and on points whose coordinates outside it are beyond the taps' reach with the
// others at least half a pixel from the edge: the cases of cubic with border padding take such
// points (of X at least 4 wide, or 1), so that they hold against either, and
// OnnxImport.GridSampleCubicBorderPadsEachTapAsTorch checks the others against torch.
Tensor border_safe(const Shape& shape) {
  Tensor g = rand(shape).contiguous();
  const int64_t r = shape.back();
  float* p = g.data<float>();
  for (int64_t k = 0; k < g.numel(); ++k) {
    const int64_t point = k / r, coord = k % r;
    const float u = p[k];
    const bool far = point % 3 == 2 || (point % 3 == 1 && coord == 0);
    if (point % 3 == 0) {
      p[k] = u * 2 - 1;  // inside
    } else if (far) {
      p[k] = (u < 0.5f ? -1 : 1) * (2.5f + 3 * u);  // beyond the taps' reach
    } else {
      p[k] = u * 1.5f - 0.75f;  // at least half a pixel in
    }
  }
  return g;
}

// The grid of a case of `mode` and `padding`: `other`'s but for cubic with border padding.
Tensor grid_for(const std::string& mode, const std::string& padding, const Shape& shape,
                Tensor (*other)(const Shape&) = grid_of) {
  return mode == "cubic" && padding == "border" ? border_safe(shape) : other(shape);
}

void add_every_mode(std::vector<Case>& c) {
  const Shape x{2, 3, 5, 7}, grid{2, 4, 6, 2};
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int align : {0, 1}) {
        c.push_back({std::string("GridSample ") + mode + ", " + padding + ", align_corners " +
                         std::to_string(align),
                     grid_sample(x, grid,
                                 {Attr("mode", mode), Attr("padding_mode", padding),
                                  Attr("align_corners", align)}),
                     {randn(x), grid_for(mode, padding, grid)}});
      }
    }
  }
  // Halves of a pixel: nearest rounds them to even, linear and cubic take exact weights.
  const Shape xq{1, 2, 5, 8}, gq{1, 3, 9, 2};
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int align : {0, 1}) {
        c.push_back({std::string("GridSample ") + mode + ", " + padding + ", align_corners " +
                         std::to_string(align) + " on quarters",
                     grid_sample(xq, gq,
                                 {Attr("mode", mode), Attr("padding_mode", padding),
                                  Attr("align_corners", align)}),
                     {randn(xq), grid_for(mode, padding, gq, quarters)}});
      }
    }
  }
}

void add_shapes(std::vector<Case>& c) {
  c.push_back({"GridSample defaults (opset 20: linear, zeros)",
               grid_sample({2, 3, 5, 7}, {2, 3, 4, 2}, {}),
               {randn({2, 3, 5, 7}), grid_of({2, 3, 4, 2})}});
  c.push_back({"GridSample defaults (opset 16: bilinear, zeros)",
               grid_sample({2, 3, 5, 7}, {2, 3, 4, 2}, {}, 16),
               {randn({2, 3, 5, 7}), grid_of({2, 3, 4, 2})}});
  c.push_back({"GridSample opset 16 bicubic, reflection, align_corners",
               grid_sample({2, 2, 6, 5}, {2, 5, 3, 2},
                           {Attr("mode", "bicubic"), Attr("padding_mode", "reflection"),
                            Attr("align_corners", 1)},
                           16),
               {randn({2, 2, 6, 5}), grid_of({2, 5, 3, 2})}});
  c.push_back({"GridSample opset 16 bilinear, border",
               grid_sample({1, 4, 3, 9}, {1, 7, 2, 2},
                           {Attr("mode", "bilinear"), Attr("padding_mode", "border")}, 16),
               {randn({1, 4, 3, 9}), grid_of({1, 7, 2, 2})}});
  c.push_back({"GridSample opset 16 nearest, zeros, align_corners",
               grid_sample({3, 2, 4, 5}, {3, 2, 6, 2},
                           {Attr("mode", "nearest"), Attr("align_corners", 1)}, 16),
               {randn({3, 2, 4, 5}), grid_of({3, 2, 6, 2})}});
  c.push_back({"GridSample one channel, one output point",
               grid_sample({1, 1, 5, 7}, {1, 1, 1, 2}, {Attr("mode", "cubic")}),
               {randn({1, 1, 5, 7}), from_vector({0.3f, -0.45f}, {1, 1, 1, 2})}});
  // A dim of one pixel (not with reflection and align_corners, where ONNX Runtime divides by a
  // period of 0 and reads outside X).
  for (const char* padding : {"zeros", "border", "reflection"}) {
    for (const char* mode : {"linear", "nearest", "cubic"}) {
      c.push_back({std::string("GridSample ") + mode + ", " + padding + ", a height of 1",
                   grid_sample({2, 3, 1, 6}, {2, 4, 5, 2},
                               {Attr("mode", mode), Attr("padding_mode", padding)}),
                   {randn({2, 3, 1, 6}), grid_for(mode, padding, {2, 4, 5, 2})}});
    }
  }
  c.push_back({"GridSample border, align_corners, a width of 1",
               grid_sample({2, 3, 4, 1}, {2, 4, 5, 2},
                           {Attr("mode", "cubic"), Attr("padding_mode", "border"),
                            Attr("align_corners", 1)}),
               {randn({2, 3, 4, 1}), border_safe({2, 4, 5, 2})}});
  c.push_back(
      {"GridSample of f64",
       grid_sample({2, 3, 5, 7}, {2, 4, 3, 2},
                   {Attr("mode", "cubic"), Attr("padding_mode", "reflection")}, 20, DType::f64),
       {randn({2, 3, 5, 7}).to(DType::f64), grid_of({2, 4, 3, 2}).to(DType::f64)}});
  // Volumetric: X [N, C, D, H, W], grid [N, D_out, H_out, W_out, 3].
  for (const char* mode : {"linear", "nearest"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int align : {0, 1}) {
        c.push_back({std::string("GridSample 5-D ") + mode + ", " + padding + ", align_corners " +
                         std::to_string(align),
                     grid_sample({2, 2, 3, 4, 5}, {2, 2, 3, 4, 3},
                                 {Attr("mode", mode), Attr("padding_mode", padding),
                                  Attr("align_corners", align)}),
                     {randn({2, 2, 3, 4, 5}), grid_of({2, 2, 3, 4, 3})}});
      }
    }
  }
}

}  // namespace

void add_gridsample_cases(std::vector<Case>& c) {
  add_every_mode(c);
  add_shapes(c);
}

}  // namespace zc::test::onnx_model

#endif
