// ONNX cases of the upsampling operators: Resize (opsets 13, 18, 19: every mode, nearest mode,
// coordinate transformation, cubic coefficient, antialias, axes and aspect-ratio policy, scales
// or sizes, on sizes of 1, shrinking and growing by whole and fractional scales) and
// ConvTranspose (strides, pads, dilations, groups, output_padding, output_shape, auto_pad, bias;
// 1-d and 2-d) (onnx_cases.h).
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

Tensor f32s(const std::vector<float>& v) {
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

// A Resize of an input of shape x, with the roi, scales and sizes given (an empty list leaves
// that input out).
Builder resize(const Shape& x, std::vector<Attr> attrs, const std::vector<float>& roi,
               const std::vector<float>& scales, const std::vector<int64_t>& sizes,
               int64_t opset = 13, DType dtype = DType::f32) {
  Builder b(opset);
  b.input("x", dtype, x).output("out", dtype);
  std::vector<std::string> in{"x", "", "", ""};
  if (!roi.empty()) b.init(in[1] = "roi", f32s(roi));
  if (!scales.empty()) b.init(in[2] = "scales", f32s(scales));
  if (!sizes.empty()) b.init(in[3] = "sizes", i64s(sizes));
  while (in.back().empty()) in.pop_back();
  b.node("Resize", in, {"out"}, std::move(attrs));
  return b;
}

void add_nearest(std::vector<Case>& c) {
  const Shape img{2, 3, 5, 7};
  c.push_back({"Resize nearest (round_prefer_floor, half_pixel), whole scales",
               resize(img, {}, {}, {1, 1, 2, 3}, {}),
               {randn(img)}});
  c.push_back({"Resize nearest round_prefer_ceil, asymmetric, fractional scales",
               resize(img,
                      {Attr("nearest_mode", "round_prefer_ceil"),
                       Attr("coordinate_transformation_mode", "asymmetric")},
                      {}, {1, 1, 1.5f, 0.6f}, {}),
               {randn(img)}});
  c.push_back({"Resize nearest floor, align_corners, sizes",
               resize(img,
                      {Attr("nearest_mode", "floor"),
                       Attr("coordinate_transformation_mode", "align_corners")},
                      {}, {}, {2, 3, 9, 4}),
               {randn(img)}});
  c.push_back({"Resize nearest ceil, pytorch_half_pixel, shrinking sizes",
               resize(img,
                      {Attr("nearest_mode", "ceil"),
                       Attr("coordinate_transformation_mode", "pytorch_half_pixel")},
                      {}, {}, {2, 3, 3, 2}),
               {randn(img)}});
  c.push_back({"Resize nearest half_pixel_symmetric (opset 19)",
               resize(img, {Attr("coordinate_transformation_mode", "half_pixel_symmetric")}, {},
                      {1, 1, 0.6f, 2.5f}, {}, 19),
               {randn(img)}});
  c.push_back({"Resize nearest tf_half_pixel_for_nn",
               resize(img, {Attr("coordinate_transformation_mode", "tf_half_pixel_for_nn")}, {},
                      {1, 1, 2, 0.5f}, {}),
               {randn(img)}});
  c.push_back({"Resize nearest tf_crop_and_resize, roi, extrapolation_value",
               resize(img,
                      {Attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                       Attr("extrapolation_value", -2.5f)},
                      {0, 0, -0.2f, 0.3f, 1, 1, 0.9f, 1.4f}, {}, {2, 3, 6, 8}),
               {randn(img)}});
  c.push_back({"Resize nearest of a 1-d input",
               resize({7}, {Attr("nearest_mode", "round_prefer_ceil")}, {}, {2.5f}, {}),
               {randn({7})}});
  c.push_back({"Resize nearest from and to sizes of 1",
               resize({1, 1, 1, 5}, {}, {}, {}, {1, 1, 4, 1}),
               {randn({1, 1, 1, 5})}});
  c.push_back({"Resize nearest of int32, tf_crop_and_resize",
               resize({2, 5, 6},
                      {Attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                       Attr("extrapolation_value", 7.0f)},
                      {0, 0.1f, -0.3f, 1, 0.8f, 1.2f}, {}, {2, 7, 4}, 13, DType::i32),
               {randint(-50, 50, {2, 5, 6}, DType::i32)}});
}

void add_linear(std::vector<Case>& c) {
  const Shape img{2, 3, 5, 7};
  auto linear = [](std::vector<Attr> more) {
    more.insert(more.begin(), Attr("mode", "linear"));
    return more;
  };
  c.push_back({"Resize linear (half_pixel), whole scales",
               resize(img, linear({}), {}, {1, 1, 2, 2}, {}),
               {randn(img)}});
  c.push_back({"Resize linear asymmetric, shrinking sizes",
               resize(img, linear({Attr("coordinate_transformation_mode", "asymmetric")}), {}, {},
                      {2, 3, 3, 4}),
               {randn(img)}});
  c.push_back({"Resize linear align_corners",
               resize(img, linear({Attr("coordinate_transformation_mode", "align_corners")}), {},
                      {}, {2, 3, 9, 13}),
               {randn(img)}});
  c.push_back({"Resize linear pytorch_half_pixel to a size of 1",
               resize(img, linear({Attr("coordinate_transformation_mode", "pytorch_half_pixel")}),
                      {}, {}, {2, 3, 1, 9}),
               {randn(img)}});
  c.push_back({"Resize linear half_pixel_symmetric (opset 19), fractional scales",
               resize(img, linear({Attr("coordinate_transformation_mode", "half_pixel_symmetric")}),
                      {}, {1, 1, 1.7f, 0.55f}, {}, 19),
               {randn(img)}});
  c.push_back({"Resize linear tf_crop_and_resize, roi, extrapolation_value",
               resize(img,
                      linear({Attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                              Attr("extrapolation_value", 3.0f)}),
                      {0, 0, 0.2f, -0.25f, 1, 1, 1.1f, 0.7f}, {}, {2, 3, 8, 5}),
               {randn(img)}});
  c.push_back({"Resize linear from a size of 1",
               resize({2, 3, 1, 4}, linear({}), {}, {}, {2, 3, 3, 1}),
               {randn({2, 3, 1, 4})}});
  c.push_back({"Resize linear of a 2-d input",
               resize({5, 7}, linear({}), {}, {1.5f, 0.7f}, {}),
               {randn({5, 7})}});
  c.push_back({"Resize linear of a 3-d input (trilinear)",
               resize({4, 5, 6}, linear({Attr("coordinate_transformation_mode", "align_corners")}),
                      {}, {}, {6, 3, 8}),
               {randn({4, 5, 6})}});
  c.push_back({"Resize linear of NHWC (the channels last kept)",
               resize({2, 5, 7, 3}, linear({}), {}, {1, 1.5f, 2, 1}, {}),
               {randn({2, 5, 7, 3})}});
  c.push_back({"Resize linear of a 5-d input",
               resize({1, 2, 3, 4, 5}, linear({}), {}, {}, {1, 2, 5, 3, 7}),
               {randn({1, 2, 3, 4, 5})}});
  // A scale of 1.1 leaves 5 at 5 but still moves the coordinates, as ONNX Runtime does.
  c.push_back({"Resize linear, a fractional scale that keeps a length",
               resize(img, linear({}), {}, {1, 1, 1.1f, 2}, {}),
               {randn(img)}});
  c.push_back({"Resize linear, every scale 1 (unchanged)",
               resize(img, linear({}), {}, {1, 1, 1, 1}, {}),
               {randn(img)}});
  // Exporters at opset 13 write the unused roi and scales as empty tensors.
  {
    Builder b(13);
    b.input("x", DType::f32, img).output("out");
    b.init("roi", Tensor::empty({0})).init("scales", Tensor::empty({0}));
    b.init("sizes", i64s({2, 3, 10, 14}));
    b.node("Resize", {"x", "roi", "scales", "sizes"}, {"out"},
           {Attr("mode", "linear"), Attr("coordinate_transformation_mode", "pytorch_half_pixel")});
    c.push_back({"Resize linear, empty roi and scales as exporters write them", b, {randn(img)}});
  }
}

void add_cubic(std::vector<Case>& c) {
  const Shape img{2, 3, 5, 7};
  auto cubic = [](std::vector<Attr> more) {
    more.insert(more.begin(), Attr("mode", "cubic"));
    return more;
  };
  c.push_back({"Resize cubic (half_pixel, a = -0.75)",
               resize(img, cubic({}), {}, {1, 1, 2, 1.5f}, {}),
               {randn(img)}});
  c.push_back({"Resize cubic cubic_coeff_a -0.5, exclude_outside, align_corners",
               resize(img,
                      cubic({Attr("cubic_coeff_a", -0.5f), Attr("exclude_outside", 1),
                             Attr("coordinate_transformation_mode", "align_corners")}),
                      {}, {}, {2, 3, 8, 11}),
               {randn(img)}});
  c.push_back({"Resize cubic asymmetric, shrinking",
               resize(img, cubic({Attr("coordinate_transformation_mode", "asymmetric")}), {},
                      {1, 1, 0.6f, 0.75f}, {}),
               {randn(img)}});
  c.push_back({"Resize cubic tf_crop_and_resize, exclude_outside",
               resize(img,
                      cubic({Attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                             Attr("exclude_outside", 1), Attr("extrapolation_value", -1.0f)}),
                      {0, 0, -0.1f, 0.2f, 1, 1, 0.8f, 1.3f}, {}, {2, 3, 7, 9}),
               {randn(img)}});
  c.push_back({"Resize cubic pytorch_half_pixel of a 2-d input",
               resize({6, 4}, cubic({Attr("coordinate_transformation_mode", "pytorch_half_pixel")}),
                      {}, {}, {4, 9}),
               {randn({6, 4})}});
  c.push_back({"Resize cubic half_pixel_symmetric (opset 19)",
               resize(img,
                      cubic({Attr("coordinate_transformation_mode", "half_pixel_symmetric"),
                             Attr("cubic_coeff_a", -0.6f)}),
                      {}, {1, 1, 1.3f, 2.5f}, {}, 19),
               {randn(img)}});
}

// Opset 18: antialias, axes, keep_aspect_ratio_policy.
void add_opset18(std::vector<Case>& c) {
  const Shape img{2, 3, 9, 8};
  c.push_back(
      {"Resize linear antialias, shrinking",
       resize(img, {Attr("mode", "linear"), Attr("antialias", 1)}, {}, {1, 1, 0.5f, 0.34f}, {}, 18),
       {randn(img)}});
  c.push_back({"Resize cubic antialias, exclude_outside, sizes",
               resize(img,
                      {Attr("mode", "cubic"), Attr("antialias", 1), Attr("exclude_outside", 1),
                       Attr("cubic_coeff_a", -0.5f)},
                      {}, {}, {2, 3, 4, 3}, 18),
               {randn(img)}});
  c.push_back({"Resize linear antialias half_pixel_symmetric, growing and shrinking (opset 19)",
               resize(img,
                      {Attr("mode", "linear"), Attr("antialias", 1),
                       Attr("coordinate_transformation_mode", "half_pixel_symmetric")},
                      {}, {1, 1, 1.3f, 0.6f}, {}, 19),
               {randn(img)}});
  c.push_back({"Resize cubic antialias tf_crop_and_resize",
               resize(img,
                      {Attr("mode", "cubic"), Attr("antialias", 1),
                       Attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                       Attr("extrapolation_value", 0.5f)},
                      {0, 0, 0.1f, -0.2f, 1, 1, 0.7f, 1.1f}, {}, {2, 3, 4, 5}, 18),
               {randn(img)}});
  // A scale of 1.1 leaves 9 at 9: antialiasing leaves that axis as it is.
  c.push_back(
      {"Resize linear antialias, a fractional scale that keeps a length",
       resize(img, {Attr("mode", "linear"), Attr("antialias", 1)}, {}, {1, 1, 1.1f, 0.5f}, {}, 18),
       {randn(img)}});
  c.push_back(
      {"Resize linear, axes with scales",
       resize(img, {Attr("mode", "linear"), Attr("axes", {2, 3})}, {}, {1.5f, 0.5f}, {}, 18),
       {randn(img)}});
  c.push_back({"Resize nearest, keep_aspect_ratio_policy not_larger",
               resize(img, {Attr("axes", {2, 3}), Attr("keep_aspect_ratio_policy", "not_larger")},
                      {}, {}, {5, 12}, 18),
               {randn(img)}});
  // (ONNX Runtime applies the policy to no dim when the axes are negative.)
  c.push_back({"Resize cubic, negative axes",
               resize(img, {Attr("mode", "cubic"), Attr("axes", {-1, -2})}, {}, {}, {5, 12}, 18),
               {randn(img)}});
  c.push_back({"Resize linear, axes out of order, keep_aspect_ratio_policy not_smaller",
               resize(img,
                      {Attr("mode", "linear"), Attr("axes", {3, 2}),
                       Attr("keep_aspect_ratio_policy", "not_smaller")},
                      {}, {}, {3, 5}, 18),
               {randn(img)}});
  // Without axes the policy spans every dim: the batch and the channels shrink too.
  c.push_back(
      {"Resize nearest, keep_aspect_ratio_policy not_larger over every dim",
       resize(img, {Attr("keep_aspect_ratio_policy", "not_larger")}, {}, {}, {2, 3, 4, 6}, 18),
       {randn(img)}});
  c.push_back({"Resize linear tf_crop_and_resize, axes and their roi",
               resize(img,
                      {Attr("mode", "linear"), Attr("axes", {2, 3}),
                       Attr("coordinate_transformation_mode", "tf_crop_and_resize")},
                      {0.1f, -0.3f, 0.9f, 0.8f}, {}, {6, 10}, 18),
               {randn(img)}});
}

// A ConvTranspose of x with a weight (and a bias).
Builder conv_transpose(const Shape& x, const Tensor& w, std::vector<Attr> attrs,
                       const Tensor& bias = Tensor()) {
  std::vector<std::pair<std::string, Tensor>> inits{{"w", w}};
  if (bias.defined()) inits.push_back({"b", bias});
  return one("ConvTranspose", x, std::move(attrs), inits);
}

void add_conv_transpose(std::vector<Case>& c) {
  const Shape img{2, 4, 5, 6};
  c.push_back({"ConvTranspose, bias",
               conv_transpose(img, randn({4, 3, 3, 3}), {}, randn({3})),
               {randn(img)}});
  c.push_back({"ConvTranspose strides 2, asymmetric pads",
               conv_transpose(img, randn({4, 3, 3, 2}),
                              {Attr("strides", {2, 2}), Attr("pads", {1, 0, 0, 1})}),
               {randn(img)}});
  c.push_back({"ConvTranspose strides, dilations, output_padding",
               conv_transpose(img, randn({4, 2, 3, 3}),
                              {Attr("strides", {2, 3}), Attr("dilations", {2, 1}),
                               Attr("output_padding", {1, 2})},
                              randn({2})),
               {randn(img)}});
  c.push_back(
      {"ConvTranspose group 2",
       conv_transpose(img, randn({4, 3, 3, 2}),
                      {Attr("group", 2), Attr("strides", {2, 1}), Attr("pads", {1, 1, 0, 0})},
                      randn({6})),
       {randn(img)}});
  c.push_back({"ConvTranspose depthwise, kernel_shape",
               conv_transpose(img, randn({4, 1, 3, 3}),
                              {Attr("group", 4), Attr("kernel_shape", {3, 3}),
                               Attr("strides", {2, 2}), Attr("pads", {1, 1, 1, 1})}),
               {randn(img)}});
  c.push_back({"ConvTranspose auto_pad SAME_UPPER",
               conv_transpose(img, randn({4, 3, 3, 2}),
                              {Attr("auto_pad", "SAME_UPPER"), Attr("strides", {2, 2})}),
               {randn(img)}});
  c.push_back({"ConvTranspose auto_pad SAME_LOWER, dilations",
               conv_transpose(img, randn({4, 3, 3, 2}),
                              {Attr("auto_pad", "SAME_LOWER"), Attr("strides", {3, 2}),
                               Attr("dilations", {2, 2})}),
               {randn(img)}});
  c.push_back({"ConvTranspose auto_pad SAME_LOWER, output_padding",
               conv_transpose(img, randn({4, 3, 3, 2}),
                              {Attr("auto_pad", "SAME_LOWER"), Attr("strides", {2, 2}),
                               Attr("output_padding", {1, 1})}),
               {randn(img)}});
  c.push_back({"ConvTranspose auto_pad VALID",
               conv_transpose(img, randn({4, 3, 2, 3}),
                              {Attr("auto_pad", "VALID"), Attr("strides", {2, 2})}),
               {randn(img)}});
  c.push_back({"ConvTranspose output_shape, odd padding",
               conv_transpose(img, randn({4, 3, 3, 3}),
                              {Attr("strides", {2, 2}), Attr("output_shape", {10, 12})}),
               {randn(img)}});
  c.push_back({"ConvTranspose output_shape with SAME_UPPER",
               conv_transpose(img, randn({4, 3, 3, 3}),
                              {Attr("strides", {2, 2}), Attr("output_shape", {10, 12}),
                               Attr("auto_pad", "SAME_UPPER")}),
               {randn(img)}});
  c.push_back(
      {"ConvTranspose output_shape past the full output",
       conv_transpose(img, randn({4, 3, 3, 3}),
                      {Attr("strides", {2, 2}), Attr("output_shape", {12, 14})}, randn({3})),
       {randn(img)}});
  c.push_back({"ConvTranspose pads past the kernel",
               conv_transpose(img, randn({4, 3, 3, 3}),
                              {Attr("strides", {2, 2}), Attr("pads", {3, 0, 1, 4})}),
               {randn(img)}});
  c.push_back({"ConvTranspose of 1x1 pixels",
               conv_transpose({2, 4, 1, 1}, randn({4, 3, 2, 3}), {Attr("strides", {2, 2})}),
               {randn({2, 4, 1, 1})}});
  c.push_back(
      {"ConvTranspose 1-d",
       conv_transpose({2, 3, 7}, randn({3, 4, 3}),
                      {Attr("strides", {3}), Attr("pads", {1, 2}), Attr("output_padding", {1})},
                      randn({4})),
       {randn({2, 3, 7})}});
  c.push_back({"ConvTranspose 1-d, group, output_shape",
               conv_transpose({2, 4, 6}, randn({4, 2, 4}),
                              {Attr("group", 2), Attr("strides", {2}), Attr("output_shape", {11})}),
               {randn({2, 4, 6})}});
}

}  // namespace

void add_resize_cases(std::vector<Case>& c) {
  add_nearest(c);
  add_linear(c);
  add_cubic(c);
  add_opset18(c);
  add_conv_transpose(c);
}

}  // namespace zc::test::onnx_model

#endif
