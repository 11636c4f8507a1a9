// The harness of the CUDA op tests (cuda_ops_*_test.cpp): every op of the registry on CUDA
// tensors against the same op on the CPU. Each case builds its
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
#pragma once

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

namespace cuda_ops_test {

using zc::Device;
using zc::DType;
using zc::Shape;
using zc::Tensor;
using zc::ref::Arr;

// ---------------------------------------------------------------------------------------------
// The device under test.

#if __has_include("zc/cuda.h")
inline bool cuda_available() {
  return zc::cuda::is_available();
}
#else
// Until zc/cuda.h lands: a GPU is usable when a tensor can be moved to it.
inline bool cuda_available() {
  try {
    return zc::ones({1}).to(Device::cuda(0)).device().is_cuda();
  } catch (const zc::Error&) {
    return false;
  }
}
#endif

inline bool dry_run() {
  const char* v = std::getenv("ZC_CUDA_OPS_TEST_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

inline Device test_device() {
  return dry_run() ? Device::cpu() : Device::cuda(0);
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dry_run() && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v{DType::f32, DType::f64, DType::f16,    DType::bf16,
                                    DType::i64, DType::i32, DType::boolean};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  return zc::ref::float_dtypes();
}

inline std::string name_of(DType t) {
  return zc::ref::name_of(t);
}
inline std::string show(const Shape& s) {
  return zc::ref::show(s);
}
inline std::string meta(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return name_of(t.dtype()) + " " + show(t.shape()) + " on " + t.device().str();
}

// ---------------------------------------------------------------------------------------------
// Tolerances (see the top of the file).

enum class Acc { exact, pointwise, accumulate };

struct Tol {
  double rtol = 0, atol = 0;
};

inline Tol tolerance(Acc acc, DType t) {
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
inline std::vector<double> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  if (v.empty()) return v;
  const char* p = static_cast<const char*>(c.raw_data());
  const size_t es = zc::dtype_size(c.dtype());
  for (size_t i = 0; i < v.size(); ++i) v[i] = zc::ref::load(p + i * es, c.dtype());
  return v;
}

// `got` (a CUDA result copied back) against `want` (the CPU's result), both on the CPU.
inline ::testing::AssertionResult agree(const Tensor& got, const Tensor& want, Tol tol,
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

inline Input from_base(std::string desc, Tensor base, View view) {
  return Input{std::move(desc),
               [base, view](Device d) { return view(d.is_cpu() ? base : base.to(d)); }};
}

inline double junk(DType dt) {
  return zc::is_floating(dt) ? std::numeric_limits<double>::quiet_NaN() : 77.0;
}

// `a` at the odd indices of a tensor twice as large in every dim, junk elsewhere.
inline Arr padded(const Arr& a, DType dt) {
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
inline Arr tall(const Arr& a, DType dt) {
  Arr t{a.shape, {}};
  t.shape[0] = 2 * a.shape[0] + 1;
  t.v.assign(zc::ref::numel_of(t.shape), junk(dt));
  const int64_t row = a.shape[0] ? a.numel() / a.shape[0] : 0;
  for (int64_t k = 0; k < a.numel(); ++k) t.v[(2 * (k / row) + 1) * row + k % row] = a.v[k];
  return t;
}

// In 2-D the transpose is the column-major layout, so it stands for both.
inline std::vector<std::string> kinds_for_rank(int64_t nd) {
  if (nd == 0) return {"contiguous"};
  if (nd == 1) return {"contiguous", "strided", "slice_step2"};
  if (nd == 2) return {"contiguous", "transpose", "strided", "slice_step2"};
  return {"contiguous", "column_major", "strided", "transpose", "permute", "slice_step2"};
}

// `a` as dtype `dt` in one input kind.
inline Input of_kind(const std::string& kind, const Arr& a, DType dt) {
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

inline Input contiguous(const Arr& a, DType dt) {
  return of_kind("contiguous", a, dt);
}

inline std::vector<Input> every_kind(const Arr& a, DType dt) {
  std::vector<Input> r;
  for (const std::string& k : kinds_for_rank(a.dim())) r.push_back(of_kind(k, a, dt));
  return r;
}

// `small` (with size-1 dims) expanded to `to`: a stride-0 broadcast view.
inline Input expanded(const Arr& small, const Shape& to, DType dt) {
  return from_base(name_of(dt) + " expand " + show(small.shape) + "->" + show(to),
                   zc::ref::make(small, dt), [to](const Tensor& b) { return b.expand(to); });
}

// A 0-dim CPU tensor (not a wrapped number): it mixes with CUDA tensors and stays on the CPU.
inline Input cpu_scalar(double v, DType dt) {
  std::ostringstream d;
  d << name_of(dt) << " cpu-0-dim " << v;
  return Input{d.str(), [v, dt](Device) { return zc::scalar_tensor(v, dt); }, true};
}

// A C++ number, as the operators and the double overloads pass it.
inline Input number(double v) {
  std::ostringstream d;
  d << "number " << v;
  return Input{d.str(), [v](Device) { return zc::wrap_scalar(v); }, true};
}

// A packed tensor made by the factories (large inputs), viewed as `kind`.
inline Input large(const std::string& kind, Tensor base, View view = nullptr) {
  if (!view) view = [](const Tensor& b) { return b; };
  std::string desc = name_of(base.dtype()) + " large " + kind + " " + show(view(base).shape());
  return from_base(std::move(desc), std::move(base), std::move(view));
}

// Values for an op's domain: uniform in [lo, hi) for floating types, integers in [lo, hi] for
// integer types, {0, 1} for bool.
inline Arr draw(const Shape& s, double lo, double hi, DType dt) {
  if (dt == DType::boolean) return zc::ref::small_ints(s, 0, 1);
  if (zc::is_integral(dt)) {
    return zc::ref::small_ints(s, static_cast<int>(std::ceil(lo)),
                               static_cast<int>(std::floor(hi)));
  }
  return zc::ref::uniform(s, lo, hi);
}

// Multiples of 1/2 in [-1.5, 1.5] (floats) or integers in [-3, 3]: few distinct values, so
// maxima tie, and sums are exact in every dtype.
inline Arr ties(const Shape& s, DType dt) {
  if (dt == DType::boolean) return zc::ref::small_ints(s, 0, 1);
  Arr a = zc::ref::small_ints(s, -3, 3);
  if (zc::is_floating(dt)) {
    for (double& x : a.v) x /= 2;
  }
  return a;
}

// Infinities, NaN, signed zeros, tiny and large values.
inline Arr specials() {
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

inline Fn unary_fn(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& v) { return f(v[0]); };
}
inline Fn binary_fn(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); };
}

struct Outcome {
  Tensor result;  // where the op put it
  Tensor host;    // the result on the CPU
  std::string error;
  bool zc_error = false;
};

inline Outcome attempt(const Fn& fn, const std::vector<Tensor>& in) {
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

inline bool shares_storage(const Tensor& r, const std::vector<Tensor>& in) {
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

inline std::vector<std::pair<Input, Input>> kind_pairs(const Arr& a, const Arr& b, DType da,
                                                       DType db) {
  std::vector<Input> ia = every_kind(a, da), ib = every_kind(b, db);
  std::vector<std::pair<Input, Input>> r;
  const size_t n = std::max(ia.size(), ib.size());
  for (size_t i = 0; i < n; ++i) r.emplace_back(ia[i % ia.size()], ib[(i + 1) % ib.size()]);
  return r;
}

}  // namespace cuda_ops_test
