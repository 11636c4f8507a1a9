// Reductions, layout, matmul, normalization, embedding, cat, attention and whole models on
// CUDA against the CPU. The harness, input kinds and tolerances are in cuda_ops_harness.h.
#include "unit/attention_cases.h"
#include "unit/cuda_ops_harness.h"

namespace cuda_ops_test {
namespace {

// ---------------------------------------------------------------------------------------------
// Reductions.

struct ReduceOp {
  std::string name;
  Acc acc;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> fn;
  bool one_dim = false;  // argmax takes no dim (the flattened tensor) or exactly one
};

std::vector<ReduceOp> reduce_ops() {
  using Dims = std::vector<int64_t>;
  return {
      {"sum", Acc::accumulate,
       [](const Tensor& x, const Dims& d, bool k) { return zc::sum(x, d, k); }},
      {"mean", Acc::accumulate,
       [](const Tensor& x, const Dims& d, bool k) { return zc::mean(x, d, k); }},
      {"amax", Acc::exact,
       [](const Tensor& x, const Dims& d, bool k) { return zc::amax(x, d, k); }},
      {"amin", Acc::exact,
       [](const Tensor& x, const Dims& d, bool k) { return zc::amin(x, d, k); }},
      {"var correction=0", Acc::accumulate,
       [](const Tensor& x, const Dims& d, bool k) { return zc::var(x, d, 0, k); }},
      {"var correction=1", Acc::accumulate,
       [](const Tensor& x, const Dims& d, bool k) { return zc::var(x, d, 1, k); }},
      {"argmax", Acc::exact,
       [](const Tensor& x, const Dims& d, bool k) {
         return zc::argmax(x, d.empty() ? std::nullopt : std::optional<int64_t>(d[0]), k);
       },
       true},
  };
}

const ReduceOp& reduce_op(const std::string& name) {
  static const std::vector<ReduceOp> ops = reduce_ops();
  for (const ReduceOp& op : ops) {
    if (op.name == name) return op;
  }
  throw std::logic_error("no reduction " + name);
}

std::vector<Case> reduce_cases(const ReduceOp& op, const std::vector<Input>& inputs,
                               const std::vector<std::vector<int64_t>>& dim_sets,
                               const std::vector<bool>& keeps) {
  std::vector<Case> r;
  for (const auto& dims : dim_sets) {
    if (op.one_dim && dims.size() > 1) continue;
    for (bool keep : keeps) {
      const std::string name = op.name + " dims=" + show(dims) + " keepdim=" + std::to_string(keep);
      auto f = op.fn;
      for (const Input& in : inputs) {
        r.push_back(Case(name, {in},
                         unary_fn([f, dims, keep](const Tensor& x) { return f(x, dims, keep); }),
                         op.acc));
      }
    }
  }
  return r;
}

TEST_F(CudaOps, Reductions) {
  Harness h("reductions");
  zc::manual_seed(401);
  const Shape s3{3, 4, 5};
  // f32: every single dim (also negative), several (also unsorted and negative), all, keepdim
  // both ways, in every layout. Values with ties, so argmax must pick the first maximum.
  const std::vector<std::vector<int64_t>> every_dims{{},   {0},    {1},     {2},
                                                     {-1}, {0, 2}, {-1, 0}, {0, 1, 2}};
  const std::vector<Input> f32_inputs = every_kind(ties(s3, DType::f32), DType::f32);
  for (const ReduceOp& op : reduce_ops())
    h.run(reduce_cases(op, f32_inputs, every_dims, {false, true}));
  // Every other dtype: all dims, one dim kept, two dims.
  for (DType dt : all_dtypes()) {
    if (dt == DType::f32) continue;
    const std::vector<Input> in = every_kind(ties(s3, dt), dt);
    for (const ReduceOp& op : reduce_ops()) {
      h.run(reduce_cases(op, in, {{}}, {false}));
      h.run(reduce_cases(op, in, {{1}}, {true}));
      h.run(reduce_cases(op, in, {{0, 2}}, {false}));
    }
  }
  // Size-1 dims and 0-dim tensors.
  for (DType dt : {DType::f32, DType::i64}) {
    const std::vector<Input> ones = every_kind(ties({1, 4, 1}, dt), dt);
    const std::vector<Input> scalar{contiguous(Arr{{}, {1.5}}, dt)};
    for (const ReduceOp& op : reduce_ops()) {
      h.run(reduce_cases(op, ones, {{0}, {0, 2}, {1}, {}}, {false}));
      h.run(reduce_cases(op, scalar, {{}}, {false, true}));
    }
  }
  // The public shorthands over amax/amin.
  for (const Input& in : f32_inputs) {
    h.run("max", {in}, unary_fn([](const Tensor& x) { return zc::max(x); }), Acc::exact);
    h.run("min dim=1", {in}, unary_fn([](const Tensor& x) { return zc::min(x, 1, true); }),
          Acc::exact);
  }
}

TEST_F(CudaOps, ReductionsNaNAndLarge) {
  Harness h("reductions with NaN, and large");
  zc::manual_seed(402);
  // NaN propagates through every reduction; argmax picks it.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dt : {DType::f32, DType::bf16}) {
    Arr x = ties({3, 4, 5}, dt);
    x.v[7] = nan;                                   // [0,1,2]
    x.v[2 * 20 + 3 * 5 + 0] = nan;                  // [2,3,0]
    for (int k = 0; k < 5; ++k) x.v[25 + k] = nan;  // the row [1,1,:]
    const std::vector<Input> in = every_kind(x, dt);
    for (const ReduceOp& op : reduce_ops()) h.run(reduce_cases(op, in, {{}, {2}, {0}}, {false}));
  }
  // Large: [256, 4096] = 1 << 20 elements; rows of 4096, columns of 256, everything; packed and
  // through two views. Planted maxima: a later tie must lose.
  Tensor big = zc::rand({256, 4096}) * 2.0 - 1.0;
  float* p = big.data<float>();
  p[3 * 4096 + 4000] = 5;
  p[3 * 4096 + 4095] = 5;
  p[200 * 4096 + 17] = 7;
  p[250 * 4096 + 9] = 7;
  Tensor tb = zc::rand({4096, 256}) * 2.0 - 1.0, tallb = zc::rand({513, 4096}) * 2.0 - 1.0;
  const std::vector<Input> in{
      large("contiguous", big), large("transpose", tb, [](const Tensor& t) { return t.t(); }),
      large("slice_step2", tallb, [](const Tensor& t) { return t.slice(0, 1, t.size(0), 2); })};
  for (const ReduceOp& op : reduce_ops()) {
    h.run(reduce_cases(op, in, {{1}, {0}, {}}, {false}));
    h.run(reduce_cases(op, {in[0]}, {{1}}, {true}));
  }
  // Long sums in 16-bit types and in integers; positive values, so nothing cancels.
  Tensor halves = zc::rand({256, 4096});
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::vector<Input> hin{large("contiguous", halves.to(dt))};
    for (const ReduceOp& op : reduce_ops()) h.run(reduce_cases(op, hin, {{1}}, {false}));
  }
  const std::vector<Input> iin{large("contiguous", zc::randint(-1000, 1000, {256, 4096}))};
  h.run(reduce_cases(reduce_op("sum"), iin, {{1}, {}}, {false}));
  h.run(reduce_cases(reduce_op("argmax"), iin, {{1}}, {false}));
}

