#include "ops/onednn_conv.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#ifdef ZC_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "ops/eager.h"
#include "tensor/assign.h"
#include "util/check.h"

namespace zc::ops {

bool onednn_conv_available() {
#ifdef ZC_WITH_DNNL
  static const bool on = [] {
    const char* v = std::getenv("ZC_CPU_CONV");
    return !v || std::strcmp(v, "columns") != 0;
  }();
  return on;
#else
  return false;
#endif
}

#ifdef ZC_WITH_DNNL

namespace {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// The primitive for one input shape [N, H, W, C].
struct Plan {
  dnnl::convolution_forward conv;
  memory::desc src, dst, weights, bias;
  memory::desc user_weights;
};

// A weight in the primitive's layout, and what it was converted from.
struct Converted {
  WeightIdentity from;
  memory::desc layout;
  memory data;
  uint64_t last_use = 0;
};

}  // namespace

struct OnednnConv::State {
  Conv2dAttrs a;
  mutable std::mutex mu;
  mutable std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, std::shared_ptr<Plan>>
      plans;
  // By the weight's address: a repeated block's executable sees one weight per instance.
  mutable std::unordered_map<const void*, std::shared_ptr<Converted>> weights;
  mutable uint64_t clock = 0;
  mutable int64_t conversions = 0;

  std::shared_ptr<Plan> plan_for(const Tensor& x, const Tensor& w, bool has_bias) const {
    const int64_t n = x.size(0), h = x.size(1), wd = x.size(2), c = x.size(3);
    const int64_t cout = w.size(0), kh = w.size(2), kw = w.size(3), g = a.groups;
    auto key = std::make_tuple(n, h, wd, c, int64_t{has_bias});
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    const int64_t oh =
        (h + a.pad_top + a.pad_bottom - a.dilation_h * (kh - 1) - 1) / a.stride_h + 1;
    const int64_t ow =
        (wd + a.pad_left + a.pad_right - a.dilation_w * (kw - 1) - 1) / a.stride_w + 1;
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
    auto desc =
        has_bias ? dnnl::convolution_forward::desc(
                       dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                       plan->src, any_w, plan->bias, plan->dst, strides, dil, pad_l, pad_r)
                 : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                   dnnl::algorithm::convolution_direct, plan->src,
                                                   any_w, plan->dst, strides, dil, pad_l, pad_r);
    dnnl::post_ops post;
    if (a.residual) post.append_sum(1.f);
    if (a.relu) post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post);
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
    plan->weights = pd.weights_desc();
    plan->conv = dnnl::convolution_forward(pd);
    // Code for many sizes meets a new shape per size: past a bound, the plan of the smallest
    // shape goes (made again if that size comes back).
    if (plans.size() >= 64) plans.erase(plans.begin());
    plans.emplace(key, plan);
    return plan;
  }

  // w in the plan's layout: the kept copy while w's identity and address are the same.
  std::shared_ptr<Converted> weights_for(const Plan& plan, const Tensor& w,
                                         WeightIdentity id) const {
    const void* addr = w.raw_data();
    ++clock;
    if (id.storage != 0) {
      auto it = weights.find(addr);
      if (it != weights.end() && it->second->from.storage == id.storage &&
          it->second->from.version == id.version && it->second->layout == plan.weights) {
        it->second->last_use = clock;
        return it->second;
      }
    }
    auto conv = std::make_shared<Converted>();
    conv->from = id;
    conv->layout = plan.weights;
    conv->data = memory(plan.weights, engine());
    memory user(plan.user_weights, engine(), const_cast<void*>(addr));
    dnnl::reorder(user, conv->data).execute(thread_stream(), user, conv->data);
    thread_stream().wait();
    ++conversions;
    conv->last_use = clock;
    if (id.storage != 0) {
      // Bounded: a weight not seen for the longest time goes first (one freed long ago).
      if (weights.size() >= 256) {
        auto oldest = weights.begin();
        for (auto i = weights.begin(); i != weights.end(); ++i) {
          if (i->second->last_use < oldest->second->last_use) oldest = i;
        }
        weights.erase(oldest);
      }
      weights[addr] = conv;
    }
    return conv;
  }
};

OnednnConv::OnednnConv(const Conv2dAttrs& attrs) : state_(std::make_unique<State>()) {
  state_->a = attrs;
}

OnednnConv::~OnednnConv() = default;

int64_t OnednnConv::conversions() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->conversions;
}

void OnednnConv::run(const Tensor& x_in, const Tensor& w_in, const Tensor* bias_in,
                     const Tensor* residual, const Tensor& out, WeightIdentity weight) const {
  ZC_CHECK(x_in.dtype() == DType::f32 && w_in.dtype() == DType::f32 && out.dtype() == DType::f32,
           "oneDNN convolution on a non-f32 tensor");
  const Tensor x = x_in.is_contiguous() ? x_in : eager_contiguous(x_in);
  // A strided weight is copied on each call, so nothing converted from the copy is kept.
  const Tensor w = w_in.is_contiguous() ? w_in : eager_contiguous(w_in);
  if (!w_in.is_contiguous()) weight = {};
  Tensor bias;
  if (bias_in) bias = bias_in->is_contiguous() ? *bias_in : eager_contiguous(*bias_in);
  std::shared_ptr<Plan> plan;
  std::shared_ptr<Converted> conv_w;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    plan = state_->plan_for(x, w, bias_in != nullptr);
    conv_w = state_->weights_for(*plan, w, weight);
  }
  if (state_->a.residual) {
    ZC_CHECK(residual && residual->dtype() == DType::f32 && residual->shape() == out.shape(),
             "oneDNN convolution's residual");
    assign_values(out, *residual);  // the sum post-op adds the convolution to it
  }
  const dnnl::engine& e = engine();
  memory src(plan->src, e, const_cast<void*>(x.raw_data()));
  memory dst(plan->dst, e, out.raw_data());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, conv_w->data}, {DNNL_ARG_DST, dst}};
  if (bias_in)
    args.emplace(DNNL_ARG_BIAS, memory(plan->bias, e, const_cast<void*>(bias.raw_data())));
  plan->conv.execute(thread_stream(), args);
  thread_stream().wait();
}

#else  // no oneDNN in this build: onednn_conv_available() is false and nothing runs these.

struct OnednnConv::State {};
OnednnConv::OnednnConv(const Conv2dAttrs&) {}
OnednnConv::~OnednnConv() = default;
int64_t OnednnConv::conversions() const {
  return 0;
}
void OnednnConv::run(const Tensor&, const Tensor&, const Tensor*, const Tensor*, const Tensor&,
                     WeightIdentity) const {
  ZC_CHECK(false, "oneDNN convolutions asked of a build without oneDNN");
}

#endif

void onednn_conv_once(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                      const Tensor& out, const Conv2dAttrs& attrs) {
  OnednnConv(attrs).run(x, w, bias, residual, out, WeightIdentity{});
}

}  // namespace zc::ops
