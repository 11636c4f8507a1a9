// The ops attention's derivative is made of (attention_lse, attention_grad; see
// src/ops/attention_grad.cpp) on CUDA against the CPU's eager kernels: on a GPU each call runs
// the fused backward kernels (attention_tiled.cpp without V for lse,
// attention_backward*.cpp for the gradients), in both forms: tiled (f32 and bf16 with
// head dims that are multiples of 4 up to 128) and rows (f64, odd head dims, dims above 128).
// The harness, input kinds and tolerances are in cuda_ops_harness.h. Eager CUDA ops make strided
// inputs dense first, so layouts are tested by the compiled tests (cuda_codegen_test.cpp).
//
// lse and delta are inputs here, computed on the CPU from the case's q, k, v and g (as the
// derivative computes them), so that both devices see the same values. The gradients are held
// to the accumulated tolerance against an error scale: the same sums with every term's
// magnitude (|P (|g| |v|^T + |delta|)| |k| for dq and so on), the bound of their rounding
// error, since gradients cancel to near zero where a plain relative bound would be too tight.
#include "ops/derivative.h"
#include "ops/dispatch.h"
#include "unit/attention_grad_ops.h"
#include "unit/cuda_ops_harness.h"

namespace cuda_ops_test {
namespace {

using zc::ops::AttentionAttrs;
using zc::ops::AttentionGradAttrs;
using zc::ops::AttentionWrt;

using zc::test::kEveryWrt;
using zc::test::lse_op;

struct AttCase {
  Shape q, k, v;
  bool causal;
  const char* why;
};

// Forms by dtype and head dim (launch.h's attention_grad_tiling): f32 and bf16 take the tiled
// form for the first cases, whose dims are multiples of 4 up to 128; f64 always takes rows.
const std::vector<AttCase>& tiled_cases() {
  static const std::vector<AttCase> cases{
      {{2, 3, 128, 64},
       {2, 3, 128, 64},
       {2, 3, 128, 64},
       true,
       "the GPT's heads: 32 x 32 tiles, the causal blocks skipping masked tiles"},
      {{1, 2, 128, 64}, {1, 2, 128, 64}, {1, 2, 128, 64}, false, "not causal"},
      {{1, 2, 1, 64}, {1, 2, 1, 64}, {1, 2, 1, 64}, true, "one token"},
      {{2, 1, 7, 64}, {2, 1, 7, 64}, {2, 1, 7, 64}, false, "seven tokens: one partial tile"},
      {{1, 2, 33, 64},
       {1, 2, 70, 64},
       {1, 2, 70, 64},
       true,
       "more keys than queries: keys past the last query get no gradient under the mask"},
      {{1, 2, 70, 64},
       {1, 2, 33, 64},
       {1, 2, 33, 40},
       true,
       "more queries than keys, value dim 40: a partly idle column group"},
      {{1, 1, 130, 128},
       {1, 1, 130, 128},
       {1, 1, 130, 128},
       true,
       "head dim 128: 16 x 16 tiles, two column groups, a last tile of 2 rows"},
      {{1, 2, 33, 128}, {1, 2, 130, 128}, {1, 2, 130, 96}, false, "head dim 128, value dim 96"},
      {{2, 3, 33, 72},
       {1, 3, 33, 72},
       {2, 1, 33, 40},
       true,
       "broadcast batch: k over the first dim, v over the heads"},
  };
  return cases;
}

const std::vector<AttCase>& rows_cases() {
  static const std::vector<AttCase> cases{
      {{2, 2, 37, 5}, {2, 2, 37, 5}, {2, 2, 37, 5}, true, "head dim 5: four threads a row"},
      {{1, 2, 30, 192},
       {1, 2, 45, 192},
       {1, 2, 45, 192},
       false,
       "head dim 192: eight threads a row reading float4s (f32)"},
      {{1, 1, 9, 6}, {1, 1, 20, 6}, {1, 1, 20, 3}, true, "more keys than queries, value dim 3"},
  };
  return cases;
}

// The bound of attention_grad's rounding error, shaped like its result (see the top).
Tensor grad_error_scale(const std::vector<Tensor>& x, const AttentionGradAttrs& a,
                        const Shape& result) {
  const DType f64 = DType::f64;
  Tensor q = x[0].to(f64), k = x[1].to(f64), v = x[2].to(f64), g = x[3].to(f64);
  Tensor delta = x[5].to(f64).unsqueeze(-1);
  Tensor s = zc::matmul(q, k.transpose(-2, -1)) * a.scale;
  if (a.causal) {
    const int64_t tq = q.size(-2), tk = k.size(-2);
    Tensor mask = zc::le(zc::arange(tk).reshape({1, tk}), zc::arange(tq).reshape({tq, 1}));
    s = zc::where(mask, s, zc::full({}, -std::numeric_limits<double>::infinity(), f64));
  }
  Tensor p = zc::softmax(s, -1);
  Tensor ds = p * (zc::matmul(zc::abs(g), zc::abs(v).transpose(-2, -1)) + zc::abs(delta));
  auto full = [&](const Tensor& t, int64_t cols) {
    Shape want = result;
    want.back() = cols;
    return t.shape() == want ? t : t.expand(want);
  };
  Tensor dk = zc::matmul(ds.transpose(-2, -1), zc::abs(q)) * a.scale;
  Tensor dv = zc::matmul(p.transpose(-2, -1), zc::abs(g));
  switch (a.wrt) {
    case AttentionWrt::q:
      return full(zc::matmul(ds, zc::abs(k)) * a.scale, result.back());
    case AttentionWrt::k:
      return full(dk, result.back());
    case AttentionWrt::v:
      return full(dv, result.back());
    case AttentionWrt::kv:
      return zc::cat({full(dk, k.size(-1)), full(dv, v.size(-1))}, -1);
  }
  return {};
}

Input host_tensor(const std::string& what, const Tensor& t) {
  return from_base(name_of(t.dtype()) + " " + what + " " + show(t.shape()), t,
                   [](const Tensor& b) { return b; });
}

// lse, then each gradient, for one case in one dtype.
void run_case(Harness& h, const AttCase& c, DType dt) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.q.back()));
  const AttentionAttrs a{c.causal, scale};
  Arr q = zc::ref::uniform(c.q, -1, 1), k = zc::ref::uniform(c.k, -1, 1);
  Arr v = zc::ref::uniform(c.v, -1, 1);
  const Input qi = of_kind("strided", q, dt), ki = of_kind("column_major", k, dt);
  const Input vi = contiguous(v, dt);
  std::ostringstream name;
  name << "causal=" << c.causal << " (" << c.why << ")";
  h.run(
      "attention_lse " + name.str(), {qi, ki},
      [a](const std::vector<Tensor>& x) { return lse_op(x[0], x[1], a.causal, a.scale); },
      Acc::accumulate);

  // g, lse and delta as the derivative would make them, on the CPU.
  const Tensor qh = qi.make(Device::cpu()), kh = ki.make(Device::cpu());
  const Tensor vh = vi.make(Device::cpu());
  const Tensor o = zc::scaled_dot_product_attention(qh, kh, vh, c.causal, scale);
  Arr g = zc::ref::uniform(o.shape(), -1, 1);
  const Input gi = of_kind("transpose", g, dt);
  const Tensor gh = gi.make(Device::cpu());
  const DType ct = dt == DType::f64 ? DType::f64 : DType::f32;
  const Tensor lse = lse_op(qh, kh, a.causal, a.scale);
  const Tensor delta = zc::sum(gh.to(ct) * o.to(ct), {-1});
  const std::vector<Input> in{qi, ki, vi, gi, host_tensor("lse", lse), host_tensor("delta", delta)};
  for (AttentionWrt wrt : kEveryWrt) {
    const AttentionGradAttrs ga{c.causal, scale, wrt};
    const Fn f = [ga](const std::vector<Tensor>& x) {
      return zc::test::grad_op(x, ga.causal, ga.scale, ga.wrt);
    };
    const Fn err = [ga, f](const std::vector<Tensor>& x) {
      return grad_error_scale(x, ga, f(x).shape());
    };
    h.run(std::string("attention_grad wrt=") + zc::ops::attention_wrt_name(wrt) + " " + name.str(),
          in, f, Acc::accumulate, err);
  }
}

