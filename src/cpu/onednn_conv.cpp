#include "cpu/onednn_conv.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/onednn_common.h"
#endif

#include "cpu/threads.h"
#include "ops/eager.h"
#include "ops/window.h"
#include "util/check.h"
#include "util/env.h"
#include "util/stats.h"

namespace zc::cpu {

// The operator's attributes and window geometry are the registry's (ops/attrs.h, ops/window.h).
using ops::Conv2dAttrs;
using ops::eager_contiguous;
using ops::Pool2dAttrs;
using ops::pool_window;
using ops::Window2d;

namespace {

// ZC_CPU_CONV: unset or empty, "auto", "direct", "winograd" or "columns".
enum class ConvSetting { automatic, direct, winograd, columns };

ConvSetting conv_setting() {
  static const ConvSetting setting = [] {
    const std::optional<std::string> v = env::non_empty(env::Var::cpu_conv);
    if (!v || *v == "auto") return ConvSetting::automatic;
    if (*v == "direct") return ConvSetting::direct;
    if (*v == "winograd") return ConvSetting::winograd;
    if (*v == "columns") return ConvSetting::columns;
    throw Error("ZC_CPU_CONV=" + *v +
                ": expected auto, direct, winograd or columns (docs/onnx.md)");
  }();
  return setting;
}

}  // namespace

bool onednn_conv_available() {
  // Read in every build, so that a malformed value is an error with or without oneDNN.
  const bool columns = conv_setting() == ConvSetting::columns;
#ifdef ZC_WITH_DNNL
  return !columns;
#else
  (void)columns;
  return false;
#endif
}

bool onednn_winograd_wanted() {
  switch (conv_setting()) {
    case ConvSetting::direct:
    case ConvSetting::columns:
      return false;
    case ConvSetting::winograd:
      return true;
    case ConvSetting::automatic:
      break;
  }
  return cpu_threads() <= kWinogradMaxThreads;
}

#ifdef ZC_WITH_DNNL

namespace {

using dnnl::memory;
using Dims = memory::dims;

// The primitive for one input shape [N, H, W, C].
struct Plan {
  dnnl::convolution_forward conv;
  dnnl::reorder copy;  // the residual into the output, for the sum post-op
  memory::desc src, dst, weights, bias;
  memory::desc user_weights;
  // A Winograd convolution reads and writes oneDNN's blocked layout, not channels-last: the
  // input is converted into `conv_src` and the result out of `conv_dst` around it.
  bool winograd = false;
  memory::desc conv_src, conv_dst;
  dnnl::reorder to_conv, from_conv;
};

// Whether a convolution may run as Winograd F(2x2, 3x3) or F(4x4, 3x3) (oneDNN picks): a 3x3
// window at stride 1, no dilation, no groups, no residual (its sum post-op would need the
// residual in the blocked layout too; ResNet's 3x3 convolutions have none), and an output of at
// least 28x28 per image. On smaller outputs the weights dominate: in ResNet-50 at batch 1 the
// 14x14 layers (256 channels) saved 0.2 ms each, and the 7x7 ones (512) nothing, against
// first calls 11 and 30 ms longer each (oneDNN converts weights into Winograd's layout on one
// thread), so only the 56x56 and 28x28 layers run so.
bool winograd_applies(const Conv2dAttrs& a, int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
  return kh == 3 && kw == 3 && a.stride_h == 1 && a.stride_w == 1 && a.dilation_h == 1 &&
         a.dilation_w == 1 && a.groups == 1 && !a.residual &&
         oh * ow >= kWinogradMinSide * kWinogradMinSide && onednn_winograd_wanted();
}

// A plan's problem: the input's [N, H, W, C], the weight's out channels and window, and
// whether a bias is added.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

std::shared_ptr<const Plan> make_plan(const Conv2dAttrs& a, bool winograd, const Key& key) {
  const auto [n, h, wd, c, cout, kh, kw, has_bias] = key;
  const int64_t g = a.groups;
  const int64_t oh = (h + a.pad_top + a.pad_bottom - a.dilation_h * (kh - 1) - 1) / a.stride_h + 1;
  const int64_t ow = (wd + a.pad_left + a.pad_right - a.dilation_w * (kw - 1) - 1) / a.stride_w + 1;
  auto plan = std::make_shared<Plan>();
  const auto f32 = memory::data_type::f32;
  plan->src = memory::desc({n, c, h, wd}, f32, memory::format_tag::nhwc);
  plan->dst = memory::desc({n, cout, oh, ow}, f32, memory::format_tag::nhwc);
  plan->bias = memory::desc({cout}, f32, memory::format_tag::a);
  const Dims wdims = g == 1 ? Dims{cout, c, kh, kw} : Dims{g, cout / g, c / g, kh, kw};
  plan->user_weights =
      memory::desc(wdims, f32, g == 1 ? memory::format_tag::oihw : memory::format_tag::goihw);
  const memory::desc any_w(wdims, f32, memory::format_tag::any);
  const Dims strides{a.stride_h, a.stride_w}, dil{a.dilation_h - 1, a.dilation_w - 1};
  const Dims pad_l{a.pad_top, a.pad_left}, pad_r{a.pad_bottom, a.pad_right};
  auto desc = [&](dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst) {
    return has_bias
               ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src,
                                                 any_w, plan->bias, dst, strides, dil, pad_l, pad_r)
               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, src,
                                                 any_w, dst, strides, dil, pad_l, pad_r);
  };
  dnnl::post_ops post;
  if (a.residual) post.append_sum(1.f);
  if (a.relu) post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (a.relu6) post.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f);
  dnnl::primitive_attr attr = dnnl_kept_attr();
  attr.set_post_ops(post);
  dnnl::convolution_forward::primitive_desc pd;
  if (winograd && winograd_applies(a, kh, kw, oh, ow)) {
    // oneDNN has Winograd kernels only for its blocked layouts, and only on some CPUs (AVX-512):
    // where it has none the convolution stays direct.
    const memory::desc any_src({n, c, h, wd}, f32, memory::format_tag::any);
    const memory::desc any_dst({n, cout, oh, ow}, f32, memory::format_tag::any);
    try {
      pd = dnnl::convolution_forward::primitive_desc(
          desc(dnnl::algorithm::convolution_winograd, any_src, any_dst), attr, dnnl_engine());
      plan->winograd = true;
    } catch (const dnnl::error&) {
      plan->winograd = false;
    }
  }
  if (plan->winograd) {
    plan->conv_src = pd.src_desc();
    plan->conv_dst = pd.dst_desc();
    plan->to_conv = dnnl::reorder(dnnl::reorder::primitive_desc(
        dnnl_engine(), plan->src, dnnl_engine(), plan->conv_src, dnnl_kept_attr()));
    plan->from_conv = dnnl::reorder(dnnl::reorder::primitive_desc(
        dnnl_engine(), plan->conv_dst, dnnl_engine(), plan->dst, dnnl_kept_attr()));
  } else {
    pd = dnnl::convolution_forward::primitive_desc(
        desc(dnnl::algorithm::convolution_direct, plan->src, plan->dst), attr, dnnl_engine());
  }
  plan->weights = pd.weights_desc();
  if (a.residual) {
    plan->copy = dnnl::reorder(dnnl::reorder::primitive_desc(
        dnnl_engine(), plan->dst, dnnl_engine(), plan->dst, dnnl_kept_attr()));
  }
  plan->conv = dnnl::convolution_forward(pd);
  return plan;
}

}  // namespace