// ---------------------------------------------------------------------------------------------
// Layout: views keep the CPU's strides and aliasing; copies are dense; results' own views and
// further ops.

TEST_F(CudaOps, Layout) {
  Harness h("layout");
  zc::manual_seed(501);
  // Views and copies of [3,4,5] in every layout and dtype: exact, with the CPU's strides.
  auto view = [&](const std::string& name, std::function<Tensor(const Tensor&)> f) {
    for (DType dt : all_dtypes()) {
      for (Input& in : every_kind(ties({3, 4, 5}, dt), dt)) {
        h.run_view(name, {std::move(in)}, unary_fn(f));
      }
    }
  };
  view("reshape [12,5]", [](const Tensor& x) { return x.reshape({12, 5}); });
  view("reshape [5,12]", [](const Tensor& x) { return x.reshape({5, 12}); });
  view("reshape [60]", [](const Tensor& x) { return x.reshape({60}); });
  view("reshape [3,20,1]", [](const Tensor& x) { return x.reshape({3, 20, 1}); });
  view("view [3,20]", [](const Tensor& x) { return x.view({3, 20}); });
  view("flatten", [](const Tensor& x) { return x.flatten(); });
  view("flatten 1", [](const Tensor& x) { return x.flatten(1); });
  view("permute [2,0,1]", [](const Tensor& x) { return x.permute({2, 0, 1}); });
  view("transpose 0,2", [](const Tensor& x) { return x.transpose(0, 2); });
  view("transpose 1,2", [](const Tensor& x) { return x.transpose(1, 2); });
  view("select 0 then t", [](const Tensor& x) { return x.select(0, 1).t(); });
  view("expand new dim", [](const Tensor& x) { return x.unsqueeze(0).expand({2, 3, 4, 5}); });
  view("expand size-1 dim", [](const Tensor& x) { return x.narrow(1, 2, 1).expand({3, 6, 5}); });
  view("expand -1", [](const Tensor& x) { return x.narrow(0, 1, 1).expand({4, -1, -1}); });
  view("slice dim 2 step 2", [](const Tensor& x) { return x.slice(2, 1, 5, 2); });
  view("slice dim 0 step 3", [](const Tensor& x) { return x.slice(0, 0, 3, 3); });
  view("slice dims 1,2 steps 2,3",
       [](const Tensor& x) { return x.slice(1, 0, 4, 2).slice(2, 0, 5, 3); });
  view("narrow", [](const Tensor& x) { return x.narrow(1, 1, 2); });
  view("select 2", [](const Tensor& x) { return x.select(2, 3); });
  view("unsqueeze squeeze", [](const Tensor& x) { return x.unsqueeze(1).squeeze(1); });
  view("squeeze all", [](const Tensor& x) { return x.narrow(0, 1, 1).squeeze(); });
  view("split 2 dim 1, chunk 1", [](const Tensor& x) { return zc::split(x, 2, 1)[1]; });
  view("contiguous", [](const Tensor& x) { return x.contiguous(); });
  view("clone", [](const Tensor& x) { return x.clone(); });
  view("transpose contiguous", [](const Tensor& x) { return x.transpose(0, 2).contiguous(); });
  view("clone view slice", [](const Tensor& x) { return x.clone().view({60}).slice(0, 7, 60, 3); });

  // Ops on views of device results, and views of their results.
  auto chain = [&](const std::string& name, Acc acc, std::function<Tensor(const Tensor&)> f) {
    for (DType dt : {DType::f32, DType::f16}) {
      for (Input& in : every_kind(zc::ref::uniform({3, 4, 5}, -2, 2), dt)) {
        h.run_view(name, {std::move(in)}, unary_fn(f), acc);
      }
    }
  };
  chain("exp(x).slice(1,1,4,2)", Acc::pointwise,
        [](const Tensor& x) { return zc::exp(x).slice(1, 1, 4, 2); });
  chain("exp(x).slice(1,1,4,2) + 1", Acc::pointwise,
        [](const Tensor& x) { return zc::exp(x).slice(1, 1, 4, 2) + 1.0; });
  chain("relu(x.transpose(0,2).reshape([20,3]))", Acc::pointwise, [](const Tensor& x) {
    return zc::relu(x.transpose(0, 2).reshape({20, 3}));
  });
  chain("x.permute([2,0,1]).contiguous() + x.permute([2,0,1])", Acc::pointwise,
        [](const Tensor& x) {
          return x.permute({2, 0, 1}).contiguous() + x.permute({2, 0, 1});
        });
  chain("tanh(exp(x).transpose(0,1))", Acc::pointwise,
        [](const Tensor& x) { return zc::tanh(zc::exp(x).transpose(0, 1)); });
  chain("(x * 2).permute([1,2,0])", Acc::pointwise, [](const Tensor& x) {
    return (x * 2.0).permute({1, 2, 0});
  });
  chain("x.narrow(1,0,1).expand([3,4,5]) * x", Acc::pointwise, [](const Tensor& x) {
    return x.narrow(1, 0, 1).expand({3, 4, 5}) * x;
  });
  chain("cat of views", Acc::exact, [](const Tensor& x) {
    return zc::cat({x.slice(1, 0, 4, 2), x.narrow(1, 3, 1)}, 1);
  });
  chain("sum(x.transpose(0,1), [0])", Acc::accumulate,
        [](const Tensor& x) { return zc::sum(x.transpose(0, 1), {0}); });
  chain("sum(exp(x).slice(0,0,3,2), [1])", Acc::accumulate,
        [](const Tensor& x) { return zc::sum(zc::exp(x).slice(0, 0, 3, 2), {1}); });
  chain("matmul(x.reshape([12,5]), x.reshape([12,5]).t())", Acc::accumulate, [](const Tensor& x) {
    return zc::matmul(x.reshape({12, 5}), x.reshape({12, 5}).t());
  });
  chain("softmax(x.transpose(0,2), 1).select(0,2)", Acc::accumulate,
        [](const Tensor& x) { return zc::softmax(x.transpose(0, 2), 1).select(0, 2); });

  // Large: a transpose made contiguous, an expand cloned.
  auto t = [](const Tensor& b) { return b.t(); };
  auto e = [](const Tensor& b) { return b.expand({1024, 1024}); };
  h.run_view("contiguous", {large("transpose", zc::rand({1024, 1024}), t)},
             unary_fn([](const Tensor& x) { return x.contiguous(); }));
  h.run_view("clone", {large("expand", zc::rand({1, 1024}), e)},
             unary_fn([](const Tensor& x) { return x.clone(); }));
}

