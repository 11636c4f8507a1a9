// Random convolutional programs, compiled and run eagerly: seeded chains of convolutions
// (kernels 1..5, strides 1..2, padding, dilation, groups, with and without bias), batch norms
// (folded into the convolution before them), activations, residual additions, pools (max,
// average, adaptive) and a linear head, in eval mode. The outputs and every gradient must equal
// eager's, and after the weights change in place. Convolutions take several paths by shape and
// thread count (oneDNN direct or Winograd, a residual written over its dying input, the
// channels-last layout pass; cuDNN or generated code on CUDA); this walks their combinations.
// ZC_RANDOM_PROGRAMS_SCALE=N walks N times as many.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/onednn_conv.h"
#include "tensor/assign.h"
#include "unit/random_programs.h"
#include "unit/test_support.h"
#include "zc/zc.h"

namespace zc {
namespace {

struct Feature {  // a value's [C, H, W] (N is the program's)
  int64_t c, h, w;
};

struct Step {
  enum Kind { conv, norm, act, residual, max_pool, avg_pool, concat } kind;
  int a = 0, b = 0;
  int64_t stride = 1, pad = 0, dilation = 1, groups = 1, k = 1;
  int op = 0;
  int param = -1, bias = -1;  // tensors_ indices
  int mean = -1, var = -1;
};

class RandomCnn : public nn::Module {
 public:
  RandomCnn(uint32_t seed, int64_t channels, int64_t side) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    features_ = {{channels, side, side}};
    const int steps = 3 + pick(8);
    for (int s = 0; s < steps; ++s) {
      Step st;
      const int nv = static_cast<int>(features_.size());
      st.a = pick(3) ? nv - 1 : pick(nv);
      const Feature f = features_[static_cast<size_t>(st.a)];
      switch (pick(9)) {
        case 0:
        case 1:
        case 2: {
          st.kind = Step::conv;
          st.k = std::vector<int64_t>{1, 3, 3, 5}[static_cast<size_t>(pick(4))];
          st.dilation = pick(6) == 0 ? 2 : 1;
          st.stride = pick(3) == 0 ? 2 : 1;
          st.pad = pick(3) ? (st.k - 1) * st.dilation / 2 : 0;
          const int64_t span = (st.k - 1) * st.dilation + 1;
          if (f.h + 2 * st.pad < span || f.w + 2 * st.pad < span) {
            st.k = 1, st.dilation = 1, st.pad = 0;
          }
          int64_t out = 1 + pick(16);
          if (pick(4) == 0) {  // grouped, or depthwise when groups = channels
            st.groups = pick(2) ? f.c : 1;
            for (int64_t g : {int64_t{4}, int64_t{2}})
              if (st.groups == 1 && f.c % g == 0) st.groups = g;
            out = st.groups * (1 + pick(3));
          }
          st.param = add(randn({out, f.c / st.groups, st.k, st.k}) *
                         (1.0 / std::sqrt(static_cast<double>(f.c / st.groups * st.k * st.k))));
          if (pick(2)) st.bias = add(randn({out}) * 0.1);
          const int64_t eff = (st.k - 1) * st.dilation + 1;
          features_.push_back({out, (f.h + 2 * st.pad - eff) / st.stride + 1,
                               (f.w + 2 * st.pad - eff) / st.stride + 1});
          break;
        }
        case 3:
          st.kind = Step::norm;
          st.param = add(randn({f.c}) * 0.2 + 1.0);
          st.bias = add(randn({f.c}) * 0.1);
          st.mean = add(randn({f.c}) * 0.1, /*buffer=*/true);
          st.var = add(rand({f.c}) + 0.5, /*buffer=*/true);
          features_.push_back(f);
          break;
        case 4:
        case 5:
          st.kind = Step::act;
          st.op = pick(4);
          features_.push_back(f);
          break;
        case 6: {
          st.kind = Step::residual;
          std::vector<int> same;
          for (int i = 0; i < nv; ++i) {
            const Feature& g = features_[static_cast<size_t>(i)];
            if (i != st.a && g.c == f.c && g.h == f.h && g.w == f.w) same.push_back(i);
          }
          if (same.empty()) {  // none: an activation instead
            st.kind = Step::act;
          } else {
            st.b = same[static_cast<size_t>(pick(static_cast<int>(same.size())))];
          }
          features_.push_back(f);
          break;
        }
        case 7: {
          st.kind = pick(2) ? Step::max_pool : Step::avg_pool;
          st.k = std::min<int64_t>({2 + pick(2), f.h, f.w});
          st.stride = pick(2) ? 2 : 1;
          st.pad = st.k > 2 && pick(2) ? 1 : 0;
          features_.push_back({f.c, (f.h + 2 * st.pad - st.k) / st.stride + 1,
                               (f.w + 2 * st.pad - st.k) / st.stride + 1});
          break;
        }
        default: {
          st.kind = Step::concat;  // along the channels, with a value of the same side
          std::vector<int> same;
          for (int i = 0; i < nv; ++i) {
            const Feature& g = features_[static_cast<size_t>(i)];
            if (g.h == f.h && g.w == f.w) same.push_back(i);
          }
          st.b = same[static_cast<size_t>(pick(static_cast<int>(same.size())))];
          features_.push_back({f.c + features_[static_cast<size_t>(st.b)].c, f.h, f.w});
          break;
        }
      }
      steps_.push_back(st);
    }
    head_ = add(randn({features_.back().c, 5}) * 0.3);
  }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    std::vector<Tensor> v{in[0]};
    auto t = [&](int i) { return tensors_[static_cast<size_t>(i)]; };
    for (const Step& s : steps_) {
      const Tensor& x = v[static_cast<size_t>(s.a)];
      switch (s.kind) {
        case Step::conv:
          v.push_back(conv2d(x, t(s.param), s.bias >= 0 ? t(s.bias) : Tensor(), {s.stride}, {s.pad},
                             {s.dilation}, s.groups));
          break;
        case Step::norm:
          v.push_back(batch_norm(x, t(s.mean), t(s.var), t(s.param), t(s.bias)));
          break;
        case Step::act:
          v.push_back(s.op == 0   ? relu(x)
                      : s.op == 1 ? gelu(x)
                      : s.op == 2 ? sigmoid(x)
                                  : clamp(x, 0.0, 6.0));
          break;
        case Step::residual:
          v.push_back(x + v[static_cast<size_t>(s.b)]);
          break;
        case Step::max_pool:
          v.push_back(max_pool2d(x, {s.k}, {s.stride}, {s.pad}));
          break;
        case Step::avg_pool:
          v.push_back(avg_pool2d(x, {s.k}, {s.stride}, {s.pad}));
          break;
        case Step::concat:
          v.push_back(cat({x, v[static_cast<size_t>(s.b)]}, 1));
          break;
      }
    }
    // The last value, and a head over its global average.
    const Tensor pooled = adaptive_avg_pool2d(v.back(), {1, 1}).flatten(1);
    return {v.back(), matmul(pooled, tensors_[static_cast<size_t>(head_)])};
  }