struct OnednnConv::State {
  Conv2dAttrs a;
  Use use = Use::repeated;
  mutable std::mutex mu;
  // Code for many sizes meets a new shape per size: past the bound, the first by key goes (made
  // again if that size comes back).
  mutable PlanTable<Key, Plan> plans{64};
  // Its weights in the plan's layout, converted at the first call that meets them.
  mutable KeptWeights weights{KeptWeights::Keep::first_sight};
  mutable std::atomic<int64_t> winograd_runs{0};
};

OnednnConv::OnednnConv(const Conv2dAttrs& attrs, Use use) : state_(std::make_unique<State>()) {
  state_->a = attrs;
  state_->use = use;
}

OnednnConv::~OnednnConv() = default;

int64_t OnednnConv::conversions() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->weights.conversions();
}

int64_t OnednnConv::winograd_runs() const {
  return state_->winograd_runs.load();
}

void OnednnConv::run(const Tensor& x_in, const Tensor& w_in, const Tensor* bias_in,
                     const Tensor* residual, const Tensor& out, WeightIdentity weight) const {
  ZC_CHECK(x_in.dtype() == DType::f32 && w_in.dtype() == DType::f32 && out.dtype() == DType::f32 &&
               out.is_contiguous(),
           "oneDNN convolution on a non-f32 tensor");
  const Tensor x = x_in.is_contiguous() ? x_in : eager_contiguous(x_in);
  // A strided weight is copied on each call, so nothing converted from the copy is kept.
  const Tensor w = w_in.is_contiguous() ? w_in : eager_contiguous(w_in);
  if (!w_in.is_contiguous()) weight = {};
  Tensor bias, r;
  if (bias_in) bias = bias_in->is_contiguous() ? *bias_in : eager_contiguous(*bias_in);
  if (state_->a.residual) {
    ZC_CHECK(residual && residual->dtype() == DType::f32 && residual->shape() == out.shape(),
             "oneDNN convolution's residual");
    r = residual->is_contiguous() ? *residual : eager_contiguous(*residual);
  }
  Dense d;
  d.x = x.data<float>();
  d.w = w.data<float>();
  for (size_t i = 0; i < 4; ++i) {
    d.x_shape[i] = x.size(static_cast<int64_t>(i));
    d.w_shape[i] = w.size(static_cast<int64_t>(i));
  }
  d.bias = bias_in ? bias.data<float>() : nullptr;
  d.residual = r.defined() ? r.data<float>() : nullptr;
  d.out = out.data<float>();
  d.out_numel = out.numel();
  run(d, weight);
}

