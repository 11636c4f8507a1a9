#include "zc/factories.h"

#include <cmath>
#include <vector>

#include "ops/dispatch.h"
#include "tensor/device_memory.h"
#include "tensor/element.h"
#include "tensor/random.h"
#include "util/check.h"

namespace zc {

namespace {
void check_shape(const Shape& shape, const char* what) {
  for (int64_t d : shape) {
    if (d < 0) {
      throw Error(std::string(what) + ": shape " + shape_str(shape) + " has a negative dimension");
    }
  }
}

// Writes doubles into a fresh tensor of `dtype`.
Tensor from_doubles(const double* values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  int64_t n = t.numel();
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) out[i] = convert_element<T>(values[i]);
  });
  return t;
}
}  // namespace

Tensor full(const Shape& shape, double value, DType dtype) {
  check_shape(shape, "full");
  Tensor t = Tensor::empty(shape, dtype);
  int64_t n = t.numel();
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = convert_element<T>(value);
    T* out = static_cast<T*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  });
  return t;
}

Tensor zeros(const Shape& shape, DType dtype) {
  return full(shape, 0.0, dtype);
}
Tensor zeros(const Shape& shape, DType dtype, Device device) {
  if (device.is_cpu()) return zeros(shape, dtype);
  check_shape(shape, "zeros");
  Tensor t = Tensor::empty(shape, dtype, device);  // raises for an unusable device
  const DeviceMemoryHooks* hooks = device_memory(device.type);
  ZC_CHECK(hooks != nullptr, "no memory hooks for " << device.str());
  const size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(dtype);
  if (bytes > 0) hooks->fill_zero(t.unsafe_impl()->storage->data(), device.index, bytes);
  return t;
}
Tensor ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype);
}
Tensor scalar_tensor(double value, DType dtype) {
  return full({}, value, dtype);
}

Tensor arange(int64_t end, DType dtype) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype);
}

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    throw Error("arange: start, end and step must be finite and step nonzero");
  }
  double count = std::ceil((end - start) / step);
  int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_doubles(v.data(), {n}, dtype);
}

Tensor randn(const Shape& shape, DType dtype) {
  check_shape(shape, "randn");
  ops::note_random_draw("randn");
  if (!is_floating(dtype))
    throw Error("randn: dtype must be floating, got " + std::string(dtype_name(dtype)));
  std::vector<double> v(shape_numel(shape));
  random_normal(v.data(), static_cast<int64_t>(v.size()));
  return from_doubles(v.data(), shape, dtype);
}

Tensor rand(const Shape& shape, DType dtype) {
  check_shape(shape, "rand");
  ops::note_random_draw("rand");
  if (!is_floating(dtype))
    throw Error("rand: dtype must be floating, got " + std::string(dtype_name(dtype)));
  std::vector<double> v(shape_numel(shape));
  random_uniform(v.data(), static_cast<int64_t>(v.size()));
  return from_doubles(v.data(), shape, dtype);
}

namespace {
// op(x, seed): recorded with a per-call seed inside a capture, else run with a seed drawn now.
Tensor draw_like(ops::OpId op, const Tensor& x) {
  if (!x.defined()) {
    throw Error(std::string(ops::op_def(op).name) + ": called with an undefined Tensor");
  }
  if (ops::OpInterceptor* tracer = ops::current_interceptor()) return tracer->random_like(op, x);
  int64_t seed = 0;
  random_seeds(&seed, 1);
  return ops::call1(op, {x, from_values<int64_t>({seed}, {}).to(x.device())});
}
}  // namespace

Tensor rand_like(const Tensor& x) {
  return draw_like(ops::OpId::rand_like, x);
}

Tensor randn_like(const Tensor& x) {
  return draw_like(ops::OpId::randn_like, x);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  check_shape(shape, "randint");
  ops::note_random_draw("randint");
  if (high <= low) {
    throw Error("randint: empty range [" + std::to_string(low) + ", " + std::to_string(high) + ")");
  }
  std::vector<int64_t> v(shape_numel(shape));
  random_integers(v.data(), static_cast<int64_t>(v.size()), low, high);
  return from_values(v, shape).to(dtype);
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape) {
  return from_values(values, shape);
}

template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape) {
  check_shape(shape, "from_vector");
  if (static_cast<int64_t>(values.size()) != shape_numel(shape)) {
    throw Error("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                shape_str(shape) + " (" + std::to_string(shape_numel(shape)) + " elements)");
  }
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  T* out = static_cast<T*>(t.raw_data());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

template Tensor from_values(const std::vector<float>&, const Shape&);
template Tensor from_values(const std::vector<double>&, const Shape&);
template Tensor from_values(const std::vector<int64_t>&, const Shape&);
template Tensor from_values(const std::vector<int32_t>&, const Shape&);
template Tensor from_values(const std::vector<bool>&, const Shape&);
template Tensor from_values(const std::vector<Half>&, const Shape&);
template Tensor from_values(const std::vector<BFloat16>&, const Shape&);

}  // namespace zc
