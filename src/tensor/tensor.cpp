#include "zc/tensor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <ostream>
#include <sstream>

#include "ops/dispatch.h"
#include "ops/shape_rules.h"
#include "tensor/element.h"
#include "util/check.h"
#include "zc/ops.h"

namespace zc {

using ops::OpId;

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) throw Error("empty: negative dimension in shape " + shape_str(shape));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(
      static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::view_of(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset,
                       DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->device = storage->device();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

void Tensor::throw_undefined() {
  throw Error("use of an undefined Tensor (default-constructed, never assigned)");
}

namespace {
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim) {
    throw Error(std::string(what) + ": dimension " + std::to_string(dim) +
                " is out of range for a tensor of " + std::to_string(ndim) + " dims");
  }
  return d;
}
}  // namespace

int64_t Tensor::size(int64_t dim) const {
  return shape()[wrap_dim(dim, this->dim(), "size")];
}
int64_t Tensor::stride(int64_t dim) const {
  return strides()[wrap_dim(dim, this->dim(), "stride")];
}
int64_t Tensor::numel() const {
  return shape_numel(shape());
}

void Tensor::check_dtype(DType t, const char* what) const {
  if (dtype() != t) {
    throw Error(std::string(what) + "<T>: the tensor holds " + std::string(dtype_name(dtype())) +
                " but T is " + std::string(dtype_name(t)) +
                "; convert with .to(DType::" + std::string(dtype_name(t)) + ") first");
  }
}

void* Tensor::raw_data() const {
  const TensorImpl& t = impl();
  if (!t.device.is_cpu()) {
    throw Error("data(): the tensor is on " + t.device.str() +
                ", whose memory the CPU cannot address; copy it with .to(Device::cpu()) first");
  }
  if (!t.storage) {
    // A traced tensor has no values until capture forces them (a graph break).
    ZC_CHECK(t.trace != nullptr, "tensor without storage and without trace");
    t.trace->force(*impl_);
    ZC_CHECK(impl_->storage != nullptr, "force() left no storage");
  }
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(impl_->dtype);
}

double Tensor::item_double() const {
  if (numel() != 1) {
    throw Error("item(): the tensor has " + std::to_string(numel()) + " elements (shape " +
                shape_str(shape()) + "); item() needs exactly one");
  }
  if (!device().is_cpu()) return to(Device::cpu()).item_double();
  return load_as_double(raw_data(), dtype());
}

Tensor Tensor::contiguous() const {
  if (!is_traced() && is_contiguous()) return *this;
  return ops::call1(OpId::copy, {*this});
}

Tensor Tensor::clone() const {
  return ops::call1(OpId::copy, {*this});
}

namespace {
// Resolves one -1 in a reshape target against numel.
Shape infer_shape(const Shape& target, int64_t numel, const Shape& from) {
  Shape out = target;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) {
        throw Error("reshape: " + shape_str(from) + " to " + shape_str(target) +
                    ": only one dimension can be -1");
      }
      infer_at = static_cast<int>(i);
    } else if (out[i] < 0) {
      throw Error("reshape: " + shape_str(from) + " to " + shape_str(target) +
                  ": negative dimension");
    } else {
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      throw Error("reshape: " + shape_str(from) + " (" + std::to_string(numel) +
                  " elements) cannot be reshaped to " + shape_str(target));
    }
    out[infer_at] = numel / known;
  }
  return out;
}
}  // namespace

Tensor Tensor::reshape(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), this->shape());
  if (target == this->shape() && !is_traced()) return *this;
  return ops::call1(OpId::reshape, {*this}, ops::ShapeAttrs{target});
}

Tensor Tensor::view(const Shape& shape) const {
  Shape target = infer_shape(shape, numel(), this->shape());
  if (shape_numel(target) != numel()) {
    throw Error("view: " + shape_str(this->shape()) + " (" + std::to_string(numel()) +
                " elements) cannot be viewed as " + shape_str(shape));
  }
  Shape view_strides;
  if (!ops::reshape_strides(this->shape(), strides(), target, &view_strides)) {
    throw Error("view: shape " + shape_str(this->shape()) + " with strides " +
                shape_str(strides()) + " cannot be viewed as " + shape_str(target) +
                " without a copy; use reshape() or contiguous() first");
  }
  return reshape(target);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  int64_t n = dim();
  if (n == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, n, "flatten"), e = wrap_dim(end_dim, n, "flatten");
  if (s > e)
    throw Error("flatten: start_dim " + std::to_string(start_dim) + " is after end_dim " +
                std::to_string(end_dim));
  Shape out(shape().begin(), shape().begin() + s);
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= shape()[i];
  out.push_back(m);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  int64_t n = dim();
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[wrap_dim(a, n, "transpose")], perm[wrap_dim(b, n, "transpose")]);
  return permute(perm);
}

