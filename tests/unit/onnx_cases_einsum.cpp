// ONNX cases of Einsum and TopK (onnx_cases.h). Einsum: products, batched products, transposes,
// diagonals and traces, sums, outer products, three operands, ellipses broadcasting, implicit
// outputs, size-1 dims, integers; where ONNX Runtime refuses what numpy allows (ellipses of
// different ranks, an ellipsis summed away), against the same einsum with the ellipsis written
// out. TopK: every axis, largest and smallest, k of 1 and of the whole dim, ties among
// integers and floats, the integer extremes, sorted = 0.
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include <limits>

#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// One Einsum node of inputs "x0".. of `shapes` to "out".
Builder einsum(const std::string& eq, const std::vector<Shape>& shapes, DType t = DType::f32) {
  Builder b;
  std::vector<std::string> in;
  for (size_t i = 0; i < shapes.size(); ++i) {
    in.push_back("x" + std::to_string(i));
    b.input(in.back(), t, shapes[i]);
  }
  b.output("out", t);
  b.node("Einsum", in, {"out"}, {Attr("equation", eq.c_str())});
  return b;
}

std::vector<Tensor> data(const std::vector<Shape>& shapes, DType t = DType::f32) {
  std::vector<Tensor> out;
  for (const Shape& s : shapes) out.push_back(t == DType::f32 ? randn(s) : randint(-9, 9, s, t));
  return out;
}

void einsum_case(std::vector<Case>& c, const std::string& eq, const std::vector<Shape>& shapes,
                 DType t = DType::f32) {
  c.push_back({"Einsum '" + eq + "' " + std::string(dtype_name(t)), einsum(eq, shapes, t),
               data(shapes, t)});
}

// One TopK node of "x" and k from the file, outputs "out" and "idx" (i64).
Builder topk(const Shape& x, int64_t k, std::vector<Attr> attrs, DType t = DType::f32) {
  Builder b;
  b.input("x", t, x).output("out", t).output("idx", DType::i64);
  b.init("k", i64s({k}));
  b.node("TopK", {"x", "k"}, {"out", "idx"}, std::move(attrs));
  return b;
}

}  // namespace

