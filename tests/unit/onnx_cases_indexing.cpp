// ONNX cases of the indexing operators: GatherElements, GatherND, ScatterND, ScatterElements,
// CumSum (onnx_cases.h). Indices come both as initializers (known when the rule runs) and as
// inputs (traced into compiled code), negative ones among them; the scatters take theirs from
// the file, as exporters write them.
#include "zc/zc.h"

#ifdef ZC_WITH_ONNX
#include "unit/onnx_cases.h"

namespace zc::test::onnx_model {

namespace {

// A node of data "x" (f32 or `xt`) and indices "i" given as an input of the model.
Builder with_index_input(const std::string& op, const Shape& x, const Shape& i,
                         std::vector<Attr> attrs, DType xt = DType::f32) {
  Builder b;
  b.input("x", xt, x).input("i", DType::i64, i).output("out", xt);
  b.node(op, {"x", "i"}, {"out"}, std::move(attrs));
  return b;
}

Tensor data_of(const Shape& s, DType t) {
  return t == DType::f32 ? randn(s) : randint(-50, 50, s, t);
}

}  // namespace

void add_indexing_cases(std::vector<Case>& c) {
  // GatherElements: every axis, negative indices, indices smaller than the data.
  for (int64_t axis : {0, 1, -1}) {
    const Shape x{3, 4, 5};
    Shape i{2, 3, 4};
    const int64_t n = x[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
    i[static_cast<size_t>(axis < 0 ? axis + 3 : axis)] = 6;  // more than the dim: repeats
    c.push_back({"GatherElements axis " + std::to_string(axis) + ", indices an input",
                 with_index_input("GatherElements", x, i, {Attr("axis", axis)}),
                 {randn(x), randint(-n, n, i)}});
    c.push_back({"GatherElements axis " + std::to_string(axis) + ", indices a constant",
                 one("GatherElements", x, {Attr("axis", axis)}, {{"i", randint(-n, n, i)}}),
                 {randn(x)}});
  }
  c.push_back({"GatherElements i64 data, rank 1",
               with_index_input("GatherElements", {7}, {9}, {}, DType::i64),
               {randint(-9, 9, {7}), randint(-7, 7, {9})}});
  c.push_back({"GatherElements one row",
               with_index_input("GatherElements", {1, 8}, {1, 3}, {Attr("axis", 1)}),
               {randn({1, 8}), randint(0, 8, {1, 3})}});

  // GatherND: tuples of 1 to rank, batch dims, indices of rank 1.
  struct Nd {
    Shape x, i;
    int64_t batch_dims;
  };
  for (const Nd& nd : std::vector<Nd>{{{4, 5, 6}, {3, 1}, 0},
                                      {{4, 5, 6}, {2, 3, 2}, 0},
                                      {{4, 5, 6}, {7, 3}, 0},
                                      {{4, 5, 6}, {2}, 0},
                                      {{4, 5, 6}, {4, 3, 1}, 1},
                                      {{4, 5, 6}, {4, 2}, 1},
                                      {{2, 3, 4, 5}, {2, 3, 2, 1}, 2}}) {
    std::vector<Tensor> cols;
    const int64_t k = nd.i.back();
    for (int64_t j = 0; j < k; ++j) {
      const int64_t n = nd.x[static_cast<size_t>(nd.batch_dims + j)];
      Shape one_col = nd.i;
      one_col.back() = 1;
      cols.push_back(randint(-n, n, one_col));
    }
    const Tensor idx = cat(cols, -1);
    const std::string what = "GatherND " + shape_str(nd.x) + " by " + shape_str(nd.i) +
                             ", batch_dims " + std::to_string(nd.batch_dims);
    c.push_back({what + ", indices an input",
                 with_index_input("GatherND", nd.x, nd.i, {Attr("batch_dims", nd.batch_dims)}),
                 {randn(nd.x), idx}});
    c.push_back({what + ", indices a constant",
                 one("GatherND", nd.x, {Attr("batch_dims", nd.batch_dims)}, {{"i", idx}}),
                 {randn(nd.x)}});
  }

  // ScatterND: rows, elements, repeated positions under each reduction (opset 18 for max/min).
  for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
    for (DType t : {DType::f32, DType::i64}) {
      const Shape x{5, 4, 3};
      Builder b(18);
      b.input("x", t, x).input("u", t, {2, 2, 4, 3}).output("out", t);
      b.init("i", i64s({4, 0, -1, 2}).reshape({2, 2, 1}));  // rows 4 and 4 (-1): repeated
      b.node("ScatterND", {"x", "i", "u"}, {"out"}, {Attr("reduction", reduction)});
      if (std::string(reduction) == "none") {  // repeated positions: ONNX leaves the winner open
        b = Builder(18);
        b.input("x", t, x).input("u", t, {2, 2, 4, 3}).output("out", t);
        b.init("i", i64s({4, 0, -2, 2}).reshape({2, 2, 1}));
        b.node("ScatterND", {"x", "i", "u"}, {"out"}, {Attr("reduction", reduction)});
      }
      c.push_back(
          {std::string("ScatterND rows, reduction ") + reduction + " " + std::string(dtype_name(t)),
           b,
           {data_of(x, t), data_of({2, 2, 4, 3}, t)}});
    }
  }
  {
    // Elements of a 2-D table, indices from the end, updates an input.
    Builder b;
    b.input("x", DType::f32, {3, 4}).input("u", DType::f32, {5}).output("out");
    b.init("i", i64s({0, 0, 2, 3, -1, 0, 1, -3, 0, 3}).reshape({5, 2}));
    b.node("ScatterND", {"x", "i", "u"}, {"out"});
    c.push_back({"ScatterND elements", b, {randn({3, 4}), randn({5})}});
  }

  // ScatterElements: every axis, smaller indices, each reduction (opset 18).
  for (int64_t axis : {0, 1, -1}) {
    for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
      const Shape x{3, 4, 5};
      Shape i{2, 3, 4};
      const auto ax = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
      const int64_t n = x[ax];
      Tensor idx;
      if (std::string(reduction) == "none") {
        // Distinct positions along the axis in every line (the winner of a repeat is open).
        i[ax] = n - 1;
        Shape line = i;
        line[ax] = 1;
        std::vector<Tensor> parts;
        for (int64_t k = 0; k < n - 1; ++k)
          parts.push_back(full(line, static_cast<double>(-1 - k), DType::i64));
        idx = cat(parts, static_cast<int64_t>(ax));
      } else {
        idx = randint(-n, n, i);
      }
      Builder b(18);
      b.input("x", DType::f32, x).input("u", DType::f32, i).output("out");
      b.init("i", idx);
      b.node("ScatterElements", {"x", "i", "u"}, {"out"},
             {Attr("axis", axis), Attr("reduction", reduction)});
      c.push_back({"ScatterElements axis " + std::to_string(axis) + ", reduction " + reduction,
                   b,
                   {randn(x), randn(i)}});
    }
  }

  // CumSum: each axis, exclusive and reverse, integers, an axis of one and of odd length.
  for (int64_t axis : {0, 1, -1}) {
    for (int64_t exclusive : {0, 1}) {
      for (int64_t reverse : {0, 1}) {
        const Shape x{5, 7, 1};
        Builder b;
        b.input("x", DType::f32, x).output("out");
        b.init("axis", i64_scalar(axis));
        b.node("CumSum", {"x", "axis"}, {"out"},
               {Attr("exclusive", exclusive), Attr("reverse", reverse)});
        c.push_back({"CumSum axis " + std::to_string(axis) + " exclusive " +
                         std::to_string(exclusive) + " reverse " + std::to_string(reverse),
                     b,
                     {randn(x)}});
      }
    }
  }
  for (DType t : {DType::i32, DType::i64}) {
    Builder b;
    b.input("x", t, {2, 9}).output("out", t);
    b.init("axis", i64s({1}));
    b.node("CumSum", {"x", "axis"}, {"out"});
    c.push_back({"CumSum " + std::string(dtype_name(t)), b, {randint(-100, 100, {2, 9}, t)}});
  }
}

}  // namespace zc::test::onnx_model

#endif