Tensor Tensor::t() const {
  if (dim() != 2) {
    throw Error("t(): expects a 2-D tensor, got shape " + shape_str(shape()) +
                "; use transpose(a, b) for other ranks");
  }
  return transpose(0, 1);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  int64_t n = dim();
  if (static_cast<int64_t>(dims.size()) != n) {
    throw Error("permute: " + shape_str(dims) + " has " + std::to_string(dims.size()) +
                " dims but the tensor " + shape_str(shape()) + " has " + std::to_string(n));
  }
  std::vector<int64_t> norm(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    norm[i] = wrap_dim(dims[i], n, "permute");
    if (seen[norm[i]]) {
      throw Error("permute: dimension " + std::to_string(norm[i]) + " repeats in " +
                  shape_str(dims) + "; expected a permutation of 0.." + std::to_string(n - 1));
    }
    seen[norm[i]] = true;
  }
  bool identity = true;
  for (int64_t i = 0; i < n; ++i) identity = identity && norm[i] == i;
  if (identity && !is_traced()) return *this;
  return ops::call1(OpId::permute, {*this}, ops::PermuteAttrs{norm});
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  int64_t d = wrap_dim(dim, this->dim(), "slice");
  if (step < 1) throw Error("slice: step must be >= 1, got " + std::to_string(step));
  int64_t n = shape()[d];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t s = clampi(start), e = std::max(clampi(end), clampi(start));
  return ops::call1(OpId::slice, {*this}, ops::SliceAttrs{d, s, e, step});
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  int64_t d = wrap_dim(dim, this->dim(), "narrow");
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n) {
    throw Error("narrow: start " + std::to_string(start) + " length " + std::to_string(length) +
                " is out of range for dimension " + std::to_string(d) + " of size " +
                std::to_string(n));
  }
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  int64_t d = wrap_dim(dim, this->dim(), "select");
  int64_t n = shape()[d];
  if (index < -n || index >= n) {
    throw Error("select: index " + std::to_string(index) + " is out of range for dimension " +
                std::to_string(d) + " of size " + std::to_string(n));
  }
  if (index < 0) index += n;
  Shape out = shape();
  out.erase(out.begin() + d);
  return slice(d, index, index + 1).reshape(out);
}

Tensor Tensor::expand(const Shape& target) const {
  int64_t n = dim();
  int64_t m = static_cast<int64_t>(target.size());
  if (m < n) {
    throw Error("expand: cannot expand " + shape_str(shape()) + " to fewer dims " +
                shape_str(target));
  }
  Shape out(target);
  for (int64_t i = 0; i < m; ++i) {
    int64_t src = i - (m - n);
    int64_t have = src >= 0 ? shape()[src] : 1;
    if (out[i] == -1) {
      if (src < 0) throw Error("expand: -1 is not allowed for a new leading dimension");
      out[i] = have;
    }
    if (have != out[i] && have != 1) {
      throw Error("expand: " + shape_str(shape()) + " cannot be expanded to " + shape_str(target) +
                  ": dimension " + std::to_string(i) + " has size " + std::to_string(have) +
                  ", expected 1 or " + std::to_string(out[i]));
    }
  }
  if (out == shape() && !is_traced()) return *this;
  return ops::call1(OpId::expand, {*this}, ops::ShapeAttrs{out});
}

Tensor Tensor::squeeze() const {
  Shape out;
  for (int64_t d : shape()) {
    if (d != 1) out.push_back(d);
  }
  return reshape(out);
}

Tensor Tensor::squeeze(int64_t dim) const {
  int64_t d = wrap_dim(dim, this->dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape out = shape();
  out.erase(out.begin() + d);
  return reshape(out);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  int64_t d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Shape out = shape();
  out.insert(out.begin() + d, 1);
  return reshape(out);
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype() && !is_traced()) return *this;
  return cast(*this, dtype);
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(shape=" << shape_str(t.shape()) << ", dtype=" << dtype_name(t.dtype());
  if (!t.device().is_cpu()) os << ", device=" << t.device().str();
  if (t.is_traced()) return os << ", traced)";
  int64_t n = t.numel();
  if (n <= 64) {
    Tensor c = (t.device().is_cpu() ? t : t.to(Device::cpu())).contiguous();
    const char* base = static_cast<const char*>(c.raw_data());
    os << ", values=[";
    for (int64_t i = 0; i < n; ++i) {
      if (i) os << ", ";
      os << load_as_double(base + i * dtype_size(c.dtype()), c.dtype());
    }
    os << "]";
  }
  return os << ")";
}

}  // namespace zc
