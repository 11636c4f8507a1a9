// Every op of the registry on CUDA tensors against the same op on the CPU: each case builds its
// inputs on the CPU, builds the *same views* on the GPU (each view's packed base tensor moved
// with .to(Device::cuda(0)), then the same view ops applied there: a strided view copied with
// .to() would arrive contiguous and test nothing), runs the op on both, copies the GPU result
// back and compares dtype, shape and every element. Where the CPU refuses a call with a
// zc::Error, the GPU must refuse it too. Without a usable GPU every test is skipped.
//
// Input kinds, as in the CPU op tests (ops_*_test.cpp), every one made with the library's view
// ops: contiguous; column-major (a permute reversing the dims of a packed tensor); strided
// (every dim sliced with step 2 out of a tensor twice as large, junk in the gaps); transpose of
// the last two dims (in 2-D the column-major layout); a rotating permute; a step-2 slice of a
// taller tensor with junk in the skipped rows; broadcast (expand of size-1 dims); size-1 dims;
// 0-dim tensors on the GPU; numbers (0-dim CPU tensors and wrapped C++ numbers, which stay on
// the CPU and mix with CUDA tensors); and large (1 << 20 elements, reduction rows of 4096).
// Junk is NaN for floating types and 77 (true) otherwise, so a kernel that reads a skipped
// element shows.
//
// Tolerances: an element passes when |cuda - cpu| <= atol + rtol * max(|cpu|, scale), where
// scale is |a| @ |b| for matmuls (the bound of a dot product's rounding error, equal to |cpu|
// when nothing cancels) and 0 otherwise. NaN must meet NaN, an infinity the same infinity.
//   exact:      integers and bool, and every op that moves or selects values rather than
//               computing them (cast, views and copies, where, cat, embedding, amax, amin,
//               argmax): both devices must agree to the bit
//   elementwise f32   rtol 1e-5,  atol 1e-6  (the GPU's expf/tanhf/erff are within 2 ulp; the
//                                             atol covers 1 + erf(x) cancelling in gelu)
//   accumulated f32   rtol 1e-4,  atol 1e-5  (reductions, matmul, linear, softmax, layer_norm,
//                                             attention, models: another summation order)
//   f64               rtol 1e-10, atol 1e-12 elementwise, 1e-10 accumulated
//   f16               rtol 1e-3 (one ulp: both devices round a float result to f16, and a
//                     last-bit difference in float may flip that rounding), atol 1e-5
//                     elementwise and 1e-4 accumulated (results near 0)
//   bf16              rtol 1e-2 (one ulp of an 8-bit mantissa), atol 1e-4 / 1e-3
//
// Kernel compiles: the GPU compiles one kernel per (op, attributes, input dtypes and shapes), not
// per layout (strided inputs are made dense first), so every input kind of one shape shares a
// kernel. Each test prints how many cases it compared and an upper bound on the specializations
// they need (views compile nothing, and negative dims name the same kernel as positive ones). The
// first run on a machine pays for those compiles; later runs find them cached.
//
// ZC_CUDA_OPS_TEST_ON_CPU=1 runs every case with the CPU standing in for the GPU: a dry run of
// the cases and of the harness on a machine without a GPU (each comparison is then CPU against
// CPU, so it checks the test, not CUDA).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "unit/reference.h"
#include "zc/zc.h"

#if __has_include("zc/cuda.h")
#include "zc/cuda.h"
#endif