void OnednnConv::run(const Dense& d, WeightIdentity weight) const {
  // A small convolution runs on one thread, its primitive made for that team (oneDNN sizes its
  // work split when the primitive is made).
  WorkTeam team(d.out_numel * d.w_shape[1] * d.w_shape[2] * d.w_shape[3]);
  std::shared_ptr<const Plan> plan;
  memory conv_w;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    const Key key{d.x_shape[0], d.x_shape[1], d.x_shape[2], d.x_shape[3],
                  d.w_shape[0], d.w_shape[2], d.w_shape[3], d.bias != nullptr};
    plan = state_->plans.get(
        key, [&](const Key& k) { return make_plan(state_->a, state_->use == Use::repeated, k); });
    if (!plan) {
      throw Error("conv2d: oneDNN has no convolution for input " +
                  shape_str(Shape(d.x_shape.begin(), d.x_shape.end())) + " and weight " +
                  shape_str(Shape(d.w_shape.begin(), d.w_shape.end())) +
                  " with these strides, paddings, dilations and groups; run it with "
                  "ZC_CPU_CONV=columns");
    }
    conv_w = state_->weights.get(d.w, weight, plan->user_weights, plan->weights);
  }
  const dnnl::engine& e = dnnl_engine();
  if (state_->a.residual) {
    ZC_CHECK(d.residual, "oneDNN convolution's residual");
    // The sum post-op adds the convolution to what the output holds: the residual, copied by
    // a reorder, which runs on all the threads (a single-threaded copy cost 2-3 ms of a
    // ResNet-50 call on 16 cores), unless the output was placed over the residual
    // (codegen/buffer_plan.h): the post-op reads each element before it writes it.
    if (d.residual != d.out) {
      memory from(plan->dst, e, const_cast<float*>(d.residual));
      memory to(plan->dst, e, d.out);
      dnnl_run_kept(plan->copy, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    }
  }
  if (!plan->winograd) {
    KeptArgs& args = d.bias
                         ? dnnl_kept_args(plan, plan->conv,
                                          {{DNNL_ARG_SRC, plan->src},
                                           {DNNL_ARG_DST, plan->dst},
                                           {DNNL_ARG_BIAS, plan->bias}})
                         : dnnl_kept_args(plan, plan->conv,
                                          {{DNNL_ARG_SRC, plan->src}, {DNNL_ARG_DST, plan->dst}});
    args.set(DNNL_ARG_SRC, d.x);
    args.set(DNNL_ARG_DST, d.out);
    if (d.bias) args.set(DNNL_ARG_BIAS, d.bias);
    args.run(plan->conv, &conv_w);
    return;
  }
  // Winograd reads and writes blocked copies in this thread's buffers (dnnl_thread_memory).
  state_->winograd_runs.fetch_add(1, std::memory_order_relaxed);
  thread_local std::vector<char> src_buf, dst_buf;
  const memory src(plan->src, e, const_cast<float*>(d.x));
  const memory dst(plan->dst, e, d.out);
  const memory conv_src = dnnl_thread_memory(src_buf, plan->conv_src);
  const memory conv_dst = dnnl_thread_memory(dst_buf, plan->conv_dst);
  dnnl_run_kept(plan->to_conv, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, conv_src}});
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, conv_src}, {DNNL_ARG_WEIGHTS, conv_w}, {DNNL_ARG_DST, conv_dst}};
  if (d.bias) args.emplace(DNNL_ARG_BIAS, memory(plan->bias, e, const_cast<float*>(d.bias)));
  dnnl_run_kept(plan->conv, std::move(args));
  dnnl_run_kept(plan->from_conv, {{DNNL_ARG_FROM, conv_dst}, {DNNL_ARG_TO, dst}});
}