// ---------------------------------------------------------------------------------------------
// Composites.

// |a| @ |b| in f64: the scale of a matmul's rounding error.
Tensor abs_matmul(const Tensor& a, const Tensor& b) {
  return zc::matmul(zc::abs(a.to(DType::f64)), zc::abs(b.to(DType::f64)));
}

TEST_F(CudaOps, MatmulAndLinear) {
  Harness h("matmul and linear");
  zc::manual_seed(601);
  const Fn mm = [](const std::vector<Tensor>& v) { return zc::matmul(v[0], v[1]); };
  const Fn mm_scale = [](const std::vector<Tensor>& v) { return abs_matmul(v[0], v[1]); };
  struct Form {
    Shape a, b;
  };
  const std::vector<Form> forms{
      {{17}, {17}},                   // vector . vector: 0-dim
      {{1}, {1}},                     //
      {{16, 17}, {17}},               // matrix . vector
      {{17}, {17, 16}},               // vector . matrix
      {{1, 1}, {1, 1}},               // sizes 1, 16, 17
      {{16, 16}, {16, 16}},           //
      {{17, 17}, {17, 17}},           //
      {{17, 1}, {1, 16}},             // an outer product
      {{1, 17}, {17, 1}},             //
      {{2, 1, 17, 16}, {3, 16, 17}},  // batch dims broadcast: [2,3,17,17]
      {{4, 17, 16}, {16, 17}},        // a batch against a matrix
      {{16}, {2, 16, 17}},            // a vector against a batch
      {{2, 3, 17, 16}, {16}},         //
  };
  for (const Form& f : forms) {
    for (DType dt : float_dtypes()) {
      Arr a = zc::ref::uniform(f.a, -1, 1), b = zc::ref::uniform(f.b, -1, 1);
      for (auto& [ia, ib] : kind_pairs(a, b, dt, dt)) {
        h.run("matmul", {ia, ib}, mm, Acc::accumulate, mm_scale);
      }
    }
  }
  // 300 x 300 x 300, packed and as transposed views (a^T b, a b^T, a^T b^T); and 300 against
  // the odd sizes.
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    Arr a = zc::ref::uniform({300, 300}, -1, 1), b = zc::ref::uniform({300, 300}, -1, 1);
    const std::vector<std::string> ks{"contiguous", "transpose"};
    for (const std::string& ka : ks) {
      for (const std::string& kb : ks) {
        h.run("matmul", {of_kind(ka, a, dt), of_kind(kb, b, dt)}, mm, Acc::accumulate, mm_scale);
      }
    }
    h.run("matmul",
          {of_kind("transpose", zc::ref::uniform({17, 300}, -1, 1), dt),
           of_kind("slice_step2", zc::ref::uniform({300, 16}, -1, 1), dt)},
          mm, Acc::accumulate, mm_scale);
  }
  // Integer matmul: whatever the CPU does (exact, or a zc::Error), the GPU does.
  for (DType dt : {DType::i64, DType::i32}) {
    h.run("matmul",
          {contiguous(zc::ref::small_ints({16, 17}, -5, 5), dt),
           of_kind("transpose", zc::ref::small_ints({17, 16}, -5, 5), dt)},
          mm, Acc::exact);
  }
  // A batched matmul whose batch is an expanded (stride 0) view.
  h.run("matmul",
        {expanded(zc::ref::uniform({1, 16, 17}, -1, 1), {3, 16, 17}, DType::f32),
         of_kind("permute", zc::ref::uniform({3, 17, 16}, -1, 1), DType::f32)},
        mm, Acc::accumulate, mm_scale);

  // linear: x @ w^T + b, the weight as the transpose of a packed [in, out] tensor.
  const Fn lin = [](const std::vector<Tensor>& v) {
    return zc::linear(v[0], v[1], v.size() > 2 ? v[2] : Tensor());
  };
  const Fn lin_scale = [](const std::vector<Tensor>& v) {
    Tensor s = abs_matmul(v[0], v[1].t());
    return v.size() > 2 ? s + zc::abs(v[2].to(DType::f64)) : s;
  };
  for (const Shape& xs : {Shape{2, 5, 16}, Shape{17, 16}, Shape{16}}) {
    for (DType dt : float_dtypes()) {
      if (xs.size() != 3 && dt != DType::f32) continue;
      Arr x = zc::ref::uniform(xs, -1, 1), w = zc::ref::uniform({8, 16}, -1, 1);
      Arr b = zc::ref::uniform({8}, -1, 1);
      for (Input& xi : every_kind(x, dt)) {
        h.run("linear", {xi, of_kind("transpose", w, dt), contiguous(b, dt)}, lin, Acc::accumulate,
              lin_scale);
        h.run("linear without bias", {xi, of_kind("slice_step2", w, dt)}, lin, Acc::accumulate,
              lin_scale);
      }
    }
  }
  // Large enough for cuBLASLt: f16/bf16 products read the half operands on the tensor cores
  // (no f32 copies) and accumulate in f32, as the CPU does.
  for (DType dt : {DType::f16, DType::bf16}) {
    Arr x = zc::ref::uniform({4, 64, 256}, -1, 1), w = zc::ref::uniform({512, 256}, -1, 1);
    Arr b = zc::ref::uniform({512}, -1, 1);
    h.run("linear", {contiguous(x, dt), contiguous(w, dt), contiguous(b, dt)}, lin, Acc::accumulate,
          lin_scale);
    h.run("linear",
          {of_kind("transpose", zc::ref::uniform({256, 256}, -1, 1), dt),
           of_kind("transpose", w, dt), contiguous(b, dt)},
          lin, Acc::accumulate, lin_scale);
  }
}