namespace {

using zc::Device;
using zc::DType;
using zc::Shape;
using zc::Tensor;
using zc::ref::Arr;

// ---------------------------------------------------------------------------------------------
// The device under test.

#if __has_include("zc/cuda.h")
bool cuda_available() {
  return zc::cuda::is_available();
}
#else
// Until zc/cuda.h lands: a GPU is usable when a tensor can be moved to it.
bool cuda_available() {
  try {
    return zc::ones({1}).to(Device::cuda(0)).device().is_cuda();
  } catch (const zc::Error&) {
    return false;
  }
}
#endif

bool dry_run() {
  const char* v = std::getenv("ZC_CUDA_OPS_TEST_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

Device test_device() {
  return dry_run() ? Device::cpu() : Device::cuda(0);
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dry_run() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v{DType::f32, DType::f64, DType::f16,    DType::bf16,
                                    DType::i64, DType::i32, DType::boolean};
  return v;
}
const std::vector<DType>& float_dtypes() {
  return zc::ref::float_dtypes();
}

std::string name_of(DType t) {
  return zc::ref::name_of(t);
}
std::string show(const Shape& s) {
  return zc::ref::show(s);
}
std::string meta(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return name_of(t.dtype()) + " " + show(t.shape()) + " on " + t.device().str();
}

// ---------------------------------------------------------------------------------------------
// Tolerances (see the top of the file).

enum class Acc { exact, pointwise, accumulate };

struct Tol {
  double rtol = 0, atol = 0;
};

Tol tolerance(Acc acc, DType t) {
  if (acc == Acc::exact || !zc::is_floating(t)) return {};
  const bool summed = acc == Acc::accumulate;
  switch (t) {
    case DType::f32:
      return summed ? Tol{1e-4, 1e-5} : Tol{1e-5, 1e-6};
    case DType::f64:
      return summed ? Tol{1e-10, 1e-10} : Tol{1e-10, 1e-12};
    case DType::f16:
      return summed ? Tol{1e-3, 1e-4} : Tol{1e-3, 1e-5};
    case DType::bf16:
      return summed ? Tol{1e-2, 1e-3} : Tol{1e-2, 1e-4};
    default:
      return {};
  }
}

// The logical (row-major) values of a CPU tensor.
std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  if (v.empty()) return v;
  const char* p = static_cast<const char*>(c.raw_data());
  const size_t es = zc::ref::elem_size(c.dtype());
  for (size_t i = 0; i < v.size(); ++i) v[i] = zc::ref::load(p + i * es, c.dtype());
  return v;
}

// `got` (a CUDA result copied back) against `want` (the CPU's result), both on the CPU.
::testing::AssertionResult agree(const Tensor& got, const Tensor& want, Tol tol,
                                 const Tensor& scale = {}) {
  if (!got.defined()) return ::testing::AssertionFailure() << "the CUDA result is undefined";
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "CUDA gives " << name_of(got.dtype()) << " " << show(got.shape()) << ", the CPU "
           << name_of(want.dtype()) << " " << show(want.shape());
  }
  const std::vector<double> g = values(got), w = values(want);
  const std::vector<double> s = scale.defined() ? values(scale) : std::vector<double>();
  int64_t bad = 0;
  std::ostringstream msg;
  msg << std::setprecision(want.dtype() == DType::f64 ? 17 : 9);
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i], y = w[i];
    bool ok;
    double lim = 0;
    if (std::isnan(x) || std::isnan(y)) {
      ok = std::isnan(x) && std::isnan(y);
    } else if (std::isinf(x) || std::isinf(y)) {
      ok = x == y;
    } else {
      const double mag = std::max(std::fabs(y), s.empty() ? 0.0 : std::fabs(s[i]));
      lim = tol.atol + tol.rtol * mag;
      ok = std::fabs(x - y) <= lim;
    }
    if (!ok && ++bad <= 6) {
      msg << "\n  at " << show(zc::ref::unravel(static_cast<int64_t>(i), want.shape())) << ": cuda "
          << x << ", cpu " << y;
      if (lim > 0 || tol.atol > 0) msg << " (|diff| " << std::fabs(x - y) << " > " << lim << ")";
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream head;
  head << bad << " of " << g.size() << " elements of " << name_of(want.dtype()) << " "
       << show(want.shape()) << " differ (rtol " << tol.rtol << ", atol " << tol.atol << ")";
  return ::testing::AssertionFailure() << head.str() << msg.str();
}

// ---------------------------------------------------------------------------------------------
// Inputs: how to make one operand on a device. Everything is made on the CPU first; a GPU
// input is the same packed base moved with .to(), then the same view ops.

struct Input {
  std::string desc;                    // "f32 transpose [3,4,5]"
  std::function<Tensor(Device)> make;  // the operand on a device
  bool number = false;                 // a 0-dim CPU tensor: stays on the CPU in the CUDA run
};

using View = std::function<Tensor(const Tensor&)>;

Input from_base(std::string desc, Tensor base, View view) {
  return Input{std::move(desc),
               [base, view](Device d) { return view(d.is_cpu() ? base : base.to(d)); }};
}

double junk(DType dt) {
  return zc::is_floating(dt) ? std::numeric_limits<double>::quiet_NaN() : 77.0;
}

// `a` at the odd indices of a tensor twice as large in every dim, junk elsewhere.
Arr padded(const Arr& a, DType dt) {
  Arr p{a.shape, {}};
  for (auto& d : p.shape) d *= 2;
  p.v.assign(zc::ref::numel_of(p.shape), junk(dt));
  for (int64_t i = 0; i < a.numel(); ++i) {
    auto idx = zc::ref::unravel(i, a.shape);
    for (auto& x : idx) x = 2 * x + 1;
    p.v[zc::ref::ravel(idx, p.shape)] = a.v[i];
  }
  return p;
}

// `a`'s rows at the odd rows of a tensor with 2 * rows + 1 rows, junk rows between.
Arr tall(const Arr& a, DType dt) {
  Arr t{a.shape, {}};
  t.shape[0] = 2 * a.shape[0] + 1;
  t.v.assign(zc::ref::numel_of(t.shape), junk(dt));
  const int64_t row = a.shape[0] ? a.numel() / a.shape[0] : 0;
  for (int64_t k = 0; k < a.numel(); ++k) t.v[(2 * (k / row) + 1) * row + k % row] = a.v[k];
  return t;
}

// In 2-D the transpose is the column-major layout, so it stands for both.
std::vector<std::string> kinds_for_rank(int64_t nd) {
  if (nd == 0) return {"contiguous"};
  if (nd == 1) return {"contiguous", "strided", "slice_step2"};
  if (nd == 2) return {"contiguous", "transpose", "strided", "slice_step2"};
  return {"contiguous", "column_major", "strided", "transpose", "permute", "slice_step2"};
}

// `a` as dtype `dt` in one input kind.
Input of_kind(const std::string& kind, const Arr& a, DType dt) {
  const int64_t nd = a.dim();
  const std::string desc = name_of(dt) + " " + kind + " " + show(a.shape);
  Input in;
  if (kind == "contiguous") {
    in = from_base(desc, zc::ref::make(a, dt), [](const Tensor& b) { return b; });
  } else if (kind == "column_major" || kind == "permute") {
    // A packed tensor P with P.permute(perm) == a: reversed dims, or rotated ones.
    std::vector<int64_t> perm(nd);
    for (int64_t i = 0; i < nd; ++i) perm[i] = kind == "column_major" ? nd - 1 - i : (i + 1) % nd;
    in = from_base(desc, zc::ref::make(zc::ref::permuted_source(a, perm), dt),
                   [perm](const Tensor& b) { return b.permute(perm); });
  } else if (kind == "transpose") {
    // The last two dims swapped, as in k.transpose(-2, -1) (in 2-D: column-major).
    std::vector<int64_t> perm(nd);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[nd - 2], perm[nd - 1]);
    in = from_base(desc, zc::ref::make(zc::ref::permuted_source(a, perm), dt),
                   [nd](const Tensor& b) { return b.transpose(nd - 2, nd - 1); });
  } else if (kind == "strided") {
    in = from_base(desc, zc::ref::make(padded(a, dt), dt), [](const Tensor& b) {
      Tensor v = b;
      for (int64_t d = 0; d < b.dim(); ++d) v = v.slice(d, 1, b.size(d), 2);
      return v;
    });
  } else if (kind == "slice_step2") {
    in = from_base(desc, zc::ref::make(tall(a, dt), dt),
                   [](const Tensor& b) { return b.slice(0, 1, b.size(0), 2); });
  } else {
    ADD_FAILURE() << "unknown input kind " << kind;
  }
  // The view holds `a`, as the dtype stores it (a check of the harness itself).
  const std::vector<double> got = values(in.make(Device::cpu()));
  const std::vector<double> want = values(zc::ref::make(a, dt));
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i) {
    same = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
  }
  EXPECT_TRUE(same) << "the " << desc << " input does not hold its values";
  return in;
}

