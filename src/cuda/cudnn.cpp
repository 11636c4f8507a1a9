#include "cuda/cudnn.h"

#include <dlfcn.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/device.h"
#include "cuda/driver.h"
#include "util/env.h"
#include "util/log.h"
#include "zc/error.h"

namespace zc::cuda {

namespace {

// ---- The subset of cuDNN 9's API zc calls, declared here (cudnn_graph.h, cudnn_ops.h,
// cudnn_cnn.h): opaque handles, and the enum values zc passes, which cuDNN keeps fixed.
using Status = int;  // cudnnStatus_t; 0 is CUDNN_STATUS_SUCCESS
using Handle = struct HandleStruct*;
using TensorDesc = struct TensorStruct*;
using FilterDesc = struct FilterStruct*;
using ConvDesc = struct ConvStruct*;
using ActDesc = struct ActStruct*;

enum : int { kFloat = 0, kDouble = 1, kHalf = 2, kBfloat16 = 9 };   // cudnnDataType_t
enum : int { kNchw = 0 };                                           // cudnnTensorFormat_t
enum : int { kCrossCorrelation = 1 };                               // cudnnConvolutionMode_t
enum : int { kDefaultMath = 0, kFmaMath = 3 };                      // cudnnMathType_t
enum : int { kRelu = 1, kIdentity = 5 };                            // cudnnActivationMode_t
enum : int { kImplicitPrecompGemm = 1, kFft = 4, kFftTiling = 5 };  // cudnnConvolutionFwdAlgo_t
enum : int { kPropagateNan = 1 };                                   // cudnnNanPropagation_t
constexpr const char* kAlgoNames[] = {
    "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
    "winograd",      "winograd_nonfused"};

struct AlgoPerf {  // cudnnConvolutionFwdAlgoPerf_t
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

#define ZC_CUDNN_FUNCTIONS(X)                                                                     \
  X(cudnnGetVersion, size_t, (void))                                                              \
  X(cudnnGetErrorString, const char*, (Status))                                                   \
  X(cudnnCreate, Status, (Handle*))                                                               \
  X(cudnnSetStream, Status, (Handle, CUstream))                                                   \
  X(cudnnCreateTensorDescriptor, Status, (TensorDesc*))                                           \
  X(cudnnSetTensor4dDescriptorEx, Status,                                                         \
    (TensorDesc, int, int, int, int, int, int, int, int, int))                                    \
  X(cudnnDestroyTensorDescriptor, Status, (TensorDesc))                                           \
  X(cudnnCreateFilterDescriptor, Status, (FilterDesc*))                                           \
  X(cudnnSetFilter4dDescriptor, Status, (FilterDesc, int, int, int, int, int, int))               \
  X(cudnnDestroyFilterDescriptor, Status, (FilterDesc))                                           \
  X(cudnnCreateConvolutionDescriptor, Status, (ConvDesc*))                                        \
  X(cudnnSetConvolution2dDescriptor, Status, (ConvDesc, int, int, int, int, int, int, int, int))  \
  X(cudnnSetConvolutionGroupCount, Status, (ConvDesc, int))                                       \
  X(cudnnSetConvolutionMathType, Status, (ConvDesc, int))                                         \
  X(cudnnDestroyConvolutionDescriptor, Status, (ConvDesc))                                        \
  X(cudnnCreateActivationDescriptor, Status, (ActDesc*))                                          \
  X(cudnnSetActivationDescriptor, Status, (ActDesc, int, int, double))                            \
  X(cudnnDestroyActivationDescriptor, Status, (ActDesc))                                          \
  X(cudnnGetConvolutionForwardAlgorithm_v7, Status,                                               \
    (Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc, int, int*, AlgoPerf*))                 \
  X(cudnnGetConvolutionForwardWorkspaceSize, Status,                                              \
    (Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc, int, size_t*))                         \
  X(cudnnConvolutionForward, Status,                                                              \
    (Handle, const void*, TensorDesc, const void*, FilterDesc, const void*, ConvDesc, int, void*, \
     size_t, const void*, TensorDesc, void*))                                                     \
  X(cudnnConvolutionBiasActivationForward, Status,                                                \
    (Handle, const void*, TensorDesc, const void*, FilterDesc, const void*, ConvDesc, int, void*, \
     size_t, const void*, TensorDesc, const void*, TensorDesc, const void*, ActDesc, TensorDesc,  \
     void*))                                                                                      \
  X(cudnnAddTensor, Status,                                                                       \
    (Handle, const void*, TensorDesc, const void*, const void*, TensorDesc, void*))               \
  X(cudnnActivationForward, Status,                                                               \
    (Handle, ActDesc, const void*, TensorDesc, const void*, const void*, TensorDesc, void*))      \
  X(cudnnTransformTensor, Status,                                                                 \
    (Handle, const void*, TensorDesc, const void*, const void*, TensorDesc, void*))

struct Api {
#define ZC_CUDNN_MEMBER(name, ret, args) ret(*name) args = nullptr;
  ZC_CUDNN_FUNCTIONS(ZC_CUDNN_MEMBER)
#undef ZC_CUDNN_MEMBER
};

struct Found {
  std::optional<toolchain::LibraryFile> file;
  std::string why;
};

const Found& found() {
  static const Found* const f = [] {
    auto* out = new Found();
    const std::vector<std::string> dirs = toolchain::cuda_library_dirs();
    out->file = toolchain::find_library_file(dirs, {"libcudnn.so.9", "libcudnn.so"});
    if (!out->file) {
      std::string where;
      for (const std::string& d : dirs) where += (where.empty() ? "" : ", ") + d;
      out->why =
          "cuDNN 9 (libcudnn.so.9), which zc uses for convolutions on a GPU, was not "
          "found in " +
          where +
          "; install it (the toolkit's, or pip's nvidia-cudnn-cu13 with its lib "
          "directory in LD_LIBRARY_PATH)";
    }
    return out;
  }();
  return *f;
}

struct Loaded {
  Api api;
  std::string error;  // empty when usable
};

// Never destroyed, like the driver: a convolution queued while the process exits still finds it.
const Loaded& loaded() {
  static const Loaded* const l = [] {
    auto* out = new Loaded();
    const Found& f = found();
    if (!f.file) {
      out->error = f.why;
      return out;
    }
    const auto start = std::chrono::steady_clock::now();
    void* lib = dlopen(f.file->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      out->error = "cuDNN at " + f.file->path +
                   " could not be loaded: " + (err ? err : "dlopen failed") +
                   "; leave ZC_CUDA_CONV unset to do without it";
      return out;
    }
    std::string missing;
#define ZC_CUDNN_RESOLVE(name, ret, args)                                       \
  out->api.name = reinterpret_cast<decltype(out->api.name)>(dlsym(lib, #name)); \
  if (!out->api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    ZC_CUDNN_FUNCTIONS(ZC_CUDNN_RESOLVE)
#undef ZC_CUDNN_RESOLVE
    if (!missing.empty()) {
      out->error = "cuDNN at " + f.file->path + " lacks " + missing +
                   "; zc needs cuDNN 9 (or ZC_CUDA_CONV unset)";
      return out;
    }
    ZC_LOG(timing) << "cudnn " << f.file->path << " (version " << out->api.cudnnGetVersion()
                   << ") loaded in "
                   << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                start)
                          .count()
                   << " ms";
    return out;
  }();
  return *l;
}

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(l.error);
  return l.api;
}

void check(Status s, const std::string& what) {
  if (s == 0) return;
  const char* text = api().cudnnGetErrorString(s);
  throw Error("cuDNN: " + what + " failed: " + (text ? text : "status " + std::to_string(s)));
}

// One handle per device, made on first use with the device current; calls through it are
// serialized by its mutex (a handle has one stream at a time).
struct DeviceHandle {
  std::mutex mu;
  Handle handle = nullptr;
};

DeviceHandle& dnn_handle(int device) {
  static std::mutex mu;
  static std::map<int, DeviceHandle*> handles;  // never destroyed (see loaded())
  std::lock_guard lock(mu);
  DeviceHandle*& h = handles[device];
  if (!h) {
    const auto start = std::chrono::steady_clock::now();
    auto* made = new DeviceHandle();
    use_device(device);
    check(api().cudnnCreate(&made->handle), "cudnnCreate on cuda:" + std::to_string(device));
    ZC_LOG(timing) << "cudnn handle on cuda:" << device << " in "
                   << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                start)
                          .count()
                   << " ms";
    h = made;
  }
  return *h;
}

int data_type(DType t) {
  switch (t) {
    case DType::f32:
      return kFloat;
    case DType::f64:
      return kDouble;
    case DType::f16:
      return kHalf;
    case DType::bf16:
      return kBfloat16;
    default:
      throw Error("cuDNN convolutions take f32, f64, f16 or bf16, got " +
                  std::string(dtype_name(t)));
  }
}

int narrow(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX) {
    throw Error(std::string("a convolution's ") + what + " (" + std::to_string(v) +
                ") is beyond cuDNN's 32-bit descriptors");
  }
  return static_cast<int>(v);
}

TensorDesc tensor(int type, const std::array<int64_t, 4>& dims,
                  const std::array<int64_t, 4>& strides) {
  TensorDesc d = nullptr;
  check(api().cudnnCreateTensorDescriptor(&d), "a tensor descriptor");
  check(
      api().cudnnSetTensor4dDescriptorEx(
          d, type, narrow(dims[0], "batch"), narrow(dims[1], "channels"), narrow(dims[2], "height"),
          narrow(dims[3], "width"), narrow(strides[0], "stride"), narrow(strides[1], "stride"),
          narrow(strides[2], "stride"), narrow(strides[3], "stride")),
      "a tensor descriptor");
  return d;
}

std::array<int64_t, 4> dense(const std::array<int64_t, 4>& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace

std::optional<toolchain::LibraryFile> find_cudnn(std::string* why) {
  const Found& f = found();
  if (!f.file && why) *why = f.why;
  return f.file;
}

std::string cudnn_identity() {
  const Found& f = found();
  return f.file ? f.file->identity("cudnn") : "";
}

bool cudnn_convolutions() {
  static const bool on = [] {
    return env::get(env::Var::cuda_conv) == "cudnn" && found().file.has_value();
  }();
  return on;
}

struct ConvPlan::State {
  ConvProblem p;
  int device = 0;
  int type = kFloat;
  bool fused = false;     // cudnnConvolutionBiasActivationForward
  bool pad_copy = false;  // the input padded into the scratch first
  size_t pad_bytes = 0;   // that copy's bytes (at the scratch's start)
  bool w_copy = false;    // the weight copied dense into the scratch, after the input's copy
  size_t w_bytes = 0;
  int algo = 0;
  size_t conv_bytes = 0;  // cuDNN's workspace, after the copy
  TensorDesc x = nullptr, x_in = nullptr, x_pad = nullptr, y = nullptr, bias = nullptr, z = nullptr,
             w_in = nullptr, w_dense = nullptr;
  FilterDesc w = nullptr;
  ConvDesc conv = nullptr;
  ActDesc act = nullptr;
};

ConvPlan::ConvPlan(const ConvProblem& p, int device) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.p = p;
  s.device = device;
  s.type = data_type(p.dtype);
  const Api& a = api();
  Handle h = dnn_handle(device).handle;
  // The descriptors: x as it lies, or (padding cuDNN cannot express) the padded copy's.
  s.pad_copy = p.pad_top != p.pad_bottom || p.pad_left != p.pad_right;
  s.x_in = tensor(s.type, p.x, p.x_strides);
  int64_t ph = p.pad_top, pw = p.pad_left;
  if (s.pad_copy) {
    const std::array<int64_t, 4> padded{p.x[0], p.x[1], p.x[2] + p.pad_top + p.pad_bottom,
                                        p.x[3] + p.pad_left + p.pad_right};
    s.x_pad = tensor(s.type, p.x, dense(padded));  // the copy's interior, in padded strides
    s.x = tensor(s.type, padded, dense(padded));
    s.pad_bytes = aligned(static_cast<size_t>(padded[0] * padded[1] * padded[2] * padded[3]) *
                          dtype_size(p.dtype));
    ph = pw = 0;
  } else {
    s.x = s.x_in;
  }
  s.w_copy = p.w_strides != dense(p.w);
  if (s.w_copy) {
    s.w_in = tensor(s.type, p.w, p.w_strides);
    s.w_dense = tensor(s.type, p.w, dense(p.w));
    s.w_bytes =
        aligned(static_cast<size_t>(p.w[0] * p.w[1] * p.w[2] * p.w[3]) * dtype_size(p.dtype));
  }
  check(a.cudnnCreateFilterDescriptor(&s.w), "a filter descriptor");
  check(a.cudnnSetFilter4dDescriptor(s.w, s.type, kNchw, narrow(p.w[0], "filters"),
                                     narrow(p.w[1], "channels"), narrow(p.w[2], "kernel"),
                                     narrow(p.w[3], "kernel")),
        "a filter descriptor");
  check(a.cudnnCreateConvolutionDescriptor(&s.conv), "a convolution descriptor");
  const int compute = p.dtype == DType::f64 ? kDouble : kFloat;
  check(a.cudnnSetConvolution2dDescriptor(
            s.conv, narrow(ph, "padding"), narrow(pw, "padding"), narrow(p.stride_h, "stride"),
            narrow(p.stride_w, "stride"), narrow(p.dilation_h, "dilation"),
            narrow(p.dilation_w, "dilation"), kCrossCorrelation, compute),
        "a convolution descriptor");
  check(a.cudnnSetConvolutionGroupCount(s.conv, narrow(p.groups, "groups")), "groups");
  // f32 in full precision (no TF32) unless the problem allows TF32; 16-bit types may use tensor
  // cores, accumulating in f32.
  check(a.cudnnSetConvolutionMathType(s.conv,
                                      p.dtype == DType::f32 && !p.tf32 ? kFmaMath : kDefaultMath),
        "the math type");
  s.y = tensor(s.type, p.y, dense(p.y));
  if (p.bias) {
    // [K] as [1, K, 1, 1] (broadcast over the rest).
    s.bias = tensor(s.type, {1, p.y[1], 1, 1},
                    {p.y[1] * p.bias_stride, p.bias_stride, p.bias_stride, p.bias_stride});
  }
  if (p.residual) s.z = tensor(s.type, p.y, p.z_strides);
  // The bias, residual and ReLU inside cuDNN's call where it computes them: f32 with a bias.
  // Otherwise they follow the convolution as cuDNN tensor ops on its output.
  s.fused = p.dtype == DType::f32 && p.bias;
  if (p.relu || s.fused) {
    check(a.cudnnCreateActivationDescriptor(&s.act), "an activation descriptor");
    check(a.cudnnSetActivationDescriptor(s.act, p.relu ? kRelu : kIdentity, kPropagateNan, 0.0),
          "an activation");
  }
  // The algorithm: cuDNN's heuristic ranking (no timing, like torch's default), the first that
  // runs within a bounded scratch.
  constexpr size_t kMaxWorkspace = size_t{512} << 20;
  AlgoPerf perf[8] = {};
  int returned = 0;
  check(a.cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 8, &returned, perf),
        "choosing an algorithm for " + describe());
  // The fused call without a ReLU runs only IMPLICIT_PRECOMP_GEMM (cuDNN's rule). FFT
  // algorithms are never taken: hundreds of MB of scratch per convolution.
  const bool identity = s.fused && !p.relu;
  bool chosen = false;
  for (int i = 0; i < returned && !chosen; ++i) {
    if (perf[i].status != 0 || perf[i].algo == kFft || perf[i].algo == kFftTiling) continue;
    if (identity && perf[i].algo != kImplicitPrecompGemm) continue;
    size_t bytes = 0;
    if (a.cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y, perf[i].algo, &bytes) !=
            0 ||
        bytes > kMaxWorkspace) {
      continue;
    }
    s.algo = perf[i].algo;
    s.conv_bytes = aligned(bytes);
    chosen = true;
  }
  if (!chosen) throw Error("cuDNN has no algorithm for " + describe());
}

