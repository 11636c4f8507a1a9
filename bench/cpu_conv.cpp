// ResNet-50's 53 convolutions (batch 1, 224x224, f32) in sequence, each with its own weights
// as in the network, through oneDNN in three layouts: [N, C, H, W] (oneDNN's columns and GEMM),
// channels-last [N, H, W, C] (what zc runs, docs/adr/0029) and oneDNN's own blocked layout
// (nChw16c on AVX-512, what a blocked-layout pass would keep between layers), with the ReLU
// post-op, at 1..all threads; and with Winograd for the 3x3 stride-1 convolutions of at least
// 28x28 outputs, in the blocked layout throughout or channels-last converted to and from it
// around each (what zc runs on few threads, docs/adr/0036). It says how far the kernels alone
// are from a peer's whole call, and what keeping a blocked layout across layers would buy.
//
//   cpu_conv --benchmark_format=json   (the time per sequence, in ms)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct Conv {
  int64_t ic, oc, hw, k, stride, pad, count;
};

// (in channels, out channels, input size, kernel, stride, padding, how many in the network)
const std::vector<Conv> kResNet50 = {
    {3, 64, 224, 7, 2, 3, 1},     {64, 64, 56, 1, 1, 0, 1},    {64, 64, 56, 3, 1, 1, 3},
    {64, 256, 56, 1, 1, 0, 4},    {256, 64, 56, 1, 1, 0, 2},   {256, 128, 56, 1, 1, 0, 1},
    {128, 128, 56, 3, 2, 1, 1},   {128, 128, 28, 3, 1, 1, 3},  {128, 512, 28, 1, 1, 0, 4},
    {256, 512, 56, 1, 2, 0, 1},   {512, 128, 28, 1, 1, 0, 3},  {512, 256, 28, 1, 1, 0, 1},
    {256, 256, 28, 3, 2, 1, 1},   {256, 256, 14, 3, 1, 1, 5},  {256, 1024, 14, 1, 1, 0, 6},
    {512, 1024, 28, 1, 2, 0, 1},  {1024, 256, 14, 1, 1, 0, 5}, {1024, 512, 14, 1, 1, 0, 1},
    {512, 512, 14, 3, 2, 1, 1},   {512, 512, 7, 3, 1, 1, 2},   {512, 2048, 7, 1, 1, 0, 3},
    {1024, 2048, 14, 1, 2, 0, 1}, {2048, 512, 7, 1, 1, 0, 2},
};

struct Step {
  dnnl::convolution_forward prim;
  std::unordered_map<int, memory> args;
  // Layout 4's Winograd steps: the channels-last input into the blocked one, the blocked
  // output back.
  std::vector<std::tuple<dnnl::reorder, memory, memory>> before, after;
};

// layout 0: [N, C, H, W]; 1: [N, H, W, C]; 2: oneDNN's choice; 3: oneDNN's choice with
// Winograd for the 3x3 stride-1 convolutions of at least 28x28 outputs; 4: [N, H, W, C] with
// those convolutions as Winograd, converted around each (what zc does on few threads).
std::vector<Step> network(const dnnl::engine& eng, int layout) {
  std::vector<Step> steps;
  const auto f32 = memory::data_type::f32;
  const Tag act = layout == 0 ? Tag::nchw : layout == 1 || layout == 4 ? Tag::nhwc : Tag::any;
  for (const Conv& c : kResNet50) {
    for (int64_t r = 0; r < c.count; ++r) {
      const int64_t o = (c.hw + 2 * c.pad - c.k) / c.stride + 1;
      const bool winograd = layout >= 3 && c.k == 3 && c.stride == 1 && o * o >= 28 * 28;
      const Tag conv_act = winograd ? Tag::any : act;
      const memory::desc src({1, c.ic, c.hw, c.hw}, f32, conv_act),
          dst({1, c.oc, o, o}, f32, conv_act);
      const memory::desc w({c.oc, c.ic, c.k, c.k}, f32, Tag::any), b({c.oc}, f32, Tag::a);
      dnnl::post_ops post;
      post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(post);
      const dnnl::convolution_forward::primitive_desc pd(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                          winograd ? dnnl::algorithm::convolution_winograd
                                                   : dnnl::algorithm::convolution_direct,
                                          src, w, b, dst, {c.stride, c.stride}, {c.pad, c.pad},
                                          {c.pad, c.pad}),
          attr, eng);
      Step s{dnnl::convolution_forward(pd), {}, {}, {}};
      for (auto [arg, desc] :
           {std::pair{DNNL_ARG_SRC, pd.src_desc()}, std::pair{DNNL_ARG_WEIGHTS, pd.weights_desc()},
            std::pair{DNNL_ARG_BIAS, b}, std::pair{DNNL_ARG_DST, pd.dst_desc()}}) {
        memory m(desc, eng);
        float* p = static_cast<float*>(m.get_data_handle());
        std::fill(p, p + desc.get_size() / sizeof(float), 0.01f);
        s.args.emplace(arg, m);
      }
      if (winograd && layout == 4) {
        const memory from({{1, c.ic, c.hw, c.hw}, f32, Tag::nhwc}, eng);
        const memory to({{1, c.oc, o, o}, f32, Tag::nhwc}, eng);
        float* p = static_cast<float*>(from.get_data_handle());
        std::fill(p, p + from.get_desc().get_size() / sizeof(float), 0.01f);
        const memory& conv_src = s.args.at(DNNL_ARG_SRC);
        const memory& conv_dst = s.args.at(DNNL_ARG_DST);
        s.before.emplace_back(dnnl::reorder(from, conv_src), from, conv_src);
        s.after.emplace_back(dnnl::reorder(conv_dst, to), conv_dst, to);
      }
      steps.push_back(std::move(s));
    }
  }
  return steps;
}

void BM_ResNet50Convolutions(benchmark::State& state) {
  const int layout = static_cast<int>(state.range(0));
  omp_set_num_threads(static_cast<int>(state.range(1)));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  std::vector<Step> steps = network(eng, layout);
  for (auto _ : state) {
    for (Step& s : steps) {
      for (auto& [r, from, to] : s.before) r.execute(stream, from, to);
      s.prim.execute(stream, s.args);
      for (auto& [r, from, to] : s.after) r.execute(stream, from, to);
    }
    stream.wait();
  }
  state.SetLabel(layout == 0   ? "nchw"
                 : layout == 1 ? "nhwc"
                 : layout == 2 ? "blocked"
                 : layout == 3 ? "blocked+winograd"
                               : "nhwc+winograd");
}

void Args(benchmark::internal::Benchmark* b) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int layout = 0; layout < 5; ++layout) {
    for (int t = 1; t <= cores; t *= 2) b->Args({layout, t});
    if ((cores & (cores - 1)) != 0) b->Args({layout, cores});
  }
}

BENCHMARK(BM_ResNet50Convolutions)
    ->Apply(Args)
    ->ArgNames({"layout", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