Input contiguous(const Arr& a, DType dt) {
  return of_kind("contiguous", a, dt);
}

std::vector<Input> every_kind(const Arr& a, DType dt) {
  std::vector<Input> r;
  for (const std::string& k : kinds_for_rank(a.dim())) r.push_back(of_kind(k, a, dt));
  return r;
}

// `small` (with size-1 dims) expanded to `to`: a stride-0 broadcast view.
Input expanded(const Arr& small, const Shape& to, DType dt) {
  return from_base(name_of(dt) + " expand " + show(small.shape) + "->" + show(to),
                   zc::ref::make(small, dt), [to](const Tensor& b) { return b.expand(to); });
}

// A 0-dim CPU tensor (not a wrapped number): it mixes with CUDA tensors and stays on the CPU.
Input cpu_scalar(double v, DType dt) {
  std::ostringstream d;
  d << name_of(dt) << " cpu-0-dim " << v;
  return Input{d.str(), [v, dt](Device) { return zc::scalar_tensor(v, dt); }, true};
}

// A C++ number, as the operators and the double overloads pass it.
Input number(double v) {
  std::ostringstream d;
  d << "number " << v;
  return Input{d.str(), [v](Device) { return zc::wrap_scalar(v); }, true};
}

// A packed tensor made by the factories (large inputs), viewed as `kind`.
Input large(const std::string& kind, Tensor base, View view = nullptr) {
  if (!view) view = [](const Tensor& b) { return b; };
  std::string desc = name_of(base.dtype()) + " large " + kind + " " + show(view(base).shape());
  return from_base(std::move(desc), std::move(base), std::move(view));
}

// Values for an op's domain: uniform in [lo, hi) for floating types, integers in [lo, hi] for
// integer types, {0, 1} for bool.
Arr draw(const Shape& s, double lo, double hi, DType dt) {
  if (dt == DType::boolean) return zc::ref::small_ints(s, 0, 1);
  if (zc::is_integral(dt)) {
    return zc::ref::small_ints(s, static_cast<int>(std::ceil(lo)),
                               static_cast<int>(std::floor(hi)));
  }
  return zc::ref::uniform(s, lo, hi);
}

// Multiples of 1/2 in [-1.5, 1.5] (floats) or integers in [-3, 3]: few distinct values, so
// maxima tie, and sums are exact in every dtype.
Arr ties(const Shape& s, DType dt) {
  if (dt == DType::boolean) return zc::ref::small_ints(s, 0, 1);
  Arr a = zc::ref::small_ints(s, -3, 3);
  if (zc::is_floating(dt)) {
    for (double& x : a.v) x /= 2;
  }
  return a;
}

// Infinities, NaN, signed zeros, tiny and large values.
Arr specials() {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return Arr{{10}, {inf, -inf, nan, 0.0, -0.0, 1e-30, 100, -100, 0.5, -2}};
}

// ---------------------------------------------------------------------------------------------
// Cases and the harness.

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  Case(std::string op, std::vector<Input> in, Fn fn, Acc acc = Acc::pointwise, Fn scale = nullptr)
      : op(std::move(op)),
        in(std::move(in)),
        fn(std::move(fn)),
        acc(acc),
        scale(std::move(scale)) {}
  std::string op;  // the op and its attributes: "sum dims=[0,2] keepdim=1"
  std::vector<Input> in;
  Fn fn;
  Acc acc;
  Fn scale;                  // an error scale computed from the CPU inputs, shaped like the result
  bool same_layout = false;  // views: the CUDA result has the CPU result's strides and aliasing
};

Fn unary_fn(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& v) { return f(v[0]); };
}
Fn binary_fn(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); };
}

struct Outcome {
  Tensor result;  // where the op put it
  Tensor host;    // the result on the CPU
  std::string error;
  bool zc_error = false;
};

