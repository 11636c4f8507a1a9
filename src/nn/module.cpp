#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nn/epoch.h"
#include "ops/dispatch.h"
#include "tensor/assign.h"
#include "zc/autograd.h"
#include "zc/nn.h"

namespace zc::nn {

namespace {

std::string demangle(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

// Demangling allocates and walks the mangled name; it runs on every module call (the region
// name), so each thread remembers the names it has already produced.
const std::string& cached_type_name(const std::type_info& type) {
  thread_local std::unordered_map<std::type_index, std::string> cache;
  auto it = cache.find(type);
  if (it == cache.end()) it = cache.emplace(type, demangle(type)).first;
  return it->second;
}

template <class Named>
bool has_name(const std::vector<std::pair<std::string, Named>>& entries, const std::string& name) {
  for (const auto& entry : entries) {
    if (entry.first == name) return true;
  }
  return false;
}

}  // namespace

namespace {
// The module whose default one-tensor forward is running on this thread: its many-input
// default must not call back into it (a module overriding neither forward).
thread_local const Module* in_default_forward = nullptr;

Error no_forward(const Module& m) {
  return Error(m.type_name() +
               ": forward() is not implemented; a module that is called must override "
               "Tensor forward(const Tensor&) or std::vector<Tensor> forward(const "
               "std::vector<Tensor>&) (a ModuleList only holds submodules: call its elements "
               "instead)");
}
}  // namespace

Tensor Module::forward(const Tensor& x) {
  if (in_default_forward == this) throw no_forward(*this);
  const Module* outer = in_default_forward;
  in_default_forward = this;
  std::vector<Tensor> out;
  try {
    out = forward(std::vector<Tensor>{x});
  } catch (...) {
    in_default_forward = outer;
    throw;
  }
  in_default_forward = outer;
  if (out.size() != 1) {
    throw Error(type_name() + ": called with one tensor, its forward returned " +
                std::to_string(out.size()) +
                " tensors; call it with a std::vector<Tensor> to receive them all");
  }
  return std::move(out[0]);
}

std::vector<Tensor> Module::forward(const std::vector<Tensor>& inputs) {
  if (in_default_forward == this) throw no_forward(*this);
  if (inputs.size() != 1) {
    throw Error(type_name() + ": called with " + std::to_string(inputs.size()) +
                " tensors, but it overrides only the one-tensor forward(const Tensor&); "
                "override std::vector<Tensor> forward(const std::vector<Tensor>&) to take "
                "several");
  }
  return {forward(inputs[0])};
}

Tensor Module::operator()(const Tensor& x) {
  // type_name() may be overridden, so it is asked every call; the interceptor may keep the name
  // for the region's lifetime, so it must outlive the scope.
  const std::string name = type_name();
  ops::RegionScope scope(name, this);
  return forward(x);
}

std::vector<Tensor> Module::operator()(const std::vector<Tensor>& inputs) {
  const std::string name = type_name();
  ops::RegionScope scope(name, this);
  return forward(inputs);
}

std::string Module::type_name() const {
  return cached_type_name(typeid(*this));
}

namespace {

void check_new_name(const Module& module, const std::string& what, const std::string& name,
                    bool taken) {
  if (name.empty()) throw Error(module.type_name() + ": " + what + " name must not be empty");
  if (name.find('.') != std::string::npos) {
    throw Error(module.type_name() + ": " + what + " name '" + name +
                "' must not contain '.' (dots separate the levels of a dotted path)");
  }
  if (taken) {
    throw Error(module.type_name() + ": cannot register " + what + " '" + name +
                "': the name is already used by a parameter, buffer or submodule");
  }
}

}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_new_name(*this, "parameter", name,
                 has_name(params_, name) || has_name(buffers_, name) || has_name(children_, name));
  if (!value.defined()) {
    throw Error(type_name() + ": parameter '" + name + "' is an undefined tensor");
  }
  // Parameters are what training updates: they require gradients from the start, as in torch.
  if (is_floating(value.dtype()) && value.is_leaf() && !value.requires_grad()) {
    value.requires_grad_();
  }
  params_.emplace_back(name, value);
  bump_module_epoch();
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  check_new_name(*this, "buffer", name,
                 has_name(params_, name) || has_name(buffers_, name) || has_name(children_, name));
  if (!value.defined()) {
    throw Error(type_name() + ": buffer '" + name + "' is an undefined tensor");
  }
  buffers_.emplace_back(name, value);
  bump_module_epoch();
  return value;
}

Tensor Module::replace_with_buffer(const std::string& name, Tensor value) {
  if (!value.defined()) throw Error(type_name() + ": buffer '" + name + "' is an undefined tensor");
  auto drop = [&](std::vector<std::pair<std::string, Tensor>>& entries) {
    std::erase_if(entries, [&](const auto& e) { return e.first == name; });
  };
  drop(params_);
  drop(buffers_);
  return register_buffer(name, std::move(value));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(*this, "submodule", name,
                 has_name(params_, name) || has_name(buffers_, name) || has_name(children_, name));
  if (!module) throw Error(type_name() + ": submodule '" + name + "' is null");
  if (module.get() == this) {
    throw Error(type_name() + ": submodule '" + name + "' is the module itself");
  }
  children_.emplace_back(name, std::move(module));
  bump_module_epoch();
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) throw Error(type_name() + ": submodule '" + name + "' is null");
  if (module.get() == this) {
    throw Error(type_name() + ": submodule '" + name + "' is the module itself");
  }
  for (auto& [n, child] : children_) {
    if (n != name) continue;
    child = std::move(module);
    bump_module_epoch();
    return;
  }
  throw Error(type_name() + ": no submodule '" + name + "' to replace");
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                     bool buffers) const {
  for (const auto& [name, tensor] : buffers ? buffers_ : params_) {
    out.emplace_back(prefix + name, tensor);
  }
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out, buffers);
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& entry : named_parameters()) out.push_back(std::move(entry.second));
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, /*buffers=*/false);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out, /*buffers=*/true);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