void add_einsum_cases(std::vector<Case>& c) {
  einsum_case(c, "ij,jk->ik", {{3, 4}, {4, 5}});
  einsum_case(c, "bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}});
  einsum_case(c, "bhqk,bhkd->bhqd", {{2, 3, 4, 6}, {2, 3, 6, 5}});
  einsum_case(c, "ij->ji", {{3, 4}});
  einsum_case(c, "ijk->kij", {{2, 3, 4}});
  einsum_case(c, "ii->i", {{4, 4}});
  einsum_case(c, "ii", {{4, 4}});
  einsum_case(c, "iij->ji", {{3, 3, 2}});
  einsum_case(c, "iii->i", {{3, 3, 3}});
  einsum_case(c, "ii,ij->j", {{3, 3}, {3, 4}});
  einsum_case(c, "ij->", {{3, 4}});
  einsum_case(c, "ij->j", {{3, 4}});
  einsum_case(c, "i,j->ij", {{3}, {4}});
  einsum_case(c, "i,j,k->ijk", {{2}, {3}, {4}});
  einsum_case(c, "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}});
  einsum_case(c, "ij,jk,ki->", {{2, 3}, {3, 4}, {4, 2}});
  einsum_case(c, "bi,bj,bk->bijk", {{2, 3}, {2, 4}, {2, 2}});
  einsum_case(c, "ijk,jl->", {{2, 3, 4}, {3, 5}});
  einsum_case(c, "...ij,...jk->...ik", {{2, 1, 3, 4}, {1, 5, 4, 2}});
  einsum_case(c, "...ij,...jk", {{2, 3, 4}, {2, 4, 5}});
  einsum_case(c, "i...j,j...->i...", {{2, 3, 4}, {4, 3}});
  einsum_case(c, "ij,jk", {{3, 4}, {4, 5}});  // implicit: ik
  einsum_case(c, "ba", {{3, 4}});             // implicit: ab, a transpose
  einsum_case(c, "ij,ij->ij", {{1, 3}, {2, 3}});
  einsum_case(c, "ij,jk->ik", {{2, 1}, {3, 4}});
  einsum_case(c, "bij,bjk->bik", {{1, 2, 3}, {4, 3, 2}});
  einsum_case(c, " ij , jk -> ik ", {{3, 4}, {4, 5}});
  einsum_case(c, "aB,Bc->ca", {{2, 3}, {3, 4}});
  einsum_case(c, "ij,jk->ik", {{3, 4}, {4, 5}}, DType::i64);
  einsum_case(c, "bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}, DType::i32);
  einsum_case(c, "ii->", {{4, 4}}, DType::i64);
  einsum_case(c, "ij->j", {{3, 4}}, DType::i32);
  {
    // numpy's ellipses ONNX Runtime refuses: of different ranks, and summed away.
    Case k{"Einsum '...i,...i->...' of ranks 3 and 1", einsum("...i,...i->...", {{2, 3, 4}, {4}}),
           data({{2, 3, 4}, {4}})};
    k.reference = einsum("abi,i->ab", {{2, 3, 4}, {4}});
    c.push_back(k);
    Case s{"Einsum '...i->i'", einsum("...i->i", {{2, 3, 4}}), data({{2, 3, 4}})};
    s.reference = einsum("abi->i", {{2, 3, 4}});
    c.push_back(s);
  }

  // TopK.
  const Shape s{3, 4, 5};
  for (int64_t axis : {0, 1, -1}) {
    for (int64_t largest : {0, 1}) {
      c.push_back({"TopK axis " + std::to_string(axis) + ", largest " + std::to_string(largest),
                   topk(s, 2, {Attr("axis", axis), Attr("largest", largest)}),
                   {randn(s)}});
    }
  }
  c.push_back({"TopK k 1 (default attributes)", topk(s, 1, {}), {randn(s)}});
  c.push_back({"TopK k the whole dim", topk(s, 5, {}), {randn(s)}});
  c.push_back({"TopK k 0", topk(s, 0, {Attr("axis", 1)}), {randn(s)}});
  for (int64_t largest : {0, 1}) {
    const std::string l = ", largest " + std::to_string(largest);
    c.push_back({"TopK i64 ties" + l,
                 topk({4, 8}, 6, {Attr("largest", largest)}, DType::i64),
                 {randint(0, 3, {4, 8})}});
    c.push_back({"TopK i64 ties, k the whole dim, axis 0" + l,
                 topk({4, 8}, 4, {Attr("largest", largest), Attr("axis", 0)}, DType::i64),
                 {randint(-2, 2, {4, 8})}});
    c.push_back({"TopK f32 ties" + l,
                 topk({3, 7}, 7, {Attr("largest", largest)}),
                 {cast(randint(0, 3, {3, 7}), DType::f32)}});
    // The extremes of i64 and repeats of them: the masked elements' fill must not hide them.
    const int64_t lo = std::numeric_limits<int64_t>::min(),
                  hi = std::numeric_limits<int64_t>::max();
    c.push_back({"TopK i64 extremes" + l,
                 topk({2, 5}, 5, {Attr("largest", largest)}, DType::i64),
                 {i64s({lo, 3, lo, hi, 0, hi, hi, lo, -1, hi}).reshape({2, 5})}});
    // NaN's rank is left open by ONNX and differs between ONNX Runtime versions: zc's is
    // tested against torch's in onnx_extra_test.cpp (TopKRanksNaNAboveEveryNumberAsTorch).
  }
  {
    // sorted = 0 leaves the order open: against the sorted output.
    Case u{"TopK sorted 0", topk(s, 3, {Attr("sorted", 0), Attr("axis", 1)}), {randn(s)}};
    u.reference = topk(s, 3, {Attr("axis", 1)});
    c.push_back(u);
  }
}

}  // namespace zc::test::onnx_model

#endif  // ZC_WITH_ONNX