namespace {

// The padding after the input that gives `out` windows of size k (oneDNN's right padding: a
// ceil-mode pool's last window may reach past the given padding).
int64_t pad_after(int64_t n, int64_t out, int64_t k, int64_t s, int64_t before) {
  return (out - 1) * s + k - n - before;
}

}  // namespace

bool onednn_max_pool_applies(const Tensor& x, const Pool2dAttrs& a) {
  return onednn_max_pool_applies(x.shape(), x.dtype(), a);
}

bool onednn_max_pool_applies(const Shape& x, DType dtype, const Pool2dAttrs& a) {
  if (!onednn_conv_available() || dtype != DType::f32 || x.size() != 4 || a.dilation_h != 1 ||
      a.dilation_w != 1) {
    return false;
  }
  const int64_t h = x[a.channels_last ? 1 : 2], w = x[a.channels_last ? 2 : 3];
  const Window2d win = pool_window(a);
  const int64_t oh = win.out_h(h), ow = win.out_w(w);
  return oh > 0 && ow > 0 && pad_after(h, oh, a.kernel_h, a.stride_h, a.pad_top) >= 0 &&
         pad_after(w, ow, a.kernel_w, a.stride_w, a.pad_left) >= 0;
}

namespace {

// A max pool's problem: [N, C, H, W], the output's [OH, OW], the window, strides and paddings
// (before, and after as oneDNN counts it), and the layout.
using PoolKey = std::array<int64_t, 13>;

struct PoolPlan {
  dnnl::pooling_forward pool;
  memory::desc src, dst;
};

std::shared_ptr<const PoolPlan> make_pool_plan(const PoolKey& k) {
  const auto [n, c, h, w, oh, ow, kh, kw, sh, sw, pt, pl, cl] = k;
  const auto f32 = memory::data_type::f32;
  const auto tag = cl ? memory::format_tag::nhwc : memory::format_tag::nchw;
  auto plan = std::make_shared<PoolPlan>();
  plan->src = memory::desc({n, c, h, w}, f32, tag);
  plan->dst = memory::desc({n, c, oh, ow}, f32, tag);
  const dnnl::pooling_forward::primitive_desc pd(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max,
                                  plan->src, plan->dst, {sh, sw}, {kh, kw}, {pt, pl},
                                  {pad_after(h, oh, kh, sh, pt), pad_after(w, ow, kw, sw, pl)}),
      dnnl_kept_attr(), dnnl_engine());
  plan->pool = dnnl::pooling_forward(pd);
  return plan;
}

}  // namespace