Tensor* Module::find_tensor(const std::string& dotted_name) {
  for (auto& [name, tensor] : params_) {
    if (name == dotted_name) return &tensor;
  }
  for (auto& [name, tensor] : buffers_) {
    if (name == dotted_name) return &tensor;
  }
  const size_t dot = dotted_name.find('.');
  if (dot == std::string::npos) return nullptr;
  const std::string head = dotted_name.substr(0, dot);
  for (auto& [name, child] : children_) {
    if (name == head) return child->find_tensor(dotted_name.substr(dot + 1));
  }
  return nullptr;
}

void Module::zero_grad() {
  for (const Tensor& p : parameters()) {
    if (p.unsafe_impl()->autograd) p.mutable_grad() = Tensor();
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& entry : children_) entry.second->train(on);
  bump_module_epoch();
}

namespace {

// Converts every tensor first and assigns only when all conversions succeeded, so a failure
// (an unusable device, say) leaves the module as it was.
template <class Convert>
void convert_all(Module& module, const std::string& what, Convert&& convert) {
  auto tensors = module.named_parameters();
  auto buffers = module.named_buffers();
  tensors.insert(tensors.end(), buffers.begin(), buffers.end());
  NoGradGuard no_grad;  // a conversion is not part of any computation to differentiate
  std::vector<Tensor> converted;
  converted.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    try {
      converted.push_back(convert(tensor));
    } catch (const Error& e) {
      throw Error(module.type_name() + "." + what + ": cannot convert '" + name + "': " + e.what());
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (converted[i].unsafe_impl() != tensors[i].second.unsafe_impl()) {
      replace_contents(tensors[i].second, converted[i]);
    }
  }
  bump_module_epoch();
}

}  // namespace

void Module::to(Device device) {
  convert_all(*this, "to(" + device.str() + ")",
              [&](const Tensor& t) { return t.device() == device ? t : t.to(device); });
}

void Module::to(DType dtype) {
  if (!is_floating(dtype)) {
    throw Error(type_name() + ".to(" + std::string(dtype_name(dtype)) +
                "): a module converts only to a floating-point dtype (f32, f64, f16, bf16)");
  }
  // Integer and bool buffers (indices, masks) keep their dtype, as in torch.
  convert_all(*this, "to(" + std::string(dtype_name(dtype)) + ")", [&](const Tensor& t) {
    return is_floating(t.dtype()) && t.dtype() != dtype ? t.to(dtype) : t;
  });
}

}  // namespace zc::nn
