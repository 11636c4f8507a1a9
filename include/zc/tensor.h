// zc::Tensor: a strided view of a reference-counted storage.
//
// A Tensor is a cheap handle (one shared_ptr). Views (reshape when possible, transpose,
// permute, slice, expand, squeeze, unsqueeze) share storage with their base; strides and the
// storage offset are in elements. Every method that computes goes through the op registry, so
// the same call is what the capture stage records when the tensor is traced.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zc/device.h"
#include "zc/dtype.h"
#include "zc/error.h"

namespace zc {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2,3]"

// A block of bytes on a device; 64-byte aligned on the CPU.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory owned by someone else (a compiled graph's buffers): never freed here, and valid
  // only while the owner keeps it.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device);
  // Storages of nbytes[i] bytes on `device`, allocated together: on a GPU end to end in one
  // allocation, in order, each 512-byte aligned and still freed on its own, so that a view
  // spanning several of them needs no copy (the outputs of one compiled call; an optimizer's flat
  // gradients). On the CPU, separate blocks.
  static std::vector<std::shared_ptr<Storage>> allocate_together(std::span<const size_t> nbytes,
                                                                 Device device);
  // Equal and nonzero for storages from one allocate_together call on a GPU (which lie in one
  // allocation while any of them lives); 0 otherwise.
  int64_t group() const { return group_; }
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Counts writes into existing values (an optimizer's update of a parameter), so that
  // autograd can refuse values that changed after it saved them.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // Unique among the storages of this process (never reused, unlike an address): with the
  // version it names the contents of an owned storage, which is how an executable knows that a
  // weight it converted on an earlier call is unchanged (codegen::InputIdentity).
  uint64_t uid() const { return uid_; }
  bool owned() const { return owned_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool owned_ = true;
  uint64_t version_ = 0;
  int64_t group_ = 0;
  uint64_t uid_ = next_uid();
  static uint64_t next_uid();
};

// State the capture stage attaches to a traced tensor. The runtime only carries it: a traced
// tensor has metadata but no storage until someone needs its values, and then force() (a graph
// break) must compute them and fill in the storage of `self`.
struct TraceSlot {
  virtual ~TraceSlot() = default;
  virtual void force(struct TensorImpl& self) = 0;
};

// Autograd state of a tensor (src/autograd): whether it requires a gradient, its accumulated
// gradient when it is a leaf, and the node that produced it otherwise. Null for the many
// tensors that never take part in autograd.
struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for a traced tensor not yet forced
  int64_t offset = 0;                // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;
  Device device;
  std::shared_ptr<TraceSlot> trace;  // non-null while the tensor is being traced
  // A C++ number turned into a 0-dim tensor (wrap_scalar): it takes part in type promotion
  // with the lowest priority, like a Python number in torch.
  bool wrapped_number = false;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new contiguous, uninitialized tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  // A view of existing storage.
  static Tensor view_of(std::shared_ptr<Storage> storage, Shape shape, Shape strides,
                        int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;  // likewise
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  int64_t storage_offset() const { return impl().offset; }
  // Inline: a compiled call asks it of each of its inputs.
  bool is_contiguous() const {
    const TensorImpl& t = impl();
    int64_t expected = 1;
    for (size_t i = t.shape.size(); i-- > 0;) {
      if (t.shape[i] == 1) continue;
      if (t.strides[i] != expected) return false;
      expected *= t.shape[i];
    }
    return true;
  }
  bool is_traced() const { return impl_ && impl_->trace != nullptr; }

  // Typed pointer to the first element (storage + offset). Checks that T matches dtype();
  // on a traced tensor this forces its value (a graph break).
  template <class T>
  T* data() const {
    check_dtype(dtype_of<T>(), "data");
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;
  // The value of a one-element tensor converted to T.
  template <class T>
  T item() const {
    return static_cast<T>(item_double());
  }
  double item_double() const;

  // Views and layout; each is an op (recorded when traced).
  Tensor contiguous() const;
  Tensor reshape(const Shape& shape) const;  // a view when the strides allow, else a copy
  Tensor view(const Shape& shape) const;     // a view, or a zc::Error when the strides forbid it
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor expand(const Shape& shape) const;          // -1 keeps a size
  Tensor squeeze() const;                           // all size-1 dims
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor clone() const;

  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

  std::string str() const;  // shape, dtype and (for small tensors) the values

  // Autograd, shaped like LibTorch's. A leaf (a tensor no recorded op produced) that requires
  // a gradient accumulates one in grad() on every backward() that reaches it; an op on
  // tensors that require gradients records how to differentiate itself, unless a NoGradGuard
  // is alive on the calling thread. Only floating-point tensors can require gradients.
  Tensor& requires_grad_(bool requires_grad = true);  // leaves only: zc::Error otherwise
  bool requires_grad() const;
  bool is_leaf() const;              // true unless a recorded op produced the tensor
  const Tensor& grad() const;        // the accumulated gradient; undefined before any
  Tensor& mutable_grad() const;      // for optimizers: zero_grad() assigns Tensor()
  std::string grad_fn_name() const;  // the op that produced it ("mul"), or "" for a leaf
  // The gradient of this tensor with respect to every leaf that requires one, accumulated into
  // their grad(). Without `gradient` the tensor must hold one element (a loss); with it,
  // `gradient` has this tensor's shape. The graph's saved values are freed afterwards unless
  // `retain_graph`, and a second backward() through freed values raises zc::Error.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // The same values, cut off from autograd: requires no gradient and has no producer.
  Tensor detach() const;

  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  // Inline: every accessor goes through it, and a compiled call reads the shape, strides and
  // address of each of its inputs (a call through the library's PLT per read was a tenth of a
  // small graph's call).
  const TensorImpl& impl() const {
    if (!impl_) throw_undefined();
    return *impl_;
  }
  [[noreturn]] static void throw_undefined();
  void check_dtype(DType t, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Contiguous strides of a shape.
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);

}  // namespace zc