Outcome attempt(const Fn& fn, const std::vector<Tensor>& in) {
  Outcome o;
  try {
    o.result = fn(in);
    if (o.result.defined()) o.host = o.result.to(Device::cpu());
  } catch (const zc::Error& e) {
    o.error = e.what();
    o.zc_error = true;
  } catch (const std::exception& e) {
    o.error = std::string("a non-zc exception: ") + e.what();
  }
  return o;
}

bool shares_storage(const Tensor& r, const std::vector<Tensor>& in) {
  for (const Tensor& t : in) {
    if (r.unsafe_impl()->storage && r.unsafe_impl()->storage == t.unsafe_impl()->storage) {
      return true;
    }
  }
  return false;
}

class Harness {
 public:
  explicit Harness(std::string family) : family_(std::move(family)) {}
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;
  ~Harness() {
    std::printf(
        "[ CudaOps  ] %s: %d cases compared, %d refused by both devices, at most %zu kernel "
        "specializations\n",
        family_.c_str(), compared_, refused_, keys_.size());
    if (compared_ == 0) ADD_FAILURE() << family_ << ": no case was compared";
  }

  template <class... Rest>
  void run(std::string op, std::vector<Input> in, Rest&&... rest) {
    run(Case(std::move(op), std::move(in), std::forward<Rest>(rest)...));
  }

  // A layout op: as run(), and the result has the CPU result's strides, offset and aliasing.
  void run_view(std::string op, std::vector<Input> in, Fn fn, Acc acc = Acc::exact) {
    Case c(std::move(op), std::move(in), std::move(fn), acc);
    c.same_layout = true;
    run(c);
  }

  void run(const std::vector<Case>& cases) {
    for (const Case& c : cases) run(c);
  }

  void run(const Case& c) {
    std::string label = c.op + "(";
    for (size_t i = 0; i < c.in.size(); ++i) label += (i ? ", " : "") + c.in[i].desc;
    label += ")";
    SCOPED_TRACE(label);
    const Device dev = test_device();
    std::vector<Tensor> host, moved;
    std::string key = c.op;
    for (const Input& in : c.in) {
      host.push_back(in.make(Device::cpu()));
      moved.push_back(in.make(dev));
      const Tensor &h = host.back(), &m = moved.back();
      const Device want_dev = in.number ? Device::cpu() : dev;
      if (m.device() != want_dev || m.dtype() != h.dtype() || m.shape() != h.shape() ||
          m.strides() != h.strides() || m.storage_offset() != h.storage_offset()) {
        ADD_FAILURE() << "input " << in.desc << " is not the same view on " << want_dev.str()
                      << ": strides " << show(m.strides()) << " offset " << m.storage_offset()
                      << " on " << m.device().str() << ", strides " << show(h.strides())
                      << " offset " << h.storage_offset() << " on the CPU";
        return;
      }
      key += "|" + name_of(h.dtype()) + show(h.shape()) + (in.number ? "n" : "") +
             (h.unsafe_impl()->wrapped_number ? "w" : "");
    }
    const Outcome want = attempt(c.fn, host);
    const Outcome got = attempt(c.fn, moved);
    if (!want.error.empty()) {
      ASSERT_TRUE(want.zc_error) << "the CPU raised " << want.error;
      ++refused_;
      EXPECT_TRUE(got.zc_error) << "the CPU refuses this call (" << want.error << ") but "
                                << dev.str() << " "
                                << (got.error.empty() ? "returns " + meta(got.result)
                                                      : "raised " + got.error);
      return;
    }
    if (!got.error.empty()) {
      ADD_FAILURE() << dev.str() << " raised " << got.error << "; the CPU returns "
                    << meta(want.result);
      return;
    }
    ++compared_;
    keys_.insert(key);
    EXPECT_EQ(got.result.device().str(), dev.str()) << "where the result lives";
    const Tensor scale = c.scale ? c.scale(host) : Tensor();
    EXPECT_TRUE(agree(got.host, want.result, tolerance(c.acc, want.result.dtype()), scale));
    if (c.same_layout) {
      EXPECT_EQ(show(got.result.strides()), show(want.result.strides())) << "result strides";
      EXPECT_EQ(got.result.storage_offset(), want.result.storage_offset()) << "result offset";
      EXPECT_EQ(shares_storage(got.result, moved), shares_storage(want.result, host))
          << "whether the result is a view of an input";
    }
    for (size_t i = 0; i < c.in.size(); ++i) {
      if (c.in[i].number) continue;
      EXPECT_TRUE(agree(moved[i].to(Device::cpu()), host[i], Tol{}))
          << "input " << i << " (" << c.in[i].desc << ") was modified";
    }
  }

 private:
  std::string family_;
  int compared_ = 0, refused_ = 0;
  std::set<std::string> keys_;
};

// ---------------------------------------------------------------------------------------------
// Elementwise unary ops and cast.

struct UnaryOp {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  double lo, hi;  // input domain
};