TEST_F(CudaOps, SoftmaxAndLayerNorm) {
  Harness h("softmax, log_softmax, layer_norm");
  zc::manual_seed(701);
  const Shape s3{3, 4, 5};
  for (DType dt : all_dtypes()) {
    const bool floating = zc::is_floating(dt);
    const std::vector<Input> in = every_kind(draw(s3, -3, 3, dt), dt);
    for (int64_t d : {0, 1, 2, -1}) {
      if (!floating && d != 1) continue;  // integers: whatever the CPU does, on one dim
      for (const Input& x : in) {
        h.run("softmax dim=" + std::to_string(d), {x},
              unary_fn([d](const Tensor& t) { return zc::softmax(t, d); }), Acc::accumulate);
        h.run("log_softmax dim=" + std::to_string(d), {x},
              unary_fn([d](const Tensor& t) { return zc::log_softmax(t, d); }), Acc::accumulate);
      }
    }
  }
  // Large logits, masked (-inf) entries, a fully masked row (NaN on the CPU); and large rows
  // and columns.
  const double inf = std::numeric_limits<double>::infinity();
  Arr masked{{3, 4}, {1000, 1000, -1000, 0, -inf, 0, 1, -inf, -inf, -inf, -inf, -inf}};
  for (int64_t d : {0, 1}) {
    h.run("softmax dim=" + std::to_string(d), {contiguous(masked, DType::f32)},
          unary_fn([d](const Tensor& t) { return zc::softmax(t, d); }), Acc::accumulate);
    h.run("log_softmax dim=" + std::to_string(d), {contiguous(masked, DType::f32)},
          unary_fn([d](const Tensor& t) { return zc::log_softmax(t, d); }), Acc::accumulate);
  }
  // Softmax along rows of 4096 and along columns of 256, packed and transposed.
  Tensor rows = zc::rand({256, 4096}) * 10.0 - 5.0;
  for (int64_t d : {1, 0}) {
    h.run("softmax dim=" + std::to_string(d), {large("contiguous", rows)},
          unary_fn([d](const Tensor& t) { return zc::softmax(t, d); }), Acc::accumulate);
    h.run("log_softmax dim=" + std::to_string(1 - d),
          {large("transpose", rows, [](const Tensor& t) { return t.t(); })},
          unary_fn([d](const Tensor& t) { return zc::log_softmax(t, 1 - d); }), Acc::accumulate);
  }

  // layer_norm over the last dim with and without weight and bias, and over the last two.
  // Values 3 + U(-2, 2): the mean must really be subtracted.
  auto ln = [](const Shape& norm, double eps) {
    return [norm, eps](const std::vector<Tensor>& v) {
      return zc::layer_norm(v[0], norm, v.size() > 1 && v[1].defined() ? v[1] : Tensor(),
                            v.size() > 2 ? v[2] : Tensor(), eps);
    };
  };
  for (DType dt : float_dtypes()) {
    Arr x = zc::ref::map(zc::ref::uniform(s3, -2, 2), [](double v) { return 3 + v; });
    Arr w = zc::ref::uniform({5}, 0.5, 1.5), b = zc::ref::uniform({5}, -1, 1);
    for (Input& xi : every_kind(x, dt)) {
      h.run("layer_norm [5]", {xi}, ln({5}, 1e-5), Acc::accumulate);
      h.run("layer_norm [5] weight", {xi, of_kind("strided", w, dt)}, ln({5}, 1e-5),
            Acc::accumulate);
      h.run("layer_norm [5] weight bias", {xi, contiguous(w, dt), of_kind("slice_step2", b, dt)},
            ln({5}, 1e-5), Acc::accumulate);
    }
    // Bias without weight: the weight slot is an undefined tensor.
    const Fn bias_only = [](const std::vector<Tensor>& v) {
      return zc::layer_norm(v[0], {5}, Tensor(), v[1]);
    };
    h.run("layer_norm [5] bias", {of_kind("permute", x, dt), contiguous(b, dt)}, bias_only,
          Acc::accumulate);
    Arr w2 = zc::ref::uniform({4, 5}, 0.5, 1.5), b2 = zc::ref::uniform({4, 5}, -1, 1);
    h.run("layer_norm [4,5] weight bias eps=1e-3",
          {of_kind("transpose", x, dt), of_kind("column_major", w2, dt), contiguous(b2, dt)},
          ln({4, 5}, 1e-3), Acc::accumulate);
  }
  Tensor lx = zc::rand({256, 4096}) * 4.0 + 1.0;
  h.run("layer_norm [4096] weight bias",
        {large("contiguous", lx), large("contiguous", zc::rand({4096}) + 0.5),
         large("contiguous", zc::randn({4096}))},
        ln({4096}, 1e-5), Acc::accumulate);
  // A constant row: variance 0, eps keeps it finite.
  h.run("layer_norm [4]", {contiguous(zc::ref::constant({2, 4}, 7), DType::f32)}, ln({4}, 1e-5),
        Acc::accumulate);
}

