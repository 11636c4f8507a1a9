#include "onnx/convert.h"

#include <algorithm>
#include <cstring>

#include "onnx/external_data.h"
#include "onnx/onnx_file.h"
#include "zc/factories.h"

namespace zc::onnx_import {

Error NodeArgs::error(const std::string& detail) const {
  return Error("ONNX node " + onnx_file::node_str(node, -1) + ": " + detail);
}

int64_t NodeArgs::axis(int64_t axis, int64_t rank) const {
  const int64_t r = axis < 0 ? axis + rank : axis;
  if (r < 0 || r >= rank) {
    throw error("axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  }
  return r;
}

Tensor i64_values(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

Tensor scalar_on(double v, DType dtype, Device device) {
  Tensor t = full({}, v, dtype);
  return device.is_cpu() ? t : t.to(device);
}

const Tensor& NodeArgs::in(size_t i) const {
  if (!has(i)) throw error("input " + std::to_string(i) + " is required");
  return inputs_[i];
}

size_t NodeArgs::outputs() const {
  size_t n = 0;
  for (int k = 0; k < node.output_size(); ++k) {
    if (!node.output(k).empty()) n = static_cast<size_t>(k) + 1;
  }
  return n;
}

const ::onnx::AttributeProto* NodeArgs::attr(std::string_view name) const {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t NodeArgs::i(std::string_view name, int64_t fallback) const {
  const auto* a = attr(name);
  return a ? a->i() : fallback;
}

float NodeArgs::f(std::string_view name, float fallback) const {
  const auto* a = attr(name);
  return a ? a->f() : fallback;
}

std::string NodeArgs::s(std::string_view name, const std::string& fallback) const {
  const auto* a = attr(name);
  return a ? a->s() : fallback;
}

std::vector<int64_t> NodeArgs::ints(std::string_view name, std::vector<int64_t> fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

const Tensor& NodeArgs::concrete(size_t i, const char* what) const {
  const Tensor& t = in(i);
  if (t.is_traced()) {
    throw error(std::string(what) +
                " is computed from the model's input values; zc needs it as a constant (a "
                "value of the model's shapes or initializers)");
  }
  return t;
}

std::vector<int64_t> NodeArgs::values(size_t i, const char* what) const {
  const Tensor& t = concrete(i, what);
  if (!is_integral(t.dtype())) {
    throw error(std::string(what) + " must be integers, got " + std::string(dtype_name(t.dtype())));
  }
  Tensor c = t.to(Device::cpu()).to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

std::vector<double> NodeArgs::numbers(size_t i, const char* what) const {
  const Tensor& t = concrete(i, what);
  if (t.dtype() == DType::boolean) throw error(std::string(what) + " must be numbers, got bool");
  Tensor c = t.to(Device::cpu()).to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

double NodeArgs::scalar(size_t i, const char* what) const {
  const Tensor& t = in(i);
  if (t.is_traced()) {
    throw error(std::string(what) +
                " is computed from the model's input values; zc needs it "
                "as a constant");
  }
  if (t.numel() != 1) {
    throw error(std::string(what) + " must have one element, got " + shape_str(t.shape()));
  }
  return t.to(Device::cpu()).item_double();
}

namespace {
const std::vector<OpRule>& rules() {
  static const std::vector<OpRule> all = [] {
    std::vector<OpRule> r;
    add_math_rules(r);
    add_activation_rules(r);
    add_nn_rules(r);
    add_shape_rules(r);
    add_layout_rules(r);
    add_indexing_rules(r);
    add_recurrent_rules(r);
    add_resize_rules(r);
    add_einsum_rules(r);
    add_extra_rules(r);
    add_gridsample_rules(r);
    std::sort(r.begin(), r.end(), [](const OpRule& a, const OpRule& b) { return a.op < b.op; });
    return r;
  }();
  return all;
}
}  // namespace

const OpRule* find_rule(std::string_view op) {
  const auto& r = rules();
  auto it = std::lower_bound(r.begin(), r.end(), op,
                             [](const OpRule& rule, std::string_view o) { return rule.op < o; });
  return it != r.end() && it->op == op ? &*it : nullptr;
}

std::vector<std::string> rule_names() {
  std::vector<std::string> out;
  for (const OpRule& r : rules()) out.emplace_back(r.op);
  return out;
}

std::string check_node(const ::onnx::NodeProto& node, int64_t) {
  const OpRule* rule = find_rule(node.op_type());
  if (!rule) return "operator " + node.op_type() + " is not supported";
  std::string unknown;
  for (const auto& a : node.attribute()) {
    if (std::find(rule->attrs.begin(), rule->attrs.end(), a.name()) == rule->attrs.end()) {
      unknown += (unknown.empty() ? "" : ", ") + a.name();
    }
  }
  if (!unknown.empty()) return "attribute(s) " + unknown + " not supported";
  return "";
}

Tensor tensor_of(const ::onnx::TensorProto& t, const std::string& what,
                 const onnx_file::ExternalData* external) {
  const onnx_file::RawTensor layout = onnx_file::tensor_layout(t, what, external != nullptr);
  Tensor out = Tensor::empty(layout.shape, layout.dtype);
  if (external && onnx_file::is_external(t)) {
    const uint64_t nbytes = static_cast<uint64_t>(out.numel()) * dtype_size(out.dtype());
    const auto bytes = external->bytes_of(t, nbytes, what);
    if (!bytes.empty()) std::memcpy(out.raw_data(), bytes.data(), bytes.size());
  } else {
    onnx_file::copy_tensor_data(t, layout, out.raw_data());
  }
  return out;
}

}  // namespace zc::onnx_import