std::vector<UnaryOp> unary_ops() {
  using std::nullopt;
  return {
      {"neg", [](const Tensor& x) { return zc::neg(x); }, -3, 3},
      {"abs", [](const Tensor& x) { return zc::abs(x); }, -3, 3},
      {"exp", [](const Tensor& x) { return zc::exp(x); }, -5, 5},
      {"log", [](const Tensor& x) { return zc::log(x); }, 0.05, 20},
      {"sqrt", [](const Tensor& x) { return zc::sqrt(x); }, 0, 20},
      {"rsqrt", [](const Tensor& x) { return zc::rsqrt(x); }, 0.05, 20},
      {"tanh", [](const Tensor& x) { return zc::tanh(x); }, -4, 4},
      {"sigmoid", [](const Tensor& x) { return zc::sigmoid(x); }, -10, 10},
      {"relu", [](const Tensor& x) { return zc::relu(x); }, -2, 2},
      {"gelu", [](const Tensor& x) { return zc::gelu(x); }, -5, 5},
      {"gelu_tanh", [](const Tensor& x) { return zc::gelu(x, zc::GeluApprox::tanh); }, -5, 5},
      {"erf", [](const Tensor& x) { return zc::erf(x); }, -3, 3},
      {"clamp[-0.5,0.75]", [](const Tensor& x) { return zc::clamp(x, -0.5, 0.75); }, -2, 2},
      {"clamp[-2,3]", [](const Tensor& x) { return zc::clamp(x, -2.0, 3.0); }, -4, 4},
      {"clamp[0.25,]", [](const Tensor& x) { return zc::clamp(x, 0.25, nullopt); }, -2, 2},
      {"clamp[,-0.25]", [](const Tensor& x) { return zc::clamp(x, nullopt, -0.25); }, -2, 2},
      {"clamp[,]", [](const Tensor& x) { return zc::clamp(x, nullopt, nullopt); }, -2, 2},
  };
}

TEST_F(CudaOps, Unary) {
  Harness h("unary");
  zc::manual_seed(101);
  const Shape s3{3, 4, 5};
  for (const UnaryOp& u : unary_ops()) {
    std::vector<Case> cases;
    auto add = [&](std::vector<Input> in) {
      for (Input& i : in) cases.push_back(Case(u.name, {std::move(i)}, unary_fn(u.fn)));
    };
    // Every dtype in every layout; size-1 dims and 0-dim tensors in f32 and i64.
    for (DType dt : all_dtypes()) add(every_kind(draw(s3, u.lo, u.hi, dt), dt));
    for (DType dt : {DType::f32, DType::i64}) {
      add(every_kind(draw({1, 4, 1}, u.lo, u.hi, dt), dt));
      add({contiguous(draw({}, u.lo, u.hi, dt), dt)});
    }
    // Infinities, NaN and signed zeros, whatever the domain.
    for (DType dt : {DType::f32, DType::f64, DType::f16}) {
      add({contiguous(specials(), dt), of_kind("strided", specials(), dt)});
    }
    // Large: 1 << 20 elements, packed and in three views.
    Tensor big = zc::rand({1024, 1024}) * (u.hi - u.lo) + u.lo;
    add({large("contiguous", big)});
    if (u.name == "exp" || u.name == "gelu" || u.name == "relu") {
      Tensor tall_base = zc::rand({2049, 1024}) * (u.hi - u.lo) + u.lo;
      add({large("transpose", big, [](const Tensor& b) { return b.t(); }),
           large("slice_step2", tall_base,
                 [](const Tensor& b) { return b.slice(0, 1, b.size(0), 2); }),
           large("expand", zc::rand({1, 1024}) * (u.hi - u.lo) + u.lo, [](const Tensor& b) {
             return b.expand({1024, 1024});
           })});
    }
    if (u.name == "sigmoid" || u.name == "neg") {
      add({large("contiguous", big.to(u.name == "neg" ? DType::i64 : DType::f16))});
    }
    h.run(cases);
  }
}

TEST_F(CudaOps, Cast) {
  Harness h("cast");
  zc::manual_seed(102);
  // Values every dtype can hold (no integer overflow, nothing past f16's range), with zeros
  // for the way to bool and fractions for the truncation to integers.
  Arr x = zc::ref::uniform({3, 4, 5}, -300, 300);
  const std::vector<double> edge{0.0, -0.0, 0.5, -0.999, 255.5, 1.0 / 3, -7.25, 65.0};
  for (size_t i = 0; i < edge.size(); ++i) x.v[i * 7] = edge[i];
  const Arr xb = zc::ref::small_ints({3, 4, 5}, 0, 1);
  for (DType from : all_dtypes()) {
    for (DType to : all_dtypes()) {
      const std::string op = "cast to " + name_of(to);
      const Fn fn = unary_fn([to](const Tensor& t) { return zc::cast(t, to); });
      const Arr& src = from == DType::boolean ? xb : x;
      std::vector<Case> cases;
      for (Input& i : every_kind(src, from))
        cases.push_back(Case(op, {std::move(i)}, fn, Acc::exact));
      if (from == DType::f32 || to == DType::f32) {
        cases.push_back(Case(op, {contiguous(Arr{{}, {-2.75}}, from)}, fn, Acc::exact));
      }
      // Infinities and NaN go to floating types and bool (to integers they are undefined).
      if (zc::is_floating(from) && (zc::is_floating(to) || to == DType::boolean)) {
        cases.push_back(Case(op, {contiguous(specials(), from)}, fn, Acc::exact));
      }
      h.run(cases);
    }
  }
  // Large, and the rounding of values f16 and bf16 cannot hold exactly or at all.
  Tensor big = zc::randn({1024, 1024}) * 1000.0;
  const Fn to_f16 = unary_fn([](const Tensor& t) { return zc::cast(t, DType::f16); });
  h.run("cast to f16", {large("contiguous", big)}, to_f16, Acc::exact);
  h.run("cast to f16", {large("transpose", big, [](const Tensor& b) { return b.t(); })}, to_f16,
        Acc::exact);
  h.run("cast to bf16", {large("contiguous", big)},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::bf16); }), Acc::exact);
  h.run("cast to i32", {large("contiguous", big)},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::i32); }), Acc::exact);
  h.run("cast to f32", {large("contiguous", big.to(DType::f16))},
        unary_fn([](const Tensor& t) { return zc::cast(t, DType::f32); }), Acc::exact);
  Arr wide{{6}, {70000, -70000, 65519, 65520, 3.0e38, 1.0 / 3}};
  for (DType to : {DType::f16, DType::bf16}) {
    h.run("cast to " + name_of(to), {contiguous(wide, DType::f32)},
          unary_fn([to](const Tensor& t) { return zc::cast(t, to); }), Acc::exact);
  }
  // Tensor::to(DType) is cast, and a no-op for the same dtype.
  h.run("to(f64)", {of_kind("transpose", x, DType::f32)},
        unary_fn([](const Tensor& t) { return t.to(DType::f64); }), Acc::exact);
}