void onednn_max_pool(const Tensor& x_in, const Tensor& out, const Pool2dAttrs& a) {
  ZC_CHECK(onednn_max_pool_applies(x_in, a) && out.is_contiguous(), "oneDNN max pool");
  const Tensor x = x_in.is_contiguous() ? x_in : eager_contiguous(x_in);
  onednn_max_pool(x.data<float>(), x.shape(), out.data<float>(), out.shape(), a);
}

void onednn_max_pool(const float* x, const Shape& xs, float* out, const Shape& os,
                     const Pool2dAttrs& a) {
  const bool cl = a.channels_last;
  const PoolKey key{xs[0],          xs[cl ? 3 : 1], xs[cl ? 1 : 2], xs[cl ? 2 : 3], os[cl ? 1 : 2],
                    os[cl ? 2 : 3], a.kernel_h,     a.kernel_w,     a.stride_h,     a.stride_w,
                    a.pad_top,      a.pad_left,     cl ? 1 : 0};
  // Made once per problem in the process: making the primitive's descriptor took as long as
  // the pool itself (0.1 ms of ResNet-50's 56x56 pool), even where oneDNN's primitive cache
  // then had the kernel.
  // Never destroyed: its primitives would outlive oneDNN's engine at exit.
  static std::mutex mu;
  static auto* plans = new PlanTable<PoolKey, PoolPlan>(64);
  std::shared_ptr<const PoolPlan> plan;
  {
    std::lock_guard<std::mutex> lock(mu);
    plan = plans->get(key, make_pool_plan);
  }
  ZC_CHECK(plan != nullptr, "oneDNN has no max pool for an input it was said to apply to");
  KeptArgs& args =
      dnnl_kept_args(plan, plan->pool, {{DNNL_ARG_SRC, plan->src}, {DNNL_ARG_DST, plan->dst}});
  args.set(DNNL_ARG_SRC, x);
  args.set(DNNL_ARG_DST, out);
  args.run(plan->pool);
}

#else  // no oneDNN in this build: onednn_conv_available() is false and nothing runs these.

struct OnednnConv::State {};
OnednnConv::OnednnConv(const Conv2dAttrs&, Use) {}
OnednnConv::~OnednnConv() = default;
int64_t OnednnConv::conversions() const {
  return 0;
}
int64_t OnednnConv::winograd_runs() const {
  return 0;
}
void OnednnConv::run(const Tensor&, const Tensor&, const Tensor*, const Tensor*, const Tensor&,
                     WeightIdentity) const {
  ZC_CHECK(false, "oneDNN convolutions asked of a build without oneDNN");
}
void OnednnConv::run(const Dense&, WeightIdentity) const {
  ZC_CHECK(false, "oneDNN convolutions asked of a build without oneDNN");
}
bool onednn_max_pool_applies(const Tensor&, const Pool2dAttrs&) {
  return false;
}
bool onednn_max_pool_applies(const Shape&, DType, const Pool2dAttrs&) {
  return false;
}
void onednn_max_pool(const float*, const Shape&, float*, const Shape&, const Pool2dAttrs&) {
  ZC_CHECK(false, "oneDNN pooling asked of a build without oneDNN");
}
void onednn_max_pool(const Tensor&, const Tensor&, const Pool2dAttrs&) {
  ZC_CHECK(false, "oneDNN pooling asked of a build without oneDNN");
}

#endif

void onednn_conv_once(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      const Tensor& out, const Conv2dAttrs& attrs) {
  OnednnConv(attrs, OnednnConv::Use::once).run(x, w, bias, residual, out, WeightIdentity{});
}

}  // namespace zc::cpu