TEST_F(CudaOps, AttentionBackwardTiled) {
  Harness h("attention_lse, attention_grad: the tiled form (f64: rows)");
  zc::manual_seed(811);
  for (const AttCase& c : tiled_cases()) {
    for (DType dt : {DType::f32, DType::f64}) run_case(h, c, dt);
  }
  // 16-bit operands convert to f32 in registers: the same kernels reading bf16 (a few shapes).
  for (size_t i : {0, 4, 6}) run_case(h, tiled_cases()[i], DType::bf16);
}

TEST_F(CudaOps, AttentionBackwardRows) {
  Harness h("attention_lse, attention_grad: the rows form");
  zc::manual_seed(812);
  for (const AttCase& c : rows_cases()) {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) run_case(h, c, dt);
  }
  // A shape the op refuses is refused on both devices.
  const Arr q = zc::ref::uniform({2, 5, 4}, -1, 1), g = zc::ref::uniform({2, 4, 4}, -1, 1);
  const Arr l = zc::ref::uniform({2, 5}, -1, 1);
  h.run("attention_grad wrt=q (g of the wrong length)",
        {contiguous(q, DType::f32), contiguous(q, DType::f32), contiguous(q, DType::f32),
         contiguous(g, DType::f32), contiguous(l, DType::f32), contiguous(l, DType::f32)},
        [](const std::vector<Tensor>& x) {
          return zc::test::grad_op(x, false, 0.5, AttentionWrt::q);
        });
}

}  // namespace
}  // namespace cuda_ops_test