// ---------------------------------------------------------------------------------------------
// Elementwise binary ops and where.

struct BinaryOp {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  double alo, ahi, blo, bhi;
  bool ties = false;  // draw small integers (comparisons, maximum, minimum)
};

std::vector<BinaryOp> binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return zc::add(a, b); }, -3, 3, -3, 3},
      {"sub", [](const Tensor& a, const Tensor& b) { return zc::sub(a, b); }, -3, 3, -3, 3},
      {"mul", [](const Tensor& a, const Tensor& b) { return zc::mul(a, b); }, -3, 3, -3, 3},
      // The denominator has either sign; integer zeros give inf and NaN (true division).
      {"div", [](const Tensor& a, const Tensor& b) { return zc::div(a, b); }, -3, 3, -3, 3},
      // Integer bases are at least 1: 0 to a negative power is undefined as an integer.
      {"pow", [](const Tensor& a, const Tensor& b) { return zc::pow(a, b); }, 0.2, 3, -2, 2},
      {"maximum", [](const Tensor& a, const Tensor& b) { return zc::maximum(a, b); }, -3, 3, -3, 3,
       true},
      {"minimum", [](const Tensor& a, const Tensor& b) { return zc::minimum(a, b); }, -3, 3, -3, 3,
       true},
      {"eq", [](const Tensor& a, const Tensor& b) { return zc::eq(a, b); }, -2, 2, -2, 2, true},
      {"ne", [](const Tensor& a, const Tensor& b) { return zc::ne(a, b); }, -2, 2, -2, 2, true},
      {"lt", [](const Tensor& a, const Tensor& b) { return zc::lt(a, b); }, -2, 2, -2, 2, true},
      {"le", [](const Tensor& a, const Tensor& b) { return zc::le(a, b); }, -2, 2, -2, 2, true},
      {"gt", [](const Tensor& a, const Tensor& b) { return zc::gt(a, b); }, -2, 2, -2, 2, true},
      {"ge", [](const Tensor& a, const Tensor& b) { return zc::ge(a, b); }, -2, 2, -2, 2, true},
  };
}

Arr draw_a(const BinaryOp& op, const Shape& s, DType dt) {
  if (op.ties && dt != DType::boolean) return draw(s, op.alo, op.ahi, DType::i64);  // exact
  return draw(s, op.alo, op.ahi, dt);
}

Arr draw_b(const BinaryOp& op, const Shape& s, DType dt) {
  if (op.ties && dt != DType::boolean) return draw(s, op.blo, op.bhi, DType::i64);
  Arr b = draw(s, op.blo, op.bhi, dt);
  if (op.name == "div" && zc::is_floating(dt)) {  // away from zero, either sign
    for (double& v : b.v) v = v < 0 ? v - 0.5 : v + 0.5;
  }
  return b;
}

// Pairs of operands over every input kind: the kinds of `a` and of `b` rotate against each
// other, so each kind of each side appears without the full cross product.
std::vector<std::pair<Input, Input>> kind_pairs(const Arr& a, const Arr& b, DType da, DType db) {
  std::vector<Input> ia = every_kind(a, da), ib = every_kind(b, db);
  std::vector<std::pair<Input, Input>> r;
  const size_t n = std::max(ia.size(), ib.size());
  for (size_t i = 0; i < n; ++i) r.emplace_back(ia[i % ia.size()], ib[(i + 1) % ib.size()]);
  return r;
}