ConvPlan::~ConvPlan() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return;
  const Api& a = l.api;
  State& s = *s_;
  for (TensorDesc d : {s.x_pad, s.y, s.bias, s.z, s.w_in, s.w_dense}) {
    if (d) a.cudnnDestroyTensorDescriptor(d);
  }
  if (s.x) a.cudnnDestroyTensorDescriptor(s.x);
  if (s.x_in && s.x_in != s.x) a.cudnnDestroyTensorDescriptor(s.x_in);
  if (s.w) a.cudnnDestroyFilterDescriptor(s.w);
  if (s.conv) a.cudnnDestroyConvolutionDescriptor(s.conv);
  if (s.act) a.cudnnDestroyActivationDescriptor(s.act);
}

size_t ConvPlan::workspace_bytes() const {
  return s_->pad_bytes + s_->w_bytes + s_->conv_bytes;
}

std::string ConvPlan::describe() const {
  const ConvProblem& p = s_->p;
  auto dims = [](const std::array<int64_t, 4>& d) {
    return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
           ", " + std::to_string(d[3]) + "]";
  };
  std::string out = std::string(dtype_name(p.dtype)) + " conv " + dims(p.x) + " * " + dims(p.w) +
                    " -> " + dims(p.y) + " (stride " + std::to_string(p.stride_h) + "x" +
                    std::to_string(p.stride_w) + ", groups " + std::to_string(p.groups) + ")";
  if (s_->conv_bytes > 0 || s_->algo > 0) {
    const int algo = s_->algo;
    out += ": " + std::string(algo >= 0 && algo < 8 ? kAlgoNames[algo] : "algorithm") + ", " +
           std::to_string(workspace_bytes()) + " bytes of scratch";
  }
  return out;
}