TEST_F(CudaOps, EmbeddingCatAttention) {
  Harness h("embedding, cat, attention");
  zc::manual_seed(801);
  // embedding: repeated and boundary indices, index tensors of any shape and layout.
  const Fn emb = [](const std::vector<Tensor>& v) { return zc::embedding(v[0], v[1]); };
  const Arr idx{{2, 3}, {0, 9, 3, 3, 1, 0}};
  for (DType wt : all_dtypes()) {
    const Arr w =
        wt == DType::boolean ? zc::ref::small_ints({10, 4}, 0, 1) : draw({10, 4}, -50, 50, wt);
    const std::vector<Input> ws = every_kind(w, wt), is = every_kind(idx, DType::i64);
    for (size_t i = 0; i < is.size(); ++i) {
      h.run("embedding", {ws[i % ws.size()], is[i]}, emb, Acc::exact);
    }
    if (wt == DType::f32 || wt == DType::f16) {
      h.run("embedding", {contiguous(w, wt), of_kind("strided", idx, DType::i32)}, emb, Acc::exact);
      h.run("embedding", {of_kind("transpose", w, wt), contiguous(Arr{{}, {7}}, DType::i64)}, emb,
            Acc::exact);
      h.run("embedding", {contiguous(w, wt), contiguous(Arr{{5}, {4, 4, 2, 8, 0}}, DType::i64)},
            emb, Acc::exact);
    }
  }
  h.run("embedding",
        {large("contiguous", zc::randn({4096, 256})),
         large("contiguous", zc::randint(0, 4096, {8, 64}))},
        emb, Acc::exact);

  // cat on each dim, pieces in different layouts; one piece; 0-dim pieces (refused); large.
  auto cat = [](int64_t dim) -> Fn {
    return [dim](const std::vector<Tensor>& v) { return zc::cat(v, dim); };
  };
  for (DType dt : all_dtypes()) {
    for (int64_t dim : {0, 1, 2, -1}) {
      std::vector<Input> pieces;
      const std::vector<std::string> ks{"column_major", "strided", "transpose"};
      for (int64_t k : {1, 3, 2}) {
        Shape s{2, 3, 4};
        s[dim < 0 ? dim + 3 : dim] = k;
        pieces.push_back(of_kind(ks[pieces.size()], ties(s, dt), dt));
      }
      h.run("cat dim=" + std::to_string(dim), pieces, cat(dim), Acc::exact);
    }
  }
  const Arr three = ties({3}, DType::f32), one{{}, {1}};
  h.run("cat dim=0", {of_kind("slice_step2", three, DType::f32)}, cat(0), Acc::exact);
  h.run("cat dim=0", {contiguous(one, DType::f32), contiguous(one, DType::f32)}, cat(0),
        Acc::exact);
  h.run("cat dim=1",
        {large("contiguous", zc::randn({2, 600000})), large("contiguous", zc::randn({2, 3}))},
        cat(1), Acc::exact);
  const Arr m = ties({3, 4}, DType::f32);
  const Fn stack1 = [](const std::vector<Tensor>& v) { return zc::stack(v, 1); };
  h.run("stack dim=1", {of_kind("transpose", m, DType::f32), contiguous(m, DType::f32)}, stack1,
        Acc::exact);

  // scaled_dot_product_attention, causal and not, with and without a scale.
  const std::vector<zc::test::AttentionCase> atts{
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, false, std::nullopt},
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, true, std::nullopt},
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, true, 0.3},
      {{2, 17, 16}, {2, 17, 16}, {2, 17, 3}, true, std::nullopt},  // the value dim differs
      {{1, 2, 4, 8}, {1, 2, 7, 8}, {1, 2, 7, 5}, false, 1.7},      // more keys than queries
      {{1, 1, 8}, {1, 1, 8}, {1, 1, 8}, true, std::nullopt},       // one token
      // the tiled form: 70 keys are two tiles of 64, the causal mask cuts the second
      {{1, 2, 70, 64}, {1, 2, 70, 64}, {1, 2, 70, 64}, true, std::nullopt},
      // head dims above 64: tiles of 32 keys, here five of them
      {{1, 1, 33, 128}, {1, 1, 130, 128}, {1, 1, 130, 128}, false, std::nullopt},
      // a value dim that is not a multiple of 64: the last column group is partly idle
      {{1, 1, 9, 72}, {1, 1, 9, 72}, {1, 1, 9, 40}, true, std::nullopt},
      // above 128 dims: the rows form, eight threads a row reading float4s (and f64 scalars)
      {{1, 2, 20, 192}, {1, 2, 20, 192}, {1, 2, 20, 192}, true, std::nullopt},
  };
  for (const zc::test::AttentionCase& a : atts) {
    const Fn f = [a](const std::vector<Tensor>& v) {
      return zc::scaled_dot_product_attention(v[0], v[1], v[2], a.causal, a.scale);
    };
    std::ostringstream name;
    name << "scaled_dot_product_attention causal=" << a.causal
         << " scale=" << (a.scale ? std::to_string(*a.scale) : "default");
    for (DType dt : float_dtypes()) {
      Arr q = zc::ref::uniform(a.q, -1, 1), k = zc::ref::uniform(a.k, -1, 1);
      Arr v = zc::ref::uniform(a.v, -1, 1);
      h.run(name.str(),
            {of_kind("strided", q, dt), of_kind("column_major", k, dt), contiguous(v, dt)}, f,
            Acc::accumulate);
      h.run(name.str(),
            {of_kind("transpose", q, dt), of_kind("slice_step2", k, dt),
             of_kind(a.v.size() >= 3 ? "permute" : "transpose", v, dt)},
            f, Acc::accumulate);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Models: moved to the GPU with Module::to, eager.

TEST_F(CudaOps, Models) {
  const Device dev = test_device();
  {
    zc::manual_seed(901);
    auto model = zc::models::seed_model(8);
    model->eval();
    Tensor x = zc::randn({4, 10}), xt = zc::randn({10, 4});
    Tensor want = (*model)(x), want_t = (*model)(xt.t());
    model->to(dev);
    for (const auto& [name, p] : model->named_parameters()) {
      EXPECT_EQ(p.device().str(), dev.str()) << name;
    }
    Tensor got = (*model)(x.to(dev));
    EXPECT_EQ(got.device().str(), dev.str());
    EXPECT_TRUE(agree(got.to(Device::cpu()), want, tolerance(Acc::accumulate, DType::f32)))
        << "seed_model(8)";
    // A transposed input, made on the device from the moved packed tensor.
    EXPECT_TRUE(agree((*model)(xt.to(dev).t()).to(Device::cpu()), want_t,
                      tolerance(Acc::accumulate, DType::f32)))
        << "seed_model(8) on a transposed input";
  }
  {
    zc::manual_seed(902);
    zc::models::GPTConfig cfg;
    cfg.vocab_size = 64;
    cfg.block_size = 16;
    cfg.n_layer = 2;
    cfg.n_head = 2;
    cfg.d_model = 32;
    auto model = zc::models::gpt(cfg);
    model->eval();
    Tensor full = zc::randint(0, 64, {2, 16}), part = zc::randint(0, 64, {3, 5});
    Tensor want_full = (*model)(full), want_part = (*model)(part);
    model->to(dev);
    for (const auto& [name, p] : model->named_parameters()) {
      EXPECT_EQ(p.device().str(), dev.str()) << name;
    }
    for (const auto& [name, b] : model->named_buffers()) {
      EXPECT_EQ(b.device().str(), dev.str()) << name;
    }
    Tensor got_full = (*model)(full.to(dev)), got_part = (*model)(part.to(dev));
    EXPECT_EQ(got_full.device().str(), dev.str());
    EXPECT_TRUE(
        agree(got_full.to(Device::cpu()), want_full, tolerance(Acc::accumulate, DType::f32)))
        << "gpt, 2 x 16 tokens";
    EXPECT_TRUE(
        agree(got_part.to(Device::cpu()), want_part, tolerance(Acc::accumulate, DType::f32)))
        << "gpt, 3 x 5 tokens";
  }
}

// Last: a kernel that faults could leave the device unusable for every test after it.
TEST_F(CudaOps, EmbeddingIndexOutOfRange) {
  const Device dev = test_device();
  Tensor w = zc::randn({10, 4});
  const std::vector<std::vector<int64_t>> bad_indices{{0, 10, 2}, {-1}, {3, 1000000}};
  for (const std::vector<int64_t>& bad : bad_indices) {
    Tensor idx = zc::from_values<int64_t>(bad, {static_cast<int64_t>(bad.size())});
    SCOPED_TRACE("indices " + show(bad));
    EXPECT_THROW(zc::embedding(w, idx), zc::Error) << "on the CPU";
    // The error may surface at the call or when the result is read back, but as a zc::Error.
    EXPECT_THROW(zc::embedding(w.to(dev), idx.to(dev)).to(Device::cpu()), zc::Error)
        << "on " << dev.str();
  }
  // The device is still usable afterwards.
  Tensor good = zc::from_values<int64_t>({9, 0, 4}, {3});
  EXPECT_TRUE(agree(zc::embedding(w.to(dev), good.to(dev)).to(Device::cpu()),
                    zc::embedding(w, good), Tol{}));
}

}  // namespace
}  // namespace cuda_ops_test