TEST_F(CudaOps, Binary) {
  Harness h("binary");
  zc::manual_seed(201);
  const Shape s3{3, 4, 5};
  for (const BinaryOp& op : binary_ops()) {
    std::vector<Case> cases;
    auto add = [&](Input a, Input b) {
      cases.push_back(Case(op.name, {std::move(a), std::move(b)}, binary_fn(op.fn)));
    };
    for (DType dt : all_dtypes()) {
      // Same shapes; both operands broadcasting ([3,1,5] with [4,1]); a stride-0 operand.
      for (auto& [a, b] : kind_pairs(draw_a(op, s3, dt), draw_b(op, s3, dt), dt, dt)) add(a, b);
      for (auto& [a, b] : kind_pairs(draw_a(op, {3, 1, 5}, dt), draw_b(op, {4, 1}, dt), dt, dt)) {
        add(a, b);
      }
      add(contiguous(draw_a(op, s3, dt), dt), expanded(draw_b(op, {1, 4, 1}, dt), s3, dt));
    }
    for (DType dt : {DType::f32, DType::i64}) {
      // The first operand broadcast; 0-dim tensors on the device on either side; size-1 dims.
      add(of_kind("transpose", draw_a(op, {4, 5}, dt), dt),
          of_kind("permute", draw_b(op, s3, dt), dt));
      add(contiguous(draw_a(op, {}, dt), dt), of_kind("strided", draw_b(op, s3, dt), dt));
      add(of_kind("column_major", draw_a(op, s3, dt), dt), contiguous(draw_b(op, {}, dt), dt));
      add(contiguous(draw_a(op, {}, dt), dt), contiguous(draw_b(op, {}, dt), dt));
      add(of_kind("strided", draw_a(op, {1, 4, 1}, dt), dt),
          contiguous(draw_b(op, {1, 1, 1}, dt), dt));
    }
    // NaN, infinities and signed zeros against each other.
    Arr sa = specials(), sb = specials();
    std::rotate(sb.v.begin(), sb.v.begin() + 3, sb.v.end());
    for (DType dt : {DType::f32, DType::f16}) add(contiguous(sa, dt), of_kind("strided", sb, dt));
    // Large: 1 << 20 elements against a broadcast row, packed and in two views.
    const double lo = op.alo, span = op.ahi - op.alo;
    Tensor big = zc::rand({1024, 1024}) * span + lo, tall_base = zc::rand({2049, 1024}) * span + lo;
    Tensor row = zc::rand({1024}) * (op.bhi - op.blo) + op.blo;
    if (op.ties) {  // few distinct values, so that comparisons tie
      big = (big * 2.0).to(DType::i64).to(DType::f32);
      tall_base = (tall_base * 2.0).to(DType::i64).to(DType::f32);
      row = (row * 2.0).to(DType::i64).to(DType::f32);
    }
    if (op.name == "div") row = row + 3.5;
    add(large("contiguous", big), large("contiguous", row));
    add(large("transpose", big, [](const Tensor& b) { return b.t(); }), large("contiguous", row));
    add(large("slice_step2", tall_base,
              [](const Tensor& b) { return b.slice(0, 1, b.size(0), 2); }),
        large("contiguous", row));
    h.run(cases);
  }
}

TEST_F(CudaOps, BinaryPromotionAndNumbers) {
  Harness h("binary promotion and numbers");
  zc::manual_seed(202);
  const Shape s3{3, 4, 5};
  // Mixed dtypes: the promoted type and its values; each pair in one order, alternating.
  const std::vector<std::pair<DType, DType>> pairs{
      {DType::f32, DType::f64},  {DType::bf16, DType::f16},    {DType::i32, DType::f16},
      {DType::f32, DType::i64},  {DType::boolean, DType::i32}, {DType::i64, DType::i32},
      {DType::bf16, DType::f32}, {DType::f64, DType::boolean}};
  for (const BinaryOp& op : binary_ops()) {
    for (const auto& [da, db] : pairs) {
      Arr a = draw_a(op, {3, 1, 5}, zc::is_floating(da) ? da : DType::i64);
      Arr b = draw_b(op, {4, 1}, zc::is_floating(db) ? db : DType::i64);
      if (da == DType::boolean) a = zc::ref::small_ints(a.shape, 0, 1);
      if (db == DType::boolean) b = zc::ref::small_ints(b.shape, 0, 1);
      h.run(op.name, {of_kind("column_major", a, da), of_kind("slice_step2", b, db)},
            binary_fn(op.fn));
    }
    // Numbers on either side of an f32 tensor: integral and fractional C++ numbers, 0-dim CPU
    // tensors of another dtype.
    Arr x = draw_a(op, s3, DType::f32);
    for (Input& xi : every_kind(x, DType::f32)) {
      h.run(op.name, {xi, number(2.0)}, binary_fn(op.fn));
      h.run(op.name, {xi, number(0.5)}, binary_fn(op.fn));
      h.run(op.name, {number(2.5), xi}, binary_fn(op.fn));
      h.run(op.name, {xi, cpu_scalar(1.5, DType::f64)}, binary_fn(op.fn));
      h.run(op.name, {cpu_scalar(2, DType::i64), xi}, binary_fn(op.fn));
    }
  }
  // The operators and scalar overloads as written in user code, on every dtype.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> forms{
      {"x * 2.0", [](const Tensor& x) { return x * 2.0; }},
      {"x + 2.5", [](const Tensor& x) { return x + 2.5; }},
      {"2.0 - x", [](const Tensor& x) { return 2.0 - x; }},
      {"1.5 / x", [](const Tensor& x) { return 1.5 / x; }},
      {"x / 4.0", [](const Tensor& x) { return x / 4.0; }},
      {"-x", [](const Tensor& x) { return -x; }},
      {"pow(x, 2.0)", [](const Tensor& x) { return zc::pow(x, 2.0); }},
      {"pow(x, 0.5)", [](const Tensor& x) { return zc::pow(x, 0.5); }},
      {"maximum(x, 0.25)", [](const Tensor& x) { return zc::maximum(x, 0.25); }},
      {"minimum(x, -1.0)", [](const Tensor& x) { return zc::minimum(x, -1.0); }},
      {"ge(x, 1.0)", [](const Tensor& x) { return zc::ge(x, 1.0); }},
      {"ne(x, 0.5)", [](const Tensor& x) { return zc::ne(x, 0.5); }},
  };
  for (const auto& [name, f] : forms) {
    for (DType dt : all_dtypes()) {
      Arr x = ties(s3, dt);
      h.run(name, {of_kind("transpose", x, dt)}, unary_fn(f));
    }
  }
  // Tensor operators between two device tensors, and numbers with a 0-dim device tensor.
  Arr a = zc::ref::uniform(s3, -2, 2), b = zc::ref::uniform({5}, 0.5, 2);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>>
      ops{{"a + b", [](const Tensor& p, const Tensor& q) { return p + q; }},
          {"a - b", [](const Tensor& p, const Tensor& q) { return p - q; }},
          {"a * b", [](const Tensor& p, const Tensor& q) { return p * q; }},
          {"a / b", [](const Tensor& p, const Tensor& q) { return p / q; }},
          {"(a + 1) * (b - 1)",
           [](const Tensor& p, const Tensor& q) { return (p + 1.0) * (q - 1.0); }}};
  for (const auto& [name, f] : ops) {
    h.run(name, {of_kind("permute", a, DType::f32), of_kind("strided", b, DType::f32)},
          binary_fn(f));
  }
  h.run("0-dim * 0.5", {contiguous(Arr{{}, {3.0}}, DType::f32)},
        unary_fn([](const Tensor& t) { return t * 0.5; }));
  h.run("0-dim i32 + 2.5", {contiguous(Arr{{}, {3.0}}, DType::i32)},
        unary_fn([](const Tensor& t) { return t + 2.5; }));

  // A tensor with dims on the CPU does not mix with a CUDA tensor.
  if (!dry_run()) {
    Tensor g = zc::ones({3}).to(Device::cuda(0));
    EXPECT_THROW(zc::add(g, zc::ones({3})), zc::Error);
    EXPECT_THROW(zc::add(zc::ones({1}), g), zc::Error);
    EXPECT_THROW(zc::where(zc::ones({3}, DType::boolean), g, g), zc::Error);
  }
}