void ConvPlan::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, CUdeviceptr residual,
                   CUdeviceptr y, CUdeviceptr workspace, CUstream stream) const {
  const State& s = *s_;
  const Api& a = api();
  DeviceHandle& dh = dnn_handle(s.device);
  std::lock_guard lock(dh.mu);
  check(a.cudnnSetStream(dh.handle, stream), "cudnnSetStream");
  // Scaling factors are double for f64 data, float otherwise.
  const float f1 = 1, f0 = 0;
  const double d1 = 1, d0 = 0;
  const void* one = s.type == kDouble ? static_cast<const void*>(&d1) : &f1;
  const void* zero = s.type == kDouble ? static_cast<const void*>(&d0) : &f0;
  auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  CUdeviceptr input = x;
  if (s.pad_copy) {
    const ConvProblem& p = s.p;
    check(driver().cuMemsetD8Async(workspace, 0, s.pad_bytes, stream), "zeroing the padding");
    const int64_t wp = p.x[3] + p.pad_left + p.pad_right;
    const int64_t interior = p.pad_top * wp + p.pad_left;
    check(a.cudnnTransformTensor(dh.handle, one, s.x_in, ptr(x), zero, s.x_pad,
                                 ptr(workspace + interior * dtype_size(p.dtype))),
          "padding the input of " + describe());
    input = workspace;
  }
  CUdeviceptr weight = w;
  if (s.w_copy) {
    weight = workspace + s.pad_bytes;
    check(a.cudnnTransformTensor(dh.handle, one, s.w_in, ptr(w), zero, s.w_dense, ptr(weight)),
          "copying the weight of " + describe());
  }
  void* scratch = ptr(workspace + s.pad_bytes + s.w_bytes);
  if (s.fused) {
    // y = relu(conv(x) + z + bias), z = the residual or (scaled by 0) y itself.
    const float alpha2 = s.p.residual ? 1.0f : 0.0f;
    check(a.cudnnConvolutionBiasActivationForward(
              dh.handle, one, s.x, ptr(input), s.w, ptr(weight), s.conv, s.algo, scratch,
              s.conv_bytes, &alpha2, s.p.residual ? s.z : s.y, ptr(s.p.residual ? residual : y),
              s.bias, ptr(bias), s.act, s.y, ptr(y)),
          describe());
    return;
  }
  check(a.cudnnConvolutionForward(dh.handle, one, s.x, ptr(input), s.w, ptr(weight), s.conv, s.algo,
                                  scratch, s.conv_bytes, zero, s.y, ptr(y)),
        describe());
  if (s.p.bias) {
    check(a.cudnnAddTensor(dh.handle, one, s.bias, ptr(bias), one, s.y, ptr(y)),
          "adding the bias of " + describe());
  }
  if (s.p.residual) {
    check(a.cudnnAddTensor(dh.handle, one, s.z, ptr(residual), one, s.y, ptr(y)),
          "adding the residual of " + describe());
  }
  if (s.p.relu) {
    check(a.cudnnActivationForward(dh.handle, s.act, one, s.y, ptr(y), zero, s.y, ptr(y)),
          "the ReLU of " + describe());
  }
}

}  // namespace zc::cuda