  std::string describe() const {
    static const char* names[] = {"conv", "bn", "act", "add", "maxpool", "avgpool", "cat"};
    std::string s;
    for (const Step& st : steps_) {
      s += std::string(names[st.kind]) + "(" + std::to_string(st.a);
      if (st.kind == Step::conv)
        s += ", k" + std::to_string(st.k) + " s" + std::to_string(st.stride) + " p" +
             std::to_string(st.pad) + " d" + std::to_string(st.dilation) + " g" +
             std::to_string(st.groups);
      s += ") ";
    }
    return s;
  }

 private:
  int add(Tensor t, bool buffer = false) {
    const std::string name = "t" + std::to_string(tensors_.size());
    tensors_.push_back(buffer ? register_buffer(name, t) : register_parameter(name, t));
    return static_cast<int>(tensors_.size()) - 1;
  }

  std::vector<Feature> features_;
  std::vector<Step> steps_;
  std::vector<Tensor> tensors_;
  int head_ = -1;
};

// Programs `first_seed`.. on [batch, channels, side, side] inputs, compiled for `device`: both
// outputs and the gradients of a weighted sum of them (the input's and every parameter's)
// against eager on the CPU, within `tolerance` of each one's scale.
void expect_cnns_match_eager(uint32_t first_seed, int count, Device device, double tolerance) {
  for (uint32_t seed = first_seed; seed < first_seed + static_cast<uint32_t>(count); ++seed) {
    manual_seed(seed);
    std::mt19937 shape(seed * 7919u);
    const int64_t batch = 1 + static_cast<int64_t>(shape() % 3);
    const int64_t channels = 1 + static_cast<int64_t>(shape() % 8);
    const int64_t side = 5 + static_cast<int64_t>(shape() % 24);
    auto program = std::make_shared<RandomCnn>(seed, channels, side);
    program->eval();
    const Tensor x0 = randn({batch, channels, side, side});
    std::vector<Tensor> weights;
    auto run = [&](const std::function<std::vector<Tensor>(const Tensor&)>& call, Device on) {
      program->zero_grad();
      Tensor x = x0.clone().to(on).requires_grad_();
      std::vector<Tensor> outs = call(x);
      if (weights.empty())
        for (const Tensor& o : outs) weights.push_back(randn(o.shape()));
      Tensor loss = sum(outs[0] * weights[0].to(on)) + sum(outs[1] * weights[1].to(on));
      loss.backward();
      std::vector<Tensor> r{outs[0].detach(), outs[1].detach(), x.grad()};
      for (const Tensor& p : program->parameters()) r.push_back(p.grad());
      return test::on_cpu(r);
    };
    const std::vector<Tensor> eager =
        run([&](const Tensor& x) { return (*program)(std::vector<Tensor>{x}); }, Device::cpu());
    program->to(device);
    CompiledModule fast = compile(program);
    const std::vector<Tensor> got =
        run([&](const Tensor& x) { return fast(std::vector<Tensor>{x}); }, device);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", [" + std::to_string(batch) + ", " +
                 std::to_string(channels) + ", " + std::to_string(side) + ", " +
                 std::to_string(side) + "]: " + program->describe());
    ASSERT_EQ(got.size(), eager.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].defined(), eager[i].defined()) << "result " << i;
      if (!eager[i].defined()) continue;
      ASSERT_EQ(got[i].shape(), eager[i].shape()) << "result " << i;
      EXPECT_LE(test::scaled_error(got[i], eager[i]), tolerance)
          << "result " << i << " (0, 1: the outputs; 2: the input's gradient)";
    }
    // Inference (no gradients): its own executable, convolutions over dying residuals. Three
    // calls, then three after every parameter changed in place (a convolution keeps its weight
    // converted from its second call while the weight's storage and version stay).
    NoGradGuard no_grad;
    for (int round = 0; round < 2; ++round) {
      std::vector<Tensor> want{eager[0], eager[1]};
      if (round == 1) {
        for (const Tensor& p : program->parameters()) assign_values(p, p * -0.7);
        want = (*program)(std::vector<Tensor>{x0.to(device)});
      }
      std::vector<Tensor> out;
      for (int call = 0; call < 3; ++call) out = fast(std::vector<Tensor>{x0.to(device)});
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_LE(test::scaled_error(out[i], want[i]), tolerance)
            << "inference output " << i << (round ? ", new weights" : "");
      }
    }
  }
}

TEST(CnnRandom, ProgramsAndGradientsMatchEager) {
  const int64_t kept = compiler::stats().weights_kept;
  expect_cnns_match_eager(1, test::scaled_count(30), Device::cpu(), 1e-4);
  // The inference calls kept converted weights, which the change in place then replaced.
  if (cpu::onednn_conv_available()) {
    EXPECT_GT(compiler::stats().weights_kept, kept);
  }
}

TEST(CnnRandom, ProgramsAndGradientsMatchTheCpuOnCuda) {
  ZC_SKIP_WITHOUT_GPU();
  // f32 convolutions (TF32 is an option, off by default: docs/adr/0030).
  expect_cnns_match_eager(1, test::scaled_count(30), Device::cuda(0), 1e-3);
}

}  // namespace
}  // namespace zc