TEST_F(CudaOps, Where) {
  Harness h("where");
  zc::manual_seed(301);
  const Fn where = [](const std::vector<Tensor>& v) { return zc::where(v[0], v[1], v[2]); };
  const Arr c = zc::ref::small_ints({3, 1}, 0, 1);
  for (DType dt : all_dtypes()) {
    // Integers in [-8, 8] (exact in every dtype); the condition broadcasts along rows, `a`
    // along columns.
    Arr a = zc::ref::small_ints({1, 4}, -8, 8), b = zc::ref::small_ints({3, 4}, -8, 8);
    if (dt == DType::boolean) {
      a = zc::ref::small_ints({1, 4}, 0, 1);
      b = zc::ref::small_ints({3, 4}, 0, 1);
    }
    std::vector<Input> cs = every_kind(c, DType::boolean), as = every_kind(a, dt),
                       bs = every_kind(b, dt);
    for (size_t i = 0; i < bs.size(); ++i) {
      h.run("where", {cs[i % cs.size()], as[(i + 1) % as.size()], bs[i]}, where, Acc::exact);
    }
  }
  // A condition computed on the device; a number and a 0-dim CPU tensor as the other branch;
  // mixed dtypes promote.
  const Arr x = zc::ref::uniform({3, 4, 5}, -1, 1);
  const Fn relu_like = [](const std::vector<Tensor>& v) {
    return zc::where(zc::gt(v[0], 0.0), v[0], v[1]);
  };
  for (Input& xi : every_kind(x, DType::f32)) {
    h.run("where(gt(x, 0), x, y)", {xi, number(-1.0)}, relu_like, Acc::exact);
    h.run("where(gt(x, 0), x, y)", {xi, cpu_scalar(0.5, DType::f64)}, relu_like, Acc::exact);
  }
  h.run("where",
        {of_kind("strided", zc::ref::small_ints({3, 4, 5}, 0, 1), DType::boolean),
         of_kind("transpose", x, DType::f16), contiguous(zc::ref::uniform({5}, -1, 1), DType::f32)},
        where, Acc::exact);
  h.run("where",
        {contiguous(Arr{{}, {1}}, DType::boolean), contiguous(Arr{{}, {2.5}}, DType::f32),
         of_kind("column_major", x, DType::f32)},
        where, Acc::exact);
  // Large: a column condition against 1 << 20 elements.
  Tensor big = zc::randn({1024, 1024}), cond = zc::gt(zc::rand({1024, 1}), zc::scalar_tensor(0.5));
  h.run("where",
        {large("contiguous", cond), large("transpose", big, [](const Tensor& t) { return t.t(); }),
         large("contiguous", zc::zeros({1024}))},
        where, Acc::exact);
}

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
  struct Att {
    Shape q, k, v;
    bool causal;
    std::optional<double> scale;
  };
  const std::vector<Att> atts{
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, false, std::nullopt},
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, true, std::nullopt},
      {{2, 3, 5, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, true, 0.3},
      {{2, 17, 16}, {2, 17, 16}, {2, 17, 3}, true, std::nullopt},  // the value dim differs
      {{1, 2, 4, 8}, {1, 2, 7, 8}, {1, 2, 7, 5}, false, 1.7},      // more keys than queries
      {{1, 1, 8}, {1, 1, 8}, {1, 1, 8}, true, std::nullopt},       // one token
  };
  for (const Att& a : atts) {
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
